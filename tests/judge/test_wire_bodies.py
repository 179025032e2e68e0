"""Request bodies encoded once per prompt version (issue 33): the fixed part (model, sampling,
strict schema, JSON-mode hint) is serialized once and reused as bytes; each body is the same JSON
request as :func:`request_body` builds."""

from __future__ import annotations

import json

from pydantic import BaseModel

from nexagauge.judge.jsonschema import strict_schema
from nexagauge.judge.llm.wire import RequestBodies, request_body
from nexagauge.settings import JudgeSettings


class Verdicts(BaseModel):
    verdicts: list[str]


MSGS = [
    {"role": "system", "content": "Judge. «quotes» ünïcode"},
    {"role": "user", "content": 'claim: "x"\nline'},
]


def test_bodies_equal_request_body_in_both_modes_and_with_logprobs() -> None:
    schema = strict_schema(Verdicts)
    bodies = RequestBodies()
    for s in (JudgeSettings(), JudgeSettings(seed=7, temperature=0.3, model="m-2")):
        for mode in ("json_schema", "json_object"):
            for max_tokens in (None, 64):
                b = bodies.encode(s, MSGS, schema, "Verdicts", mode, max_tokens)
                want = request_body(s, MSGS, schema, "Verdicts", mode, max_tokens)
                assert json.loads(b.content) == want and b.messages == want["messages"]
                assert b.model == s.model
    b = bodies.encode(
        JudgeSettings(),
        MSGS,
        schema,
        "V",
        "json_schema",
        None,
        {"logprobs": True, "top_logprobs": 3},
    )
    got = json.loads(b.content)
    assert got["logprobs"] is True and got["top_logprobs"] == 3 and got["messages"] == MSGS


def test_the_fixed_part_is_built_once_per_prompt_version() -> None:
    schema = strict_schema(Verdicts)
    bodies = RequestBodies()
    s = JudgeSettings()
    bodies.encode(s, MSGS, schema, "Verdicts", "json_schema", None)
    bodies.encode(
        s, [{"role": "user", "content": "other"}], schema, "Verdicts", "json_schema", None
    )
    assert len(bodies._fixed) == 1
    bodies.encode(JudgeSettings(seed=1), MSGS, schema, "Verdicts", "json_schema", None)
    bodies.encode(s, MSGS, schema, "Verdicts", "json_object", None)
    assert len(bodies._fixed) == 3  # another seed, another mode: their own entries


def test_json_mode_never_edits_the_callers_messages() -> None:
    msgs = [dict(m) for m in MSGS]
    b = RequestBodies().encode(
        JudgeSettings(), msgs, strict_schema(Verdicts), "V", "json_object", None
    )
    assert msgs == MSGS and b.messages[0]["content"].startswith(MSGS[0]["content"] + "\n")


def test_bounded() -> None:
    bodies = RequestBodies(max_entries=2)
    for seed in range(5):
        bodies.encode(JudgeSettings(seed=seed), MSGS, {}, "V", "json_schema", None)
    assert len(bodies._fixed) == 2
