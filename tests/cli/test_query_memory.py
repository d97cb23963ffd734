"""`mastrace query` keeps to its memory limit whatever the SQL builds (the kernel holds it too)."""

from __future__ import annotations

from pathlib import Path

import pytest

from seed_run import write_store

from .conftest import MASTRACE, run_measured

BUILDERS = {
    "string": "SELECT length(repeat('x', 1500000000)) AS n",
    "string-out": "SELECT repeat('x', 1500000000) AS s",
    "doubling": "WITH RECURSIVE t(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM t "
    "WHERE length(s) < 2000000000) SELECT max(length(s)) AS n FROM t",
    "list": "SELECT len(range(0, 400000000)) AS n",
    "struct": "SELECT len(list({'a': range, 'b': repeat('y', 100)})) AS n FROM range(20000000)",
}
LIMIT = 300 * 1000**2


def _run(store: Path, sql: str) -> tuple[int, str, int, float]:
    """Exit status, stderr, peak RSS (bytes) and seconds of `mastrace query --memory 300MB sql`."""
    return run_measured([str(MASTRACE), "query", sql, "--store", str(store), "--memory", "300MB"])


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("query-memory") / "store"
    write_store(path)
    return path


def test_what_sql_builds_stays_under_the_memory_limit(store: Path) -> None:
    """Each builder fails with one line and exit 2; the process grows by at most the limit."""
    code, _, baseline, _ = _run(store, "SELECT count(*) FROM records")
    assert code == 0
    for name, sql in BUILDERS.items():
        code, stderr, peak, _ = _run(store, sql)
        assert code == 2 and "memory" in stderr.lower() and stderr.count("\n") == 1, (name, stderr[-2000:])
        assert peak - baseline <= LIMIT + 64 * 2**20, (name, baseline >> 20, peak >> 20)
