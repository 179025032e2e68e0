"""The evaluator's case scrubber (nexagauge/schema/scrub.py, issue 31): every text of a case,
placeholders stable within a case, clean cases untouched, SDK-scrubbed text not scrubbed twice."""

from __future__ import annotations

from typing import Any

from support.sensitive import (
    PERSONAL,
    PERSONAL_FRAGMENTS,
    SECRET_FRAGMENTS,
    SECRETS,
    SENTENCES,
    leaks,
)

from nexagauge.schema.case import EvalCase, parse_record
from nexagauge.schema.scrub import CaseScrubber, describe
from nexagauge.schema.tools import AgentRun, ToolCall

KEY = SECRETS["openai_key"]
MAIL = PERSONAL["email"]


def _everywhere(value: str) -> EvalCase:
    """A case with ``value`` in every text field it has."""
    record: dict[str, Any] = {
        "input": f"q {value}",
        "output": f"a {value}",
        "context": [f"doc one {value}", "doc two"],
        "reference": f"ref {value}",
        "conversation": [{"input": f"earlier {value}", "output": f"said {value}"}],
        "geval": {"metrics": [{"name": "m", "criteria": f"judge {value}"}]},
        "redteam": {"metrics": [{"name": "r", "rubric": {"goal": f"g {value}",
                                                          "violations": [f"v {value}"]}}]},
        "conversation_relevance": {"rubric_prompt": f"rp {value}"},
        "metadata": {"note": f"n {value}", value: [f"list {value}"]},
    }  # fmt: skip
    case = parse_record(record, index=0)
    agent = AgentRun(
        tool_calls=(
            ToolCall(
                name="lookup",
                call_id="c1",
                arguments=f'{{"q": "{value}"}}',
                result=f"row {value}",
                error=f"err {value}",
            ),
        )
    )
    return case.model_copy(update={"agent": agent, "context_sources": (f"doc:{value}", "doc:2")})


def test_every_text_of_a_case_is_scrubbed() -> None:
    for kind, value in SECRETS.items():
        if kind == "db_password":
            value = f"DB_PASSWORD={value}"
        case = _everywhere(value)
        out = CaseScrubber().scrub(case)
        blob = out.model_dump_json()
        assert leaks(blob, SECRET_FRAGMENTS) == [], (kind, blob)
        assert out.output.startswith("a ") and out.input and out.input.startswith("q ")


def test_personal_values_only_with_pii() -> None:
    for value in PERSONAL.values():
        case = _everywhere(value)
        assert CaseScrubber().scrub(case) is case  # PII off: nothing to do, same object
        blob = CaseScrubber(pii=True).scrub(case).model_dump_json()
        assert leaks(blob, PERSONAL_FRAGMENTS) == [], blob


def test_placeholders_are_stable_within_a_case_and_numbered_per_value() -> None:
    other = "sk-proj-ZZZZZZZZZZZZZZZZZZZZZZZZ9999"
    case = parse_record(
        {
            "input": f"Why is my key {KEY} failing? I also have {other}.",
            "context": [f"Key {KEY} was revoked.", f"Key {other} is active."],
            "output": f"Your key {KEY} was revoked; {other} still works.",
        }
    )
    out = CaseScrubber().scrub(case)
    assert out.input == (
        "Why is my key [scrubbed:api_key#1] failing? I also have [scrubbed:api_key#2]."
    )
    assert out.context_documents == (
        "Key [scrubbed:api_key#1] was revoked.",
        "Key [scrubbed:api_key#2] is active.",
    )
    assert out.context == "\n\n".join(out.context_documents)
    assert (
        out.output == "Your key [scrubbed:api_key#1] was revoked; [scrubbed:api_key#2] still works."
    )
    # deterministic: the same case scrubs to the same text (cache keys stay stable)
    assert CaseScrubber().scrub(case).fingerprint() == out.fingerprint()


def test_clean_and_sdk_scrubbed_cases_are_returned_as_they_are() -> None:
    scrubber = CaseScrubber(pii=True)
    clean = parse_record({"input": "Capital of France?", "context": ["Paris."], "output": "Paris."})
    assert scrubber.scrub(clean) is clean
    sdk = parse_record(
        {
            "input": "My key [scrubbed:api_key] fails and DB_PASSWORD=[scrubbed:password]",
            "output": "Rotate [scrubbed:api_key]; mail [scrubbed:email].",
        }
    )
    assert scrubber.scrub(sdk) is sdk
    assert scrubber.scrubbed == 0
    # a scrubbed case scrubs to itself (idempotent)
    once = scrubber.scrub(_everywhere(MAIL))
    assert scrubber.scrub(once) is once


def test_support_sentences_keep_their_words() -> None:
    scrubber = CaseScrubber(pii=True)
    for kind, (q, c, a) in SENTENCES.items():
        out = scrubber.scrub(parse_record({"input": q, "context": [c], "output": a}))
        # the words around the value are intact, and a value in question, context and answer
        # has one placeholder
        assert out.output.split()[-1] == a.split()[-1], kind
        placeholders = {w.strip(".,;?") for w in (out.input or "").split() if "#1]" in w}
        for ph in placeholders:
            assert ph in (out.context or "") or ph not in a, (kind, ph)


def test_describe() -> None:
    assert describe(True, True) == "secrets and personal data (PII on)"
    assert describe(False, False) == "nothing (scrubbing off)"
    assert CaseScrubber(secrets=False).scrub(_everywhere(KEY)) is not None
    assert not CaseScrubber(secrets=False).active
