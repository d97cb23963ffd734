"""A real MassGen experiment: two configurations (agent_b on `gpt-4o`, or on `gpt-4o-mini-2024-07-18`)
× 3 questions × 2 repetitions, each repetition one interactive MassGen session under `mastrace run
--experiment`, the four started at once against one loopback server (one `base_url`, so one
configuration hash per model mix; each session told apart by its API key). Per configuration,
`mastrace compare`'s runs, tasks, repetitions, tokens and cost equal what the server's ledgers handed
out and what MassGen's own log folders say. Run with `-s` to see the table.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .conftest import MASTRACE, Run, query, run_massgen
from .fake_llm import Ledger, make_server
from .test_parity import MASSGEN_ROUNDING

EXPERIMENT = "massgen-models"
QUESTIONS = ("What is six times seven?", "Which planet is the largest?", "Name a prime above ten.")
CONFIGS = {
    "gpt-4o": {"b": "gpt-4o", "c": "gpt-4o-mini"},
    "mini": {"b": "gpt-4o-mini-2024-07-18", "c": "gpt-4o-mini"},
}
REPETITIONS = 2


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, list[Run]]]]:
    """The store, and each configuration's MassGen sessions (one per repetition) with their ledgers."""
    root = tmp_path_factory.mktemp("experiment")
    store = root / "store"
    server = make_server(Ledger())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    runs: dict[str, list[Run]] = {}

    def session(name: str, rep: int) -> Run:
        folder = root / f"{name}-{rep}"
        folder.mkdir()
        return run_massgen(
            folder,
            models=CONFIGS[name],
            questions=QUESTIONS,
            interactive=True,
            store=store,
            experiment=EXPERIMENT,
            server=server,
            api_key=f"sk-test-{name}-{rep}",
        )

    try:
        jobs = [(name, rep) for name in CONFIGS for rep in range(REPETITIONS)]
        with ThreadPoolExecutor(len(jobs)) as pool:  # MassGen's start-up is mostly waiting
            done = list(pool.map(lambda job: session(*job), jobs))
        for (name, _), run in zip(jobs, done, strict=True):
            assert run.returncode == 0, run.stderr[-3000:]
            runs.setdefault(name, []).append(run)
    finally:
        server.shutdown()
        server.server_close()
    yield store, runs


def _compare(store: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(MASTRACE), "compare", "--experiment", EXPERIMENT, "--format", "json", "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _configuration_of(store: Path) -> dict[str, str]:
    """Configuration hash → the name of the configuration (by agent_b's model in the snapshot)."""
    rows = query(
        store,
        "SELECT DISTINCT attributes->>'mastrace.config.hash' AS hash, "
        "attributes->>'mastrace.config' AS config FROM records WHERE span_name = 'coordination.session'",
    )
    out = {}
    for row in rows:
        agents = json.loads(str(row["config"]))["massgen"]["config"]["agents"]
        model = next(a["backend"]["model"] for a in agents if a["id"] == "agent_b")
        out[str(row["hash"])] = next(name for name, models in CONFIGS.items() if models["b"] == model)
    return out


def _massgen_totals(run: Run) -> dict[str, float]:
    """Tokens and cost of a whole session from MassGen's own files: its last turn's
    `metrics_summary.json` adds up every turn of the session (MassGen's later turns are cumulative)."""
    turns = run.massgen_turns()
    assert len(turns) == len(QUESTIONS)
    totals = json.loads((turns[-1] / "metrics_summary.json").read_text())["totals"]
    return {
        "input": totals["input_tokens"],
        "output": totals["output_tokens"],
        "cost": totals["estimated_cost"],
    }


def test_each_configuration_has_the_tokens_and_cost_massgen_and_the_server_count(
    experiment: tuple[Path, dict[str, list[Run]]],
) -> None:
    """Per configuration: 6 runs of 3 tasks × 2 repetitions, none failed; input and output tokens equal
    the ledgers' and MassGen's own files'; the cost equals MassGen's (to its 6-decimal rounding)."""
    store, runs = experiment
    compared = _compare(store)
    names = _configuration_of(store)
    assert len(compared["configs"]) == len(CONFIGS)
    table = [
        "| configuration | runs MassGen / mastrace | input tokens ledger / MassGen / mastrace | "
        "output tokens ledger / MassGen / mastrace | cost MassGen / mastrace |",
        "|---|---|---|---|---|",
    ]
    for summary in compared["configs"]:
        name = names[summary["key"]]
        sessions = runs[name]
        ledger_in = sum(r.ledger.input_tokens for r in sessions)
        ledger_out = sum(r.ledger.output_tokens for r in sessions)
        theirs = [_massgen_totals(r) for r in sessions]
        massgen_in = sum(t["input"] for t in theirs)
        massgen_out = sum(t["output"] for t in theirs)
        massgen_cost = sum(t["cost"] for t in theirs)
        massgen_turns = sum(len(r.massgen_turns()) for r in sessions)
        table.append(
            f"| {name} | {massgen_turns} / {summary['runs']} "
            f"| {ledger_in} / {massgen_in} / {summary['input_tokens']:.0f} "
            f"| {ledger_out} / {massgen_out} / {summary['output_tokens']:.0f} "
            f"| {massgen_cost:.6f} / {summary['cost_total']:.6f} |"
        )
        assert (summary["runs"], summary["tasks"], summary["failed"]) == (6, 3, 0)
        assert summary["repetitions_min"] == summary["repetitions_max"] == REPETITIONS
        assert summary["runs"] == massgen_turns
        assert summary["input_tokens"] == ledger_in == massgen_in
        assert summary["output_tokens"] == ledger_out == massgen_out
        assert summary["tokens_per_run"] == pytest.approx((ledger_in + ledger_out) / 6, abs=1e-9)
        assert summary["cost_unknown"] is False
        # MassGen rounds each agent's cost to 6 decimals in its files: 2 agents × 2 sessions.
        assert summary["cost_total"] == pytest.approx(massgen_cost, abs=MASSGEN_ROUNDING * 4)
        assert summary["cost_per_run"] == pytest.approx(summary["cost_total"] / 6, abs=1e-12)
    print("\n".join(table))


def test_each_turn_is_a_run_of_its_question_with_its_configuration_and_outcome(
    experiment: tuple[Path, dict[str, list[Run]]],
) -> None:
    """The integration names each turn's task (the question), its repetition within the session, its
    outcome and the configuration's hash, on the session span every run's figures are read from."""
    store, runs = experiment
    rows = query(
        store,
        "SELECT attributes->>'mastrace.experiment.name' AS experiment, "
        "attributes->>'mastrace.experiment.task_id' AS task, "
        "attributes->>'mastrace.experiment.repetition' AS repetition, "
        "attributes->>'mastrace.experiment.outcome' AS outcome, "
        "attributes->>'mastrace.config.hash' AS hash, attributes->>'massgen.task' AS question "
        "FROM records WHERE span_name = 'coordination.session' ORDER BY start_timestamp",
    )
    names = _configuration_of(store)
    assert len(rows) == len(CONFIGS) * REPETITIONS * len(QUESTIONS)
    for row in rows:
        assert (row["experiment"], row["outcome"], row["repetition"]) == (EXPERIMENT, "success", "0")
        assert row["task"] == row["question"] and row["task"] in QUESTIONS
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (names[str(row["hash"])], str(row["task"]))
        seen[key] = seen.get(key, 0) + 1
    assert seen == {(name, q): REPETITIONS for name in CONFIGS for q in QUESTIONS}
    # Each session asked the questions in order: the ledger's turns are the runs' tasks.
    for sessions in runs.values():
        for run in sessions:
            assert [calls[0]["question"] for calls in run.ledger.turns()] == list(QUESTIONS)
