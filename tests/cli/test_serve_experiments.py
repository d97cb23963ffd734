"""The Experiments page of `mastrace serve` in Debian's Chromium: each configuration with its scores'
95% intervals drawn, the differences against a baseline, a task × repetition matrix coloured by score
whose cells open their runs, new runs appearing while the page is open, hostile names shown as text,
and the same JSON as `mastrace compare --format json` (also over `serve --source chdb://…`).

The runs are written through the real SDK (`mastrace.experiment_run`, `record_evaluation`) into a store.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page

import mastrace
from hostile_run import ELSEWHERE
from mastrace.serve import IntakeServer, start_intake

from .conftest import ROOT, make_runner
from .test_serve_browser import url

EXPERIMENT = "exp-ui"
TASKS = [f"t{i}" for i in range(4)]
REPS = 3
MODELS = {"A": "model-a", "B": "model-b"}
WAIT_MS = 120_000  # an upper bound for a loaded machine; never a speed requirement
XSS = f"<img src='{ELSEWHERE}/x.png' onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>"
ARTIFACTS = Path(os.environ.get("MASTRACE_TEST_ARTIFACTS", ROOT / ".artifacts"))


def correct(group: str, task: int, rep: int) -> bool:
    """Model A passes most repetitions, model B fewer; some tasks flip between repetitions."""
    return (task + rep) % 4 != 0 if group == "A" else (task * rep) % 3 == 0


def quality(group: str, task: int, rep: int) -> float:
    return round(0.1 * task + 0.05 * rep + (0.3 if group == "A" else 0.0), 3)


def write_runs(
    store: Path,
    groups: tuple[str, ...] = ("A", "B"),
    *,
    experiment: str = EXPERIMENT,
    task_names: list[str] | None = None,
    variant: str | None = None,
) -> dict[tuple[str, str, int], str]:
    """Write every task × repetition of each configuration in `groups`; (group, task, rep) → trace id.
    Model B's run of t1, repetition 2 fails (raises) and records no score."""
    mastrace.configure(local=store, service_name="experiments-ui")
    traces: dict[tuple[str, str, int], str] = {}
    for group in groups:
        for i, task in enumerate(task_names or TASKS):
            for rep in range(REPS):
                extra = {"variant": variant or group}
                run = mastrace.experiment_run(
                    task,
                    repetition=rep,
                    experiment=experiment,
                    config={"agents": {"a": {"model": MODELS[group]}}},
                    attributes=extra,
                )
                failing = group == "B" and i == 1 and rep == 2
                try:
                    with run:
                        if failing:
                            raise RuntimeError("the agent gave up")
                        run.record_evaluation("correct", score=correct(group, i, rep))
                        run.record_evaluation("quality", score=quality(group, i, rep))
                except RuntimeError:
                    assert failing
                assert run.trace_id is not None
                traces[(group, task, rep)] = run.trace_id
    mastrace.shutdown()
    return traces


@pytest.fixture
def opened(page: Page) -> Page:
    page.set_default_timeout(WAIT_MS)
    return page


def _compare_json(store: Path, *args: str) -> dict[str, object]:
    result = make_runner(store.parent)("compare", "--format", "json", *args, store=store)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_the_page_draws_each_configuration_with_its_intervals(server: IntakeServer, opened: Page) -> None:
    """Each configuration is a row with its runs and failures; each score's mean and interval are the
    CLI's figures, drawn as a bar from low to high with the mean's dot inside; the mean is the mean
    over tasks of each task's mean, recomputed here from what was written."""
    store = server.intake.store
    write_runs(store)
    expected = _compare_json(store, "--experiment", EXPERIMENT)
    opened.goto(url(server, "/experiments"))
    opened.wait_for_selector("tr.config")
    configs = opened.locator("tr.config")
    assert configs.count() == 2
    by_key = {c["key"]: c for c in expected["configs"]}  # type: ignore[attr-defined]
    for i in range(2):
        row = configs.nth(i).locator("td").all_text_contents()
        summary = by_key[row[0]]
        assert row[1:5] == [
            str(summary["runs"]),
            "4",
            "3",
            f"{summary['failed']} ({round(100 * summary['failure_rate'])}%)",
        ]
    failed = {row[0]: row[4] for row in (configs.nth(i).locator("td").all_text_contents() for i in range(2))}
    assert sorted(failed.values()) == ["0 (0%)", "1 (8%)"]
    for group in ("A", "B"):
        # The mean over tasks of each task's mean over its scored repetitions (B's failed run has none).
        means = []
        for i in range(len(TASKS)):
            reps = [correct(group, i, r) for r in range(REPS) if not (group == "B" and i == 1 and r == 2)]
            means.append(sum(reps) / len(reps))
        key = next(k for k in by_key if _model_of(store, k) == MODELS[group])
        score = next(s for s in by_key[key]["scores"] if s["name"] == "correct")
        assert score["mean"] == pytest.approx(sum(means) / len(means), abs=1e-12)
        row = opened.locator(f".score[data-score='correct'] tr.score-row[data-key='{key}']")
        text = row.locator("td.ci-text").text_content() or ""
        shown = [float(v) for v in text.replace("[", " ").replace("]", " ").replace(",", " ").split()]
        assert shown == pytest.approx([score["mean"], score["low"], score["high"]], abs=0.0006), text
        ci = row.locator("svg.interval line.ci")
        dot = row.locator("svg.interval circle.mean")
        assert float(ci.get_attribute("data-low") or "nan") == pytest.approx(score["low"])
        assert float(ci.get_attribute("data-high") or "nan") == pytest.approx(score["high"])
        x1, x2 = float(ci.get_attribute("x1") or 0), float(ci.get_attribute("x2") or 0)
        cx = float(dot.get_attribute("cx") or 0)
        assert x1 <= cx <= x2 and x1 < x2
    # Against a baseline: the paired difference per score, drawn around zero, with what changed.
    base = next(k for k in by_key if _model_of(store, k) == MODELS["A"])
    opened.select_option("#baseline", base)
    opened.wait_for_selector("#against:not([hidden]) tr.delta")
    with_base = _compare_json(store, "--experiment", EXPERIMENT, "--baseline", base)
    deltas = opened.locator("tr.delta")
    assert deltas.count() == len(with_base["deltas"]) == 2  # type: ignore[arg-type]
    first = deltas.nth(0).locator("td").all_text_contents()
    d = with_base["deltas"][0]  # type: ignore[index]
    assert first[1] == d["score"]
    assert first[4] == ("yes" if d["excludes_zero"] else "no")
    assert "agents.a.model: model-a → model-b" in first[8]
    assert deltas.nth(0).locator("svg.interval line.zero").count() == 1
    assert f"baseline={base}" in opened.url


def _model_of(store: Path, key: str) -> str:
    """The model of configuration `key`, from its snapshot in the store."""
    from mastrace.analysis import TraceStore

    with TraceStore(store) as traces:
        rows = traces.rows(
            "SELECT attributes->>'mastrace.config' AS c FROM records "
            "WHERE attributes->>'mastrace.config.hash' = ? LIMIT 1",
            [key],
        )
    return str(json.loads(rows[0]["c"])["agents"]["a"]["model"])


def test_the_matrix_colours_each_repetition_and_opens_its_run(server: IntakeServer, opened: Page) -> None:
    """The task × repetition matrix has one cell per run, its score as text and colour (pass green,
    fail red, a failed run outlined, a missing score grey), and a click opens that run's waterfall."""
    store = server.intake.store
    traces = write_runs(store)
    opened.goto(url(server, f"/experiments?experiment={EXPERIMENT}&score=correct"))
    opened.wait_for_selector("#matrix tr.task-row")
    assert opened.locator("#matrix tr.task-row").count() == len(TASKS)
    cells = opened.locator("#matrix td.cell")
    assert cells.count() == 2 * len(TASKS) * REPS
    found = {}
    for i in range(cells.count()):
        cell = cells.nth(i)
        found[cell.get_attribute("data-trace-id")] = (
            cell.get_attribute("data-score"),
            cell.text_content(),
            cell.evaluate("e => getComputedStyle(e).backgroundColor"),
            "failed" in (cell.get_attribute("class") or ""),
        )
    assert set(found) == set(traces.values())
    for (group, task, rep), trace_id in traces.items():
        score, text, colour, failed = found[trace_id]
        if group == "B" and task == "t1" and rep == 2:
            assert (score, text, failed) == (None, "·", True)
            continue
        passed = correct(group, TASKS.index(task), rep)
        assert (score, text, failed) == ("1" if passed else "0", "pass" if passed else "fail", False)
        assert colour == ("rgb(187, 247, 208)" if passed else "rgb(254, 202, 202)")
    # A numeric score is coloured on its own range, from red (lowest) to green (highest).
    opened.select_option("#score", "quality")
    opened.wait_for_selector("#matrix-title:has-text('quality')")

    def rgb(score: str) -> list[int]:
        colour = opened.locator(f"#matrix td.cell[data-score='{score}']").first.evaluate(
            "e => getComputedStyle(e).backgroundColor"
        )
        return [int(v) for v in colour[colour.index("(") + 1 : -1].split(",")]

    values = [quality(g, i, r) for g in "AB" for i in range(len(TASKS)) for r in range(REPS)]
    low, high = rgb(f"{min(values):g}"), rgb(f"{max(values):g}")
    assert low[0] > low[1] and high[1] > high[0]  # red at the lowest, green at the highest
    assert "score=quality" in opened.url
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    opened.screenshot(path=str(ARTIFACTS / "serve-experiments.png"), full_page=True)
    # A cell opens its run.
    trace_id = traces[("A", "t2", 1)]
    opened.click(f"#matrix td.cell[data-trace-id='{trace_id}'] a")
    opened.wait_for_selector(".row:has-text('Experiment run: task t2 repetition 1')")
    assert opened.url.endswith(f"/runs/{trace_id}")


def test_runs_that_finish_while_the_page_is_open_appear(server: IntakeServer, opened: Page) -> None:
    """The page polls as the runs list does: a configuration whose runs end after it opened appears
    in the table and the matrix without a reload."""
    store = server.intake.store
    opened.goto(url(server, "/experiments"))
    opened.wait_for_selector("#empty:has-text('No experiment runs yet')")
    write_runs(store, ("A",))
    opened.wait_for_selector("#status:has-text('1 configuration(s), 12 run(s), live')")
    assert opened.locator("#experiment").input_value() == EXPERIMENT
    write_runs(store, ("B",))
    opened.wait_for_selector("#status:has-text('2 configuration(s), 24 run(s), live')")
    assert opened.locator("tr.config").count() == 2
    assert opened.locator("#matrix td.cell").count() == 2 * len(TASKS) * REPS


def test_hostile_experiment_configuration_and_task_names_stay_text(
    server: IntakeServer, browser: Browser
) -> None:
    """An experiment, a configuration (grouped by an attribute) and tasks named with HTML and scripts
    are shown as the text they are: nothing runs, no element is made of them, nothing is fetched."""
    store = server.intake.store
    write_runs(store, ("A",), experiment=XSS, task_names=[XSS + str(i) for i in range(2)], variant=XSS)
    origin = f"http://127.0.0.1:{server.http_port}"
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    requested: list[str] = []
    context.on("request", lambda request: requested.append(request.url))
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.on("dialog", lambda dialog: pytest.fail(f"a name opened a dialog: {dialog.message}"))
    try:
        page.goto(origin + "/experiments?" + str(httpx.QueryParams({"by": "variant"})))
        page.wait_for_selector("#matrix tr.task-row")
        assert page.locator("#experiment option:checked").text_content() == XSS
        assert page.locator("tr.config td.key code").text_content() == XSS
        tasks = page.locator("#matrix td.task").all_text_contents()
        assert tasks == [XSS + "0", XSS + "1"]
        assert page.locator("#matrix th.group code").text_content() == XSS
        assert page.evaluate("() => window.__pwned") is None
        assert page.locator("img, script:not([src])").count() == 1  # the page's own inline script
    finally:
        context.close()
    assert [u for u in requested if not u.startswith((origin + "/", "data:"))] == []


def test_the_api_answers_what_the_cli_prints(server: IntakeServer) -> None:
    """`/api/compare` is `mastrace compare --format json` (same experiment, grouping, baseline and seed)
    byte for byte, and `/api/experiments` is `mastrace experiments --format json`; a baseline that names
    no configuration is a 400 that says so."""
    store = server.intake.store
    write_runs(store)
    base = _compare_json(store)["configs"][0]["key"]  # type: ignore[index]
    runner = make_runner(store.parent)
    origin = f"http://127.0.0.1:{server.http_port}"
    with httpx.Client(base_url=origin, timeout=WAIT_MS / 1000) as client:
        for query, args in (
            ({"experiment": EXPERIMENT}, ["--experiment", EXPERIMENT]),
            (
                {"experiment": EXPERIMENT, "baseline": base, "seed": "7"},
                ["--experiment", EXPERIMENT, "--baseline", base, "--seed", "7"],
            ),
            ({"by": "variant"}, ["--by", "variant"]),
        ):
            printed = runner("compare", "--format", "json", *args, store=store)
            assert printed.returncode == 0, printed.stderr
            answer = client.get("/api/compare", params=query)
            assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
            assert answer.text == printed.stdout
        listed = runner("experiments", "--format", "json", store=store)
        assert client.get("/api/experiments").text == listed.stdout
        wrong = client.get("/api/compare", params={"experiment": EXPERIMENT, "baseline": "nothing-like-it"})
        assert wrong.status_code == 400 and "is not a configuration of this experiment" in wrong.text
        assert client.get("/api/compare", params={"seed": "x"}).status_code == 400


def test_serve_source_shows_the_same_experiment_as_the_store(tmp_path: Path) -> None:
    """`serve --source chdb://…` answers `/api/compare` and `/api/experiments` with what a serve over
    the store the spans were pushed from answers."""
    pytest.importorskip("chdb")
    store = tmp_path / "store"
    write_runs(store)
    source = f"chdb://{tmp_path / 'ch'}"
    pushed = make_runner(tmp_path)("push", "--to", source, "--store", str(store))
    assert pushed.returncode == 0, pushed.stderr
    answers = []
    for where, given in ((store, None), (tmp_path / "unused", source)):
        running = start_intake(where, http_port=0, grpc_port=None, source=given)
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{running.http_port}", timeout=WAIT_MS / 1000
            ) as client:
                compared = client.get("/api/compare", params={"experiment": EXPERIMENT})
                listed = client.get("/api/experiments")
        finally:
            running.stop()
        assert compared.status_code == 200, compared.text
        answers.append((compared.json(), listed.json()))
    assert answers[0] == answers[1]
    assert [c["runs"] for c in answers[0][0]["configs"]] == [12, 12]
