"""Redraw the README's screenshots of `mastrace serve` in Debian's Chromium.

Usage: `python docs/make_screenshots.py MASSGEN_STORE DEMO_STORE [EXPERIMENT_STORE]`, where MASSGEN_STORE
holds a MassGen run (for example the store of `tests_massgen`'s run, or `mastrace run -- massgen --automation
...`) and DEMO_STORE two runs of `examples/coordination_demo.py` with different `--model`s. Writes
`docs/serve-runs.png`, `docs/serve-waterfall.png`, `docs/serve-report.png` and `docs/serve-diff.png`, the
coordination graph of the MassGen run, `docs/screens/massgen-coordination-graph.png`, and the
Experiments page's `docs/screens/experiments-configurations.png` and `docs/screens/experiments-matrix.png` of
EXPERIMENT_STORE (written first, when it does not exist, with the README's experiment: two models × 10 tasks ×
3 repetitions, seeded). `python docs/make_screenshots.py --experiments [EXPERIMENT_STORE]` redraws those
two only.

`python docs/make_screenshots.py --massgen-graph [MASSGEN_STORE]` redraws the coordination graph only; when
MASSGEN_STORE (default `.artifacts/massgen-store`) holds no run yet, real MassGen runs into it first, as
`tests_massgen`'s three-agent run does (`tests_massgen/conftest.py`'s `run_massgen`: agent_a with an MCP
server, agent_b answering late so that the votes cast before its answer are discarded), against the loopback
OpenAI-compatible server, from `.venv-massgen` (`make .venv-massgen/.synced`).
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from mastrace.serve import start_intake

DOCS = Path(__file__).resolve().parent
_EXPERIMENT_STORE = str(DOCS.parent / ".artifacts" / "experiment-store")
_MASSGEN_STORE = str(DOCS.parent / ".artifacts" / "massgen-store")
_MASSGEN_PYTHON = DOCS.parent / ".venv-massgen" / "bin" / "python"
# Run in `.venv-massgen` (MassGen pins its own releases): tests_massgen's three-agent run, into a store.
_MASSGEN_RUN = """
import sys
from pathlib import Path

from tests_massgen.conftest import MODELS, run_massgen
from tests_massgen.fake_llm import Plan

folder, store = Path(sys.argv[1]), Path(sys.argv[2])
folder.mkdir(parents=True, exist_ok=True)
run = run_massgen(folder, plan=Plan(late={MODELS["b"]: 1.5}), store=store)
sys.stderr.write(run.stderr[-4000:] if run.returncode else "")
sys.exit(run.returncode)
"""


def shoot(store: str, shots: dict[str, str], page: Page, select: str | None = None) -> None:
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        for name, path in shots.items():
            page.goto(f"http://127.0.0.1:{server.http_port}{path}")
            page.wait_for_load_state("networkidle")
            if select and name == "serve-waterfall.png":
                page.wait_for_selector(".row")
                page.click(select)
                page.wait_for_selector("#details tr[data-key]")
            page.screenshot(path=str(DOCS / name))
    finally:
        server.stop()


def write_massgen(store: Path) -> None:
    """A real MassGen run of three agents into `store` (see the module's docstring)."""
    if not _MASSGEN_PYTHON.exists():
        raise SystemExit(f"no {_MASSGEN_PYTHON}: run `make .venv-massgen/.synced` first")
    folder = store.parent / (store.name + "-massgen")
    subprocess.run(
        [str(_MASSGEN_PYTHON), "-c", _MASSGEN_RUN, str(folder), str(store)],
        cwd=DOCS.parent,
        check=True,
        timeout=1200,
    )


def shoot_graph(store: str, page: Page) -> None:
    """The coordination graph of the store's latest run, as the run page draws it ("graph")."""
    if not (Path(store) / "segments").is_dir():
        write_massgen(Path(store))
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        page.goto(f"http://127.0.0.1:{server.http_port}/runs/latest")
        page.wait_for_selector(".row")
        page.click("#show-graph")
        page.wait_for_selector("#graph svg.coordination-graph")
        page.wait_for_load_state("networkidle")
        box = page.locator("#graph svg.coordination-graph").bounding_box()
        assert box is not None
        margin = 16  # the drawing with a little of the panel around it
        page.screenshot(
            path=str(DOCS / "screens" / "massgen-coordination-graph.png"),
            clip={
                "x": max(0, box["x"] - margin),
                "y": max(0, box["y"] - margin),
                "width": box["width"] + 2 * margin,
                "height": box["height"] + 2 * margin,
            },
        )
    finally:
        server.stop()


def write_experiment(store: Path) -> None:
    """The README's experiment, seeded: two models × 10 tasks × 3 repetitions, a pass/fail and a number."""
    import mastrace

    rng = random.Random(7)
    mastrace.configure(local=store, experiment="prompt-v2", service_name="experiment")
    for model, p in (("gpt-4o", 0.8), ("gpt-4o-mini", 0.55)):
        for task in [f"q{i}" for i in range(10)]:
            for rep in range(3):
                config = {"agents": {"solver": {"model": model, "temperature": 0.2}}}
                with mastrace.experiment_run(task, repetition=rep, config=config) as run:
                    run.record_evaluation("correct", score=rng.random() < p, evaluator="exact_match")
                    run.record_evaluation("quality", score=round(rng.betavariate(4 * p, 2), 3))
    mastrace.shutdown()


def shoot_experiments(store: str, page: Page) -> None:
    if not (Path(store) / "segments").is_dir():
        write_experiment(Path(store))
    server = start_intake(store, http_port=0, grpc_port=None)
    try:
        page.goto(
            f"http://127.0.0.1:{server.http_port}/experiments"
            "?experiment=prompt-v2&by=agents.solver.model&baseline=gpt-4o&score=correct"
        )
        page.wait_for_selector("#against:not([hidden]) tr.delta")
        page.locator("#summary-section").screenshot(
            path=str(DOCS / "screens" / "experiments-configurations.png")
        )
        page.select_option("#score", "quality")
        page.wait_for_selector("#matrix-title:has-text('quality')")
        page.locator("#matrix-section").screenshot(path=str(DOCS / "screens" / "experiments-matrix.png"))
    finally:
        server.stop()


def main() -> None:
    if sys.argv[1] == "--massgen-graph":  # the coordination graph of a real MassGen run only
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True
            )
            page = browser.new_page(viewport={"width": 1500, "height": 1400})
            shoot_graph(sys.argv[2] if len(sys.argv) > 2 else _MASSGEN_STORE, page)
            browser.close()
        return
    if sys.argv[1] == "--experiments":  # the Experiments page's screenshots only
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True
            )
            page = browser.new_page(viewport={"width": 1500, "height": 1400})
            shoot_experiments(sys.argv[2] if len(sys.argv) > 2 else _EXPERIMENT_STORE, page)
            browser.close()
        return
    massgen, demo = sys.argv[1], sys.argv[2]
    experiments = sys.argv[3] if len(sys.argv) > 3 else _EXPERIMENT_STORE
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": 1500, "height": 860})
        llm_call = ".row:has(.label:text-is('llm.chatcompletion.stream')) >> nth=0"
        shoot(massgen, {"serve-waterfall.png": "/runs/latest"}, page, llm_call)
        shoot(
            demo,
            {
                "serve-runs.png": "/",
                "serve-report.png": "/runs/latest/report",
                "serve-diff.png": "/diff?a=previous&b=latest",
            },
            page,
        )
        page.set_viewport_size({"width": 1500, "height": 1400})
        shoot_graph(massgen, page)
        shoot_experiments(experiments, page)
        browser.close()


if __name__ == "__main__":
    main()
