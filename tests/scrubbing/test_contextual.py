"""Credentials found by their context (`_contextual`), the password-hash and token families, and the
scrubber's precision on ordinary agent content.

`corpus/secrets.jsonl` holds credentials in every context family (prose without a separator, aligned
assignments, call arguments, XML, command lines, `.netrc`, log lines; password hashes, compact names,
`key`, dotted tokens, prefixes in another case, a service's name alone in .env, YAML, JSON, shell,
code, flags and prose) and look-alikes that must be kept (references, identifiers, prose, model names,
regions, URLs, UUIDs, commits and safe-named keys next to a service's name). `corpus/ordinary/` is
agent content without a secret: code in several languages, configs, a shell session, Markdown with
hashes, ids, digests, a base64 image, URLs and model names.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mastrace.pipeline._transform import prepare_span
from mastrace.scrubbing._contextual import (
    SERVICE_GATE,
    find_in_context,
    looks_random,
    secret_name_strength,
    service_candidate,
)
from mastrace.scrubbing._engine import Scrubber, ScrubTrail
from mastrace.scrubbing._matchers import available
from mastrace.scrubbing._table import MIN_TOKEN_LEN, run_map
from mastrace.tracing._snapshot import Limits

CORPUS = Path(__file__).with_name("corpus")
ITEMS = [json.loads(line) for line in (CORPUS / "secrets.jsonl").read_text(encoding="utf-8").splitlines()]
POSITIVES = [item for item in ITEMS if item.get("secrets")]
NEGATIVES = [item for item in ITEMS if not item.get("secrets")]
ORDINARY = sorted(p for p in (CORPUS / "ordinary").iterdir() if p.is_file())

ORDINARY_REPLACEMENTS = {"run_config.json": 1}
"""The replacements allowed in the ordinary corpus, by file: `run_config.json` has a `"secrets"` key,
which is blanked by its name (its values are a reference and `"env"`; the key names a secret)."""


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(matcher="python")


@pytest.fixture(scope="module")
def tracer() -> tuple[Any, _Collect]:
    collect = _Collect()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(collect))
    return provider.get_tracer("test_contextual"), collect


def _placed(scrubber: Scrubber, tracer: tuple[Any, _Collect], text: str, placement: str) -> tuple[str, str]:
    """(what went in, what came out) for `text` in `placement`."""
    if placement == "attribute":
        return text, scrubber.scrub_attribute("note", text, ("attributes",), ScrubTrail())
    if placement == "prose":
        value = f"The tool answered: {text} — then the agent went on."
        return value, scrubber.scrub_attribute("detail", value, ("attributes",), ScrubTrail())
    if placement == "config":
        value = json.dumps({"llm": {"model": "gpt-4o", "note": text}}, indent=2)
        return value, scrubber.scrub_attribute("mastrace.config", value, ("attributes",), ScrubTrail())
    otel, collect = tracer
    collect.spans.clear()
    with otel.start_as_current_span(text if placement == "span name" else "probe") as span:
        if placement == "exception":
            span.record_exception(RuntimeError(text))
        elif placement == "event":
            span.add_event(text)
    out = prepare_span(collect.spans[-1], scrubber, Limits())
    if placement == "span name":
        return text, out.name
    if placement == "event":
        return text, out.events[0].name
    return text, str(dict(out.events[0].attributes or {})["exception.message"])


PLACEMENTS = ["attribute", "prose", "config", "exception", "span name", "event"]


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_positive_is_caught_in_every_placement(
    scrubber: Scrubber, tracer: tuple[Any, _Collect], placement: str
) -> None:
    """No secret of the positive corpus survives, in any placement (nor as JSON spells it)."""
    leaked = []
    for item in POSITIVES:
        _, out = _placed(scrubber, tracer, item["text"], placement)
        spelled = set(item["secrets"]) | {json.dumps(s)[1:-1] for s in item["secrets"]}
        if any(s in out for s in spelled) or "[Scrubbed" not in out:
            leaked.append((item["family"], item["context"], item["text"]))
    assert not leaked


@pytest.mark.parametrize("placement", PLACEMENTS)
def test_every_negative_is_untouched_in_every_placement(
    scrubber: Scrubber, tracer: tuple[Any, _Collect], placement: str
) -> None:
    """References, identifiers and prose come out byte for byte, in any placement."""
    changed = []
    for item in NEGATIVES:
        value, out = _placed(scrubber, tracer, item["text"], placement)
        if out != value:
            changed.append((item["text"], out))
    assert not changed


def test_the_corpus_covers_every_context_and_family() -> None:
    """The positive corpus holds each context family and credential family the finder reads."""
    contexts = {item["context"] for item in POSITIVES}
    families = {item["family"] for item in POSITIVES}
    assert {
        "prose", "assignment", "call argument", "xml element", "xml attribute", "command line", "netrc",
        "log line", "config",
    } <= contexts  # fmt: skip
    assert {
        "password hash", "compact name", "key", "dotted token", "prefix case", "service word", "password",
        "secret word", "service name",
    } <= families  # fmt: skip
    assert len(NEGATIVES) >= 50


@pytest.mark.parametrize("matcher", available())
def test_every_matcher_gives_the_same_output_on_the_corpus(matcher: str, scrubber: Scrubber) -> None:
    """Hyperscan, RE2 and the pure-Python first pass scrub the corpus identically."""
    other = Scrubber(matcher=matcher)
    for item in ITEMS:
        assert other.scrub_text(item["text"]) == scrubber.scrub_text(item["text"]), item["text"]


@pytest.mark.parametrize("path", ORDINARY, ids=[p.name for p in ORDINARY])
def test_ordinary_content_is_left_alone(scrubber: Scrubber, path: Path) -> None:
    """Each file of ordinary agent content, scrubbed whole, has at most its documented replacements;
    one without is the same object, and in one with, every line not holding a replacement is kept."""
    text = path.read_text(encoding="utf-8")
    out = scrubber.scrub_attribute("note", text, ("attributes",), ScrubTrail())
    allowed = ORDINARY_REPLACEMENTS.get(path.name, 0)
    assert out.count("[Scrubbed") == allowed, out
    if not allowed:
        assert out is text
    else:
        kept = [line for line in out.splitlines() if "[Scrubbed" not in line]
        assert set(kept) <= set(text.splitlines())
        assert len(out.splitlines()) >= len(kept) + allowed


def test_ordinary_lines_are_left_alone(scrubber: Scrubber) -> None:
    """Line by line too (a line is judged without the lines around it): nothing is replaced."""
    changed = []
    for path in ORDINARY:
        if path.name in ORDINARY_REPLACEMENTS:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if scrubber.scrub_text(line) != line:
                changed.append((path.name, line))
    assert not changed


def test_json_with_a_secret_keeps_its_layout(scrubber: Scrubber) -> None:
    """A JSON text with a secret in it is edited in place: indentation, key order and escapes kept."""
    doc = {"b": 1, "a": {"password": "Gh7kLm2Qx9pZ", "note": "token Zx9Kq2LmP8vTb4NnR7cW1", "é": "\u00e9"}}
    text = json.dumps(doc, indent=4)
    out = scrubber.scrub_attribute("x", text, ("attributes",), ScrubTrail())
    assert "Gh7kLm2Qx9pZ" not in out and "Zx9Kq2LmP8vTb4NnR7cW1" not in out
    expected = text.replace('"Gh7kLm2Qx9pZ"', "\"[Scrubbed due to 'password']\"").replace(
        "Zx9Kq2LmP8vTb4NnR7cW1", "[Scrubbed: secret_in_context]"
    )
    assert out == expected


def test_references_under_a_secret_key_are_kept(scrubber: Scrubber) -> None:
    """`"api_key": "${X}"`, `"<redacted>"`, `"****"`, and a mapping of only such values, are kept."""
    for value in ("${OPENAI_API_KEY}", "{{ secrets.token }}", "<redacted>", "********", "$API_KEY"):
        assert scrubber.scrub_attribute("api_key", value, ("attributes",), ScrubTrail()) == value
    text = json.dumps({"secrets": {"openai": "${OPENAI_API_KEY}", "db": "<redacted>"}}, indent=2)
    assert scrubber.scrub_attribute("x", text, ("attributes",), ScrubTrail()) is text
    assert (
        scrubber.scrub_attribute("api_key", "Gh7kLm2Qx9pZ", ("attributes",), ScrubTrail()) != "Gh7kLm2Qx9pZ"
    )


@pytest.mark.parametrize(
    ("name", "strength"),
    [
        ("DBPWD", "password"), ("ACRPWD", "password"), ("SMTPPW", "password"), ("ADMIN_PW", "password"),
        ("db_password", "password"), ("api_token", "secret"), ("NetworkCredential", "secret"),
        ("STREAM_KEY", "weak"), ("acme_key", "weak"), ("sonar.login", "weak"), ("keyboard", None),
        ("monkey", None), ("token_budget", None), ("auth_method", None), ("key_path", None),
    ],
)  # fmt: skip
def test_secret_name_strength(name: str, strength: str | None) -> None:
    assert secret_name_strength(name) == strength


@pytest.mark.parametrize(
    ("value", "random"),
    [
        ("Zx9Kq2LmP8vTb4NnR7cW", True), ("3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a", True),
        ("live_4f8a9b2c7d1e3f5a6b8c", True), ("Unauthenticated", False), ("run-6f1d3c2a-planner-v3", False),
        ("xxxxxxxxxxxxxxxx", False), ("your-key-here", False), ("${GITHUB_TOKEN}", False),
        ("var.db_password", False), ("process.env.API_KEY", False), ("/etc/agent/tls.key", False),
        ("48213", False), ("debate:v3:6f1d3c2a", False), ("Auth::Unauthenticated", False),
        ("secretKeyFromVault", False),
    ],
)  # fmt: skip
def test_looks_random(value: str, random: bool) -> None:
    assert looks_random(value) is random


def _best(run: Any) -> float:
    best = float("inf")
    for _ in range(7):
        start = time.process_time()  # CPU time: a loaded machine's waits are not counted
        run()
        best = min(best, time.process_time() - start)
    return best


def _growth(text: str, times: int, run: Any) -> float:
    big = text * times
    return _best(lambda: run(big)) / max(_best(lambda: run(text)), 1e-9)


@pytest.mark.parametrize(
    "unit",
    ["pubkey-", "scauth_", "password ", "key=", "-p ", "machine h password ", "<password>", 'token("a", "'],
)
def test_the_context_finder_is_linear(unit: str) -> None:
    """Eight times the text costs the finder about what it costs a linear pass over the words (a
    quadratic finder would grow eight times more): both measured in the same test, best of seven."""
    text = (unit + "Zx9Kq2LmP8vT ") * 1000
    finder = _growth(text, 8, lambda t: list(find_in_context(t, t.lower())))
    baseline = _growth(text, 8, lambda t: [m.end() for m in re.finditer(r"\S+", t)])
    assert finder / baseline < 4, (finder, baseline)


def _counting_takes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every value the context finder judges."""
    from mastrace.scrubbing import _contextual

    judged: list[str] = []
    takes = _contextual._takes

    def counting(value: str, *args: Any) -> bool:
        judged.append(value)
        return takes(value, *args)

    monkeypatch.setattr(_contextual, "_takes", counting)
    return judged


def test_a_repeated_value_is_judged_once_per_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Secret-dense text that repeats a credential costs one judgement of it, not one per occurrence
    (and every occurrence is still replaced)."""
    judged = _counting_takes(monkeypatch)
    line = "the Acme SECRET is q8Zr4Kp2Lw9Xv7Tn3Hs6 and "
    out = Scrubber(matcher="python").scrub_text(line * 200)
    assert out.count("[Scrubbed: secret_in_context]") == 200
    assert "q8Zr4Kp2Lw9Xv7Tn3Hs6" not in out
    assert judged == ["q8Zr4Kp2Lw9Xv7Tn3Hs6"]


def test_a_value_a_rule_found_is_not_judged_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The context finder skips a value inside a secret the table's rules already found: same output,
    no judgement."""
    judged = _counting_takes(monkeypatch)
    key = (
        "sk-proj-"
        + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kL9n"
        + "T3BlbkFJ"
        + "x" * 20
        + "Q7w2E9r4T1y6U3i8O5p0"
    )
    text = f"my openai key is {key} and the Acme secret is q8Zr4Kp2Lw9Xv7Tn3Hs6."
    out = Scrubber(matcher="python").scrub_text(text)
    assert out == (
        "my openai key is [Scrubbed: openai_key] and the Acme secret is [Scrubbed: secret_in_context]."
    )
    assert judged == ["q8Zr4Kp2Lw9Xv7Tn3Hs6"]


SERVICE_ITEMS = [item for item in ITEMS if item["family"] in ("service name", "service name look-alike")]


@pytest.mark.parametrize(
    "text",
    [item["text"] for item in SERVICE_ITEMS if item.get("secrets")],
)
def test_a_service_name_alone_is_a_context(text: str) -> None:
    """`SENDGRID=<random>`, `"mailgun": "<random>"`, `--heroku <random>`, `Stripe <random>`: found by the
    finder, and both first passes (`SERVICE_GATE`, `service_candidate`) let the text through."""
    low = text.lower()
    assert [hit.context.startswith("service ") for hit in find_in_context(text, low)] == [True]
    assert re.search(SERVICE_GATE, low) is not None
    runs = run_map(low)
    assert service_candidate(low, runs, runs.find(b"a" * MIN_TOKEN_LEN))


@pytest.mark.parametrize(
    "text",
    [
        "SENDGRID_USER=8Mx526ALbh2purxsViy9dcHX",  # a safe last segment
        "heroku_app_name: HerokuDeployPipelineV2Stage3",
        "HEROKU=6f1d3c2a-9b8e-4d7c-a5f4-3e2d1c0b9a87",  # a UUID: an id
        "deployed to heroku c208ebb48b220cf0aadb76b5210b55a304ef5137",  # hex in prose: a commit
        "Stripe StripeClientConfiguration2024 wraps the SDK",  # words and numbers
        "github: 61d4c8b4ef198c7a7ea770718e83a41ca571e910",  # not a service alone
        "deploy: Zx9Kq2LmP8vTb4NnR7cWq1Lm",  # an ordinary word
        "sendgrid: Zx9Kq2LmP8vTb4NnR7c",  # 19 characters: too short without a secret word
        "mailgun_webhook: Zx9Kq2LmP8vTb4NnR7cWq1Lm",  # the name does not end with the service
    ],
)
def test_a_service_name_alone_is_not_enough_for(text: str) -> None:
    assert list(find_in_context(text, text.lower())) == []


@pytest.mark.parametrize("key", ["stream_key", "mailgun", "sonar.login"])
def test_a_json_value_found_across_its_key_is_scrubbed(scrubber: Scrubber, key: str) -> None:
    """A JSON text whose key and value together make a context (`{"mailgun": "<random>"}`, a weak
    `stream_key`): the value found in the text is replaced in its leaf, the layout kept."""
    text = json.dumps({"a": {key: "Zx9Kq2LmP8vTb4NnR7cWq1Lm", "b": 1}}, indent=2)
    out = scrubber.scrub_attribute("note", text, ("attributes",), ScrubTrail())
    assert out == text.replace("Zx9Kq2LmP8vTb4NnR7cWq1Lm", "[Scrubbed: secret_in_context]")
