"""The tests that run again on the other supported Pythons (`pytest --version-sensitive`).

The whole suite runs on the default Python. Python 3.10 (with DuckDB 1.x: DuckDB 2 ships no 3.10 wheels) and
Python 3.13 run only the tests whose behaviour can depend on the Python or DuckDB version:

- every source module that branches on a version or leans on an interpreter internal (the markers in
  `VERSION_MARKERS`) or runs SQL through DuckDB (`import duckdb`) is covered by the test files `COVERAGE`
  names for it;
- every test file that itself looks at a version (`sys.version_info`, `duckdb.__version__`) runs.

`tests/test_version_selection.py` checks both rules against the code as it is, so a new version-dependent
module or test cannot slip out of the selection unnoticed.
"""

from __future__ import annotations

import re

VERSION_MARKERS = re.compile(
    r"sys\.version_info|duckdb\.__version__|re\._parser|sre_parse|c_make_encoder|TaskGroup|eager_task"
    r"|register_at_fork|forkserver|get_start_method|_interrupt_count"
)
DUCKDB_IMPORT = re.compile(r"^\s*(import duckdb|from duckdb\b)", re.M)
TEST_MARKERS = re.compile(r"sys\.version_info|duckdb\.__version__")

# Source module (relative to src/mastrace) -> the test files that exercise its version-dependent paths.
COVERAGE: dict[str, tuple[str, ...]] = {
    "__init__.py": ("tests/test_children.py",),
    "setup/__init__.py": ("tests/test_children.py",),
    "setup/_children.py": ("tests/test_children.py",),
    "tracing/_state.py": ("tests/test_children.py",),
    "setup/_config.py": ("tests/test_lifecycle.py", "tests/exporters/test_exit.py"),
    "setup/_benchmark_info.py": ("tests/test_benchmark_info.py",),
    "tracing/_context.py": (
        "tests/test_context.py",
        "tests/test_nesting_massgen.py",
        "tests/test_streams.py",
    ),
    "tracing/_snapshot.py": ("tests/test_snapshot.py", "tests/store/test_json_paths.py"),
    "scrubbing/_required.py": ("tests/scrubbing/test_required.py", "tests/scrubbing/test_matchers.py"),
    "integrations/_massgen_turns.py": ("tests/integrations/test_massgen_turns.py",),
    "analysis/_select.py": ("tests/analysis/test_select.py",),
    "analysis/_source.py": ("tests/analysis/test_source.py", "tests/cli/test_source.py"),
    "analysis/_store.py": ("tests/analysis/test_store.py",),
    "analysis/_open.py": ("tests/store/test_pending.py", "tests/cli/test_pending_cli.py"),
    "analysis/_wire.py": ("tests/analysis/test_wire.py",),
    "cli/_commands.py": ("tests/cli/test_query.py",),
    "mcp_server/_tools.py": ("tests/mcp_server/test_tools.py",),
    "serve/_query_api.py": ("tests/serve/test_query_api.py",),
    "serve/_query_process.py": ("tests/serve/test_query_process.py",),
    "store/_limits.py": ("tests/cli/test_query.py",),
    "store/_sql_compat.py": ("tests/store/test_sql_compat.py", "tests/store/test_seed_queries.py"),
    "store/_compact.py": ("tests/store/test_compact.py",),
    "store/_replay_compacted.py": ("tests/cli/test_push_compacted.py",),
    "store/_writer.py": ("tests/store/test_pending.py",),
    "store/reader.py": ("tests/store/test_reader.py", "tests/store/test_concurrency.py"),
}

# Test files that look at a version themselves.
VERSION_TESTS: tuple[str, ...] = ("tests/test_context.py", "tests/test_deploy_configs.py")

SELECTED: frozenset[str] = frozenset(
    {path for paths in COVERAGE.values() for path in paths} | set(VERSION_TESTS)
)
