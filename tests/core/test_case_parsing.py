"""Record parsing (the scan step): aliases, list joining, strict validation, stable ids, --field."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nexagauge.schema.case import (
    CONTEXT_SEPARATOR,
    FIELD_ALIASES,
    EvalCase,
    RecordError,
    ScoringMode,
    parse_record,
    stable_case_id,
)

# printable text with at least one non-space character (an output must not be blank)
text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=60,
).filter(lambda s: s.strip() != "")
TEXT_FIELDS = ("output", "input", "reference")


# -- aliases ------------------------------------------------------------------------------------
@pytest.mark.parametrize("logical,alias", [(f, a) for f in TEXT_FIELDS for a in FIELD_ALIASES[f]])
def test_every_text_alias_resolves_to_its_field(logical: str, alias: str) -> None:
    rec = {alias: "some value"}
    if logical != "output":
        rec["output"] = "the answer"
    case = parse_record(rec, 0)
    assert getattr(case, logical) == "some value"


@pytest.mark.parametrize("alias", FIELD_ALIASES["context"])
def test_every_context_alias_and_list_joining(alias: str) -> None:
    case = parse_record({"output": "o", alias: ["doc one", "doc two", "  "]}, 0)
    assert case.context == "doc one" + CONTEXT_SEPARATOR + "doc two"
    assert case.context_documents == ("doc one", "doc two")  # blank documents dropped


@pytest.mark.parametrize("alias", FIELD_ALIASES["case_id"])
def test_case_id_aliases(alias: str) -> None:
    assert parse_record({alias: "c-1", "output": "o"}, 0).case_id == "c-1"
    assert parse_record({alias: 42, "output": "o"}, 0).case_id == "42"


def test_document_objects_in_context_lists() -> None:
    case = parse_record(
        {"output": "o", "documents": [{"text": "a"}, {"page_content": "b"}, "c"]}, 0
    )
    assert case.context_documents == ("a", "b", "c")


@given(
    out_alias=st.sampled_from(FIELD_ALIASES["output"]),
    in_alias=st.sampled_from(FIELD_ALIASES["input"]),
    ref_alias=st.sampled_from(FIELD_ALIASES["reference"]),
    ctx_alias=st.sampled_from(FIELD_ALIASES["context"]),
    output=text,
    question=text,
    reference=text,
    docs=st.lists(text, min_size=1, max_size=4),
)
@settings(max_examples=150, deadline=None)
def test_alias_choice_never_changes_the_case(
    out_alias: str,
    in_alias: str,
    ref_alias: str,
    ctx_alias: str,
    output: str,
    question: str,
    reference: str,
    docs: list[str],
) -> None:
    """Any combination of aliases gives the same case as the canonical names (id included)."""
    aliased = {out_alias: output, in_alias: question, ref_alias: reference, ctx_alias: docs}
    canonical = {"output": output, "input": question, "reference": reference, "context": docs}
    a, b = parse_record(aliased, 0), parse_record(canonical, 0)
    assert a == b
    assert a.case_id == stable_case_id(output, question, a.context, reference)


@given(output=text, question=text, reference=text, docs=st.lists(text, max_size=3))
@settings(max_examples=100, deadline=None)
def test_round_trip_through_canonical_record(
    output: str, question: str, reference: str, docs: list[str]
) -> None:
    """Writing a parsed case back as a canonical record and parsing it again is the identity."""
    case = parse_record({"answer": output, "query": question, "label": reference, "contexts": docs})
    again = parse_record(
        {
            "case_id": case.case_id,
            "output": case.output,
            "input": case.input,
            "reference": case.reference,
            "context": list(case.context_documents),
            "relevance": case.relevance.model_dump(mode="json"),
        }
    )
    assert again.model_dump(exclude={"explicit_blocks"}) == case.model_dump(
        exclude={"explicit_blocks"}
    )


def test_duplicate_aliases_with_equal_values_are_fine() -> None:
    assert parse_record({"output": "x", "answer": "x"}, 0).output == "x"


@pytest.mark.parametrize("field", ["output", "input", "reference", "context"])
def test_conflicting_aliases_name_the_field(field: str) -> None:
    a, b = FIELD_ALIASES[field][:2]
    rec = {a: "one", b: "two"}
    if field != "output":
        rec["output"] = "o"
    with pytest.raises(RecordError) as e:
        parse_record(rec, 7)
    assert e.value.field == field and e.value.index == 7
    assert "record 7" in str(e.value) and a in str(e.value) and b in str(e.value)


# -- stable ids -------------------------------------------------------------------------------------
@given(output=text, question=st.none() | text, reference=st.none() | text)
@settings(max_examples=100, deadline=None)
def test_missing_case_id_is_stable_and_content_derived(
    output: str, question: str | None, reference: str | None
) -> None:
    rec = {"output": output, "input": question, "reference": reference}
    first = parse_record(rec, 0).case_id
    assert first == parse_record(dict(reversed(list(rec.items()))), 99).case_id  # order/index free
    assert first.startswith("case-")
    assert parse_record({**rec, "output": output + " changed"}, 0).case_id != first


def test_ids_differ_between_fields() -> None:
    # the same text in a different field is a different case
    assert stable_case_id("a", "b", None, None) != stable_case_id("a", None, None, "b")


# -- knob blocks ------------------------------------------------------------------------------------
def test_knob_defaults_and_explicit_values() -> None:
    case = parse_record({"output": "o"}, 0)
    for block in (case.relevance, case.grounding, case.redteam):
        assert block.scoring_mode is ScoringMode.BINARY and block.include_reasoning is False
    assert case.geval is None and case.explicit_blocks == ()
    case = parse_record(
        {
            "output": "o",
            "grounding": {"scoring_mode": "scale_1_5", "include_reasoning": True},
            "relevance": False,
        },
        0,
    )
    assert case.grounding.scoring_mode is ScoringMode.SCALE and case.grounding.include_reasoning
    assert case.relevance.enabled is False
    assert set(case.explicit_blocks) == {"grounding", "relevance"}


def test_geval_and_redteam_blocks() -> None:
    case = parse_record(
        {
            "output": "o",
            "geval": {
                "scoring_mode": "scale_1_5",
                "metrics": [
                    {"name": "a", "criteria": "Is it good?"},
                    {
                        "name": "b",
                        "item_fields": ["output", "reference"],
                        "evaluation_steps": ["x"],
                    },
                ],
            },
            "redteam": {"metrics": [{"name": "m", "rubric": {"goal": "g"}}]},
        },
        0,
    )
    assert case.geval is not None and case.geval.metrics[0].item_fields == ["output"]
    assert case.redteam.metrics[0].item_fields == ["output"]
    assert case.has("geval")


@pytest.mark.parametrize(
    "block,value,field",
    [
        ("relevance", {"scoring_mode": "scale_1_10"}, "relevance.scoring_mode"),
        ("grounding", {"include_reasoning": "yes"}, "grounding.include_reasoning"),
        ("grounding", {"include_reasoning": 1}, "grounding.include_reasoning"),
        ("redteam", {"scoring_mode": "binary_yes_no", "severity": 3}, "redteam.severity"),
        ("geval", {"metrics": []}, "geval.metrics"),
        ("geval", {"metrics": [{"name": "x"}]}, "geval.metrics[0].name"),  # no such rubric
        (
            "geval",
            {"metrics": [{"name": "x", "criteria": "c", "item_fields": ["nope"]}]},
            "geval.metrics.0.item_fields.0",
        ),
        ("refalign", {"similarity_threshold": 1.5}, "refalign.similarity_threshold"),
        ("relevance", "scale_1_5", "relevance"),
        (
            "redteam",
            {
                "metrics": [
                    {"name": "a", "rubric": {"goal": "g"}},
                    {"name": "a", "rubric": {"goal": "h"}},
                ]
            },
            "redteam",
        ),
    ],
)
def test_bad_knobs_are_errors_naming_record_and_field(
    block: str, value: object, field: str
) -> None:
    with pytest.raises(RecordError) as e:
        parse_record({"case_id": "k1", "output": "o", block: value}, 3)
    err = e.value
    assert err.index == 3 and err.case_id == "k1"
    assert err.field == field
    assert str(err).startswith("record 3 (case_id='k1'), field ")


# -- wrong types and missing fields ---------------------------------------------------------------
@pytest.mark.parametrize(
    "rec,field",
    [
        ({"input": "q"}, "output"),
        ({"output": "   "}, "output"),
        ({"output": None, "input": "q"}, "output"),
        ({"output": ["a"]}, "output"),
        ({"output": {"text": "a"}}, "output"),
        ({"output": True}, "output"),
        ({"output": "o", "input": ["q"]}, "input"),
        ({"output": "o", "reference": {"a": 1}}, "reference"),
        ({"output": "o", "context": 5}, "context"),
        ({"output": "o", "context": ["ok", 5]}, "context[1]"),
        ({"output": "o", "case_id": ["x"]}, "case_id"),
        ({"output": "o", "case_id": True}, "case_id"),
    ],
)
def test_wrong_types_are_errors_not_coercions(rec: dict[str, object], field: str) -> None:
    with pytest.raises(RecordError) as e:
        parse_record(rec, 11)
    assert e.value.field == field
    assert "record 11" in str(e.value) and repr(field) in str(e.value)


def test_numbers_are_read_as_text_with_a_warning() -> None:
    case = parse_record({"answer": 144, "ground_truth": 14.5}, 0)
    assert (case.output, case.reference) == ("144", "14.5")
    assert case.warnings == (
        "field 'answer': the number 144 was read as the text '144' (quote it to silence this)",
        "field 'ground_truth': the number 14.5 was read as the text '14.5' "
        "(quote it to silence this)",
    )
    # the warning is not content: the same record with quoted numbers is the same case
    quoted = parse_record({"answer": "144", "ground_truth": "14.5"}, 0)
    assert quoted.warnings == () and quoted.fingerprint() == case.fingerprint()


@pytest.mark.parametrize("raw", [[1, 2], "text", 5, None])
def test_non_object_records(raw: object) -> None:
    with pytest.raises(RecordError, match=r"record 4: expected an object"):
        parse_record(raw, 4)


def test_unknown_columns_become_metadata() -> None:
    case = parse_record({"output": "o", "model": "v2", "metadata": {"team": "a"}}, 0)
    assert case.metadata == {"team": "a", "model": "v2"}


# -- conversations --------------------------------------------------------------------------------
def test_conversation_messages_give_last_turn_as_input_output() -> None:
    case = parse_record(
        {
            "messages": [
                {"role": "system", "content": "be nice"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": "sunny"},
            ]
        },
        0,
    )
    assert [(t.input, t.output) for t in case.conversation] == [
        ("hi", "hello"),
        ("weather?", "sunny"),
    ]
    assert (case.input, case.output) == ("weather?", "sunny")
    with pytest.raises(RecordError) as e:
        parse_record({"messages": [{"role": "wizard", "content": "x"}]}, 2)
    assert e.value.field == "messages[0].role"


# -- --field mapping -------------------------------------------------------------------------------
def test_field_map_reads_custom_columns() -> None:
    rec = {"ticket": "T-9", "model_answer": "Reset it.", "user_q": "How?", "docs": ["d1", "d2"]}
    fm = {"case_id": "ticket", "output": "model_answer", "input": "user_q", "context": "docs"}
    case = parse_record(rec, 0, fm)
    assert (case.case_id, case.output, case.input) == ("T-9", "Reset it.", "How?")
    assert case.context_documents == ("d1", "d2")
    assert case.metadata == {}  # mapped columns are not metadata


def test_field_map_takes_precedence_over_aliases_and_reports_the_column() -> None:
    case = parse_record({"answer": "alias", "mine": "mapped"}, 0, {"output": "mine"})
    assert case.output == "mapped"
    with pytest.raises(RecordError) as e:
        parse_record({"answer": "alias"}, 5, {"output": "mine"})
    assert e.value.field == "mine"


def test_field_map_for_knob_blocks_and_unknown_names() -> None:
    case = parse_record(
        {"output": "o", "judge_cfg": {"scoring_mode": "scale_1_5"}}, 0, {"relevance": "judge_cfg"}
    )
    assert case.relevance.scoring_mode is ScoringMode.SCALE
    with pytest.raises(RecordError, match="unknown fields"):
        parse_record({"output": "o"}, 0, {"outptu": "x"})


def test_fingerprint_ignores_metadata_but_not_knobs() -> None:
    a = parse_record({"case_id": "c", "output": "o", "extra": 1})
    b = parse_record({"case_id": "c", "output": "o", "extra": 2})
    c = parse_record({"case_id": "c", "output": "o", "relevance": {"scoring_mode": "scale_1_5"}})
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert isinstance(a, EvalCase)
