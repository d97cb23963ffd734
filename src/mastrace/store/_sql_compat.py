"""SQL written for Logfire (and DuckDB 2) read the same way on DuckDB 1.x.

DuckDB 1.x gives the JSON arrows `->` and `->>` the low precedence of its lambda arrow, so
`span_name LIKE 'agent.%' AND attributes->>'k' IS NOT NULL` is read as
`(span_name LIKE 'agent.%' AND attributes)->>'k' IS NOT NULL` and fails (or filters wrongly). Python
3.10 only gets DuckDB 1.x wheels, so on DuckDB 1.x each arrow chain whose keys are constants
(`attributes->'a'->>'b'`, `records.attributes->>'k'`, `json(x)->>'k'`) is put in parentheses before
the SQL runs, using DuckDB's own tokenizer so that strings and comments are never touched.
"""

from __future__ import annotations

from typing import Final

import duckdb

__all__ = ["parenthesize_arrows", "portable_sql"]

OLD_ARROW_PRECEDENCE: Final = int(duckdb.__version__.split(".", 1)[0]) < 2
_ARROWS: Final = frozenset({"->", "->>"})
_T = duckdb.token_type
# Keywords that may stand before a parenthesised operand without calling it as a function.
_NOT_FUNCTIONS: Final = frozenset({
    "all", "and", "any", "as", "between", "by", "case", "distinct", "else", "exists", "filter", "from",
    "glob", "having", "ilike", "in", "is", "like", "not", "on", "or", "over", "select", "similar", "then",
    "using", "when", "where", "with",
})  # fmt: skip


def portable_sql(sql: str) -> str:
    """`sql` as DuckDB 2 reads it, whatever DuckDB version is installed."""
    if not OLD_ARROW_PRECEDENCE or "->" not in sql:
        return sql
    return parenthesize_arrows(sql)


def parenthesize_arrows(sql: str) -> str:
    """Put every `operand->'key'->>'key'` chain of `sql` in parentheses (any DuckDB version)."""
    try:
        tokens = duckdb.tokenize(sql)
    except (duckdb.Error, RuntimeError):  # let the query itself report the syntax error
        return sql
    starts = [pos for pos, _ in tokens] + [len(sql)]
    texts = [sql[starts[i] : starts[i + 1]].rstrip() for i in range(len(tokens))]
    kinds = [kind for _, kind in tokens]

    def is_key(i: int) -> bool:
        if i >= len(tokens) or kinds[i] not in (_T.string_const, _T.numeric_const):
            return False
        return kinds[i] == _T.numeric_const or (len(texts[i]) > 1 and texts[i].endswith("'"))

    def is_arrow(i: int) -> bool:
        return 0 <= i < len(tokens) and texts[i] in _ARROWS and is_key(i + 1)

    inserts: list[tuple[int, str]] = []
    i = 0
    while i < len(tokens):
        if not is_arrow(i) or i == 0:
            i += 1
            continue
        first = _operand_start(texts, kinds, i - 1)
        if first is None:
            i += 1
            continue
        last = i + 1
        while is_arrow(last + 1):
            last += 2
        if last + 1 < len(tokens) and texts[last + 1] == "::":  # `x->>'k'::int` keeps DuckDB 1's reading
            i = last + 1
            continue
        inserts.append((starts[first], "("))
        inserts.append((starts[last] + len(texts[last]), ")"))
        i = last + 1
    for pos, text in sorted(inserts, key=lambda item: item[0], reverse=True):
        sql = sql[:pos] + text + sql[pos:]
    return sql


def _operand_start(texts: list[str], kinds: list[duckdb.token_type], end: int) -> int | None:
    """The first token of the operand that ends at token `end`: `a.b.c`, `f(...)` or `(...)`."""
    if texts[end] == ")":
        depth = 0
        for j in range(end, -1, -1):
            depth += texts[j] == ")"
            depth -= texts[j] == "("
            if depth == 0:
                return j - 1 if j > 0 and _calls(texts[j - 1], kinds[j - 1]) else j
        return None
    if kinds[end] != _T.identifier:
        return None
    while end >= 2 and texts[end - 1] == "." and kinds[end - 2] == _T.identifier:
        end -= 2
    return end


def _calls(text: str, kind: duckdb.token_type) -> bool:
    """Whether a token before `(` is a function's name (`json(x)`, `coalesce(...)`)."""
    return kind == _T.identifier or (kind == _T.keyword and text.lower() not in _NOT_FUNCTIONS)
