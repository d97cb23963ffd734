"""Run every benchmark script in turn and print its report (`make bench`).

Each script measures its variants side by side in one process and prints ratios, so the figures
stay meaningful on a shared, noisy machine. Pass `--quick` for smaller sizes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
SCRIPTS = {
    "bench_startup.py": ([], ["--repeat", "5"]),
    "bench_cli_startup.py": ([], ["--repeat", "7"]),
    "bench_tracer.py": ([], ["--n", "3000", "--rounds", "5"]),
    "bench_mixins.py": ([], ["--n", "2000", "--rounds", "5"]),
    "bench_export.py": ([], ["--n", "2000", "--rounds", "5"]),
    "bench_store.py": ([], ["--spans", "20000", "--repeat", "2"]),
    "bench_load.py": ([], ["--sessions", "2000", "--chunk", "250"]),
    "bench_scrub.py": ([], ["--spans", "10000", "--repeat", "2"]),
    "bench_secret_corpus.py": ([], []),
    "bench_outage.py": ([], ["--spans", "50000", "--outage", "2"]),
    "bench_openai.py": ([], ["--n", "20", "--rounds", "5"]),
    "bench_serve.py": ([], ["--spans", "20000"]),
    "bench_serve_ui.py": ([], ["--repeat", "2"]),
    "bench_json.py": ([], ["--n", "2000"]),
    "bench_analyze.py": ([], ["--spans", "100000", "--repeat", "2"]),
    "bench_compare.py": ([], ["--tasks", "20", "--writer", "synthetic", "--repeat", "2"]),
    "bench_query_api.py": ([], ["--sizes", "100000", "--repeat", "2"]),
    "bench_source_bounds.py": ([], ["--repeat", "1"]),
    "bench_massgen.py": ([], ["--rounds", "3"]),
}
# Scripts that need another environment than this one (MassGen pins older releases).
INTERPRETERS = {"bench_massgen.py": HERE.parent / ".venv-massgen" / "bin" / "python"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a minute or two in all)")
    args = parser.parse_args()
    failed = 0
    for script, (full, quick) in SCRIPTS.items():
        print(f"\n=== {script} {' '.join(quick if args.quick else full)}", flush=True)
        python = INTERPRETERS.get(script, Path(sys.executable))
        if not python.exists():
            print(f"--- {script}: needs {python} (`make test` builds it); not run", flush=True)
            failed += 1
            continue
        start = time.perf_counter()
        code = subprocess.call([str(python), str(HERE / script), *(quick if args.quick else full)])
        print(f"--- {script}: exit {code}, {time.perf_counter() - start:.0f} s", flush=True)
        failed += code != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
