"""``nexagauge run`` scrubs datasets before the judge (issue 31), on real parts: the real command
(subprocess) and the real ``openai`` client against a loopback OpenAI-compatible judge that
records every request.

The same support-bot cases (tests/support/sensitive.py: keys, tokens, a password, a card, an
IBAN, an email, a phone number, a national id) run twice: with ``run.scrub = false`` and with
``run.scrub_pii = true``. Scrubbed, no judge request, case file, summary, error record or log
line holds any of the values -- and every score is the same as unscrubbed: placeholders are
stable within a case, so a claim that repeats the context's value is still grounded in it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.openai_server import OpenAIServer, Reply, Request, _blocks, _words
from support.sensitive import PERSONAL_FRAGMENTS, SECRET_FRAGMENTS, SECRETS, SENTENCES, leaks

from .conftest import Runner

pytestmark = pytest.mark.integration


def _dataset(path: Path) -> None:
    rows: list[dict[str, Any]] = [
        {
            "id": kind,
            "question": q,
            "contexts": [c, "Support hours are 9:00 to 17:00."],
            "answer": a,
        }
        for kind, (q, c, a) in SENTENCES.items()
    ]
    # the answer names another key than the context: ungrounded, scrubbed or not (a placeholder
    # per value, not one per kind, keeps the two keys apart)
    other = "sk-proj-M3nT4lN0t3sAreF1neButN0tK3ys77"
    rows.append(
        {
            "id": "other_key",
            "question": f"Was my key {other} revoked?",
            "contexts": [f"Key {SECRETS['openai_key']} was revoked on Monday."],
            "answer": f"Key {other} was revoked on Monday.",
        }
    )
    # a validation message echoes the value it rejects: "(got 'AKIA...')"
    rows.append({"id": "bad", "answer": "x", "relevance": {"scoring_mode": SECRETS["aws_key_id"]}})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def strict_judge(req: Request) -> Reply | None:
    """Yes/no verdicts: a claim holds only when every word of it is in the target (the loopback
    server's default needs 30 %), so a claim naming a value the context lacks is not grounded."""
    props = (req.schema or {}).get("properties", {})
    if "verdicts" not in props or props["verdicts"].get("items", {}).get("type") == "integer":
        return None
    target, claims = [*(t for _, t in _blocks(req)), "", ""][:2]
    tw = _words(target)
    lines = [line.split(". ", 1)[-1] for line in claims.splitlines() if line.strip()]
    n = props["verdicts"].get("maxItems", len(lines))
    verdicts = ["yes" if _words(c) <= tw else "no" for c in (lines + [""] * n)[:n]]
    return Reply(content=json.dumps({"verdicts": verdicts}))


def _scores(out: Path) -> dict[tuple[str, str], float | None]:
    found: dict[tuple[str, str], float | None] = {}

    def walk(case_id: str, v: Any) -> None:
        if isinstance(v, dict):
            if "name" in v and "score" in v and isinstance(v["name"], str):
                found[(case_id, v["name"])] = v["score"]
            for x in v.values():
                walk(case_id, x)
        elif isinstance(v, list):
            for x in v:
                walk(case_id, x)

    for p in sorted((out / "cases").glob("*.json")):
        doc = json.loads(p.read_text())
        walk(doc["case_id"], doc)
    return found


def _files(out: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


def test_run_scrubs_cases_before_the_judge_and_scores_do_not_change(
    cli: Runner, tmp_path: Path
) -> None:
    _dataset(tmp_path / "support.jsonl")
    judge = {"NEXAGAUGE_JUDGE_MODE": "llm", "NEXAGAUGE_JUDGE_API_KEY": "sk-loopback-judge-000"}
    args = (
        "-vv",
        "run",
        "eval",
        "--only",
        "relevance,grounding",
        "-i",
        "support.jsonl",
        "--no-cache",
    )
    with OpenAIServer(handler=strict_judge) as srv:
        judge["NEXAGAUGE_JUDGE_BASE_URL"] = srv.base_url
        raw = cli(*args, "-o", "raw", "--no-report", NEXAGAUGE_RUN_SCRUB="false", **judge)
        raw_requests = json.dumps([r.body for r in srv.chat_requests()])
        srv.reset()
        clean = cli(*args, "-o", "clean", "--no-report", NEXAGAUGE_RUN_SCRUB_PII="true", **judge)
        clean_requests = json.dumps([r.body for r in srv.chat_requests()])
    assert raw.rc == clean.rc == 1, (raw.err[-2000:], clean.err[-2000:])  # the one bad record
    # the defect: unscrubbed, every value reaches the judge
    assert leaks(raw_requests, SECRET_FRAGMENTS + PERSONAL_FRAGMENTS)
    # scrubbed: none in any judge request, output file or log line (-vv)
    everything = SECRET_FRAGMENTS + PERSONAL_FRAGMENTS
    assert leaks(clean_requests, everything) == []
    assert leaks(_files(tmp_path / "clean"), everything) == []
    assert leaks(clean.out + clean.err, everything) == [], clean.err[-3000:]
    assert "[scrubbed:" in clean_requests and "got '[scrubbed:api_key#1]'" in _files(
        tmp_path / "clean"
    )
    # said at start: what is scrubbed and where case text goes
    assert "nexagauge run: scrubbing secrets and personal data (PII on)" in clean.err
    assert "case text goes to the judge at 127.0.0.1" in clean.err
    assert "nexagauge run: scrubbing nothing (scrubbing off)" in raw.err
    # scrubbing does not break evaluation: the same scores, every case scored
    before, after = _scores(tmp_path / "raw"), _scores(tmp_path / "clean")
    names = {n for _, n in after}
    assert {"answer_relevancy", "grounding"} <= names, names
    assert len({c for c, _ in after}) == len(SENTENCES) + 1
    assert all(s is not None for s in after.values()), after
    assert after == before
    assert before[("other_key", "grounding")] == 0.0  # the comparison can tell keys apart
    assert 1.0 in {v for (_, n), v in before.items() if n == "grounding"}
