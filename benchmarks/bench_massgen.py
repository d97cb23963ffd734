"""A real MassGen 0.1.97 run (2 agents, loopback OpenAI-compatible server) with and without
`instrument_massgen()` (goal <= 1.05x wall). Needs MassGen: run it with the MassGen environment,
`.venv-massgen/bin/python benchmarks/bench_massgen.py` (built by `make test`).

MassGen is imported once; the variants alternate `--rounds` times. "without" is MassGen as shipped
(its tracing off); "with" records every span into a local store, flushed after each run. The
median run is compared.

Run: `.venv-massgen/bin/python benchmarks/bench_massgen.py [--rounds N]`
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests_massgen.conftest import write_config
from tests_massgen.fake_llm import Ledger, make_server

import mastrace
from mastrace.integrations.massgen import instrument_massgen, uninstrument_massgen
from mastrace.integrations.openai import uninstrument_openai


def one_run(config: Path, cli_main: object) -> float:
    sys.argv = ["massgen", "--automation", "--config", str(config), "What is six times seven?"]
    start = time.perf_counter()
    quiet = io.StringIO()
    with (
        contextlib.redirect_stdout(quiet),
        contextlib.redirect_stderr(quiet),
        contextlib.suppress(SystemExit),
    ):
        cli_main()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-massgen-"))
    os.environ.update(
        {"HOME": str(tmp), "OPENAI_API_KEY": "sk-bench-not-real", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    )
    os.chdir(tmp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from massgen.cli import cli_main
    mastrace.configure(local=str(tmp / "store"), service_name="bench-massgen")
    times: dict[str, list[float]] = {"without": [], "with": []}
    spans = 0
    for i in range(args.rounds + 1):
        for variant in ("without", "with") if i % 2 else ("with", "without"):
            ledger = Ledger()
            server = make_server(ledger)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            config = write_config(tmp, f"http://127.0.0.1:{server.server_address[1]}/v1")
            if variant == "with":
                instrument_massgen()
            seconds = one_run(config, cli_main)
            if variant == "with":
                result = mastrace.force_flush()
                spans += result.exported
                uninstrument_massgen()
                uninstrument_openai()
            server.shutdown()
            server.server_close()
            if i:  # the first pair warms caches
                times[variant].append(seconds)
    without, with_ = statistics.median(times["without"]), statistics.median(times["with"])
    for variant, values in times.items():
        print(f"  {variant:8} " + " ".join(f"{v:.3f}" for v in values))
    print(f"MassGen run, median of {args.rounds}: without {without:.3f} s, instrumented {with_:.3f} s")
    print(f"  ratio with/without: {with_ / without:.3f}x (goal <= 1.05x); {spans} spans stored")


if __name__ == "__main__":
    main()
