"""``nexagauge run`` on agent records (issue 30, items 2 and 6): the case files name the source
of every grounding verdict and carry the tool calls and source labels in their scrubbed record
block; a secret in a tool result never reaches the case file. The real CLI in a subprocess,
with an LLM judge on loopback that grounds honestly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer

from .honest_judge import grounding_reply

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-live-4f9aB3cD5eF6gH7iJ8kL9mN0pQ1rS2tU3"
ORDER = {"order_id": "A-1042", "status": "shipped", "carrier": "PostNord", "api_key": SECRET}


def test_run_reports_sources_and_tool_calls(tmp_path: Path) -> None:
    records = [
        {
            "id": "good",
            "input": "Where is A-1042?",
            "output": "Order A-1042 has shipped.",
            "tool_calls": [
                {
                    "name": "lookup_order",
                    "id": "c1",
                    "arguments": {"order_id": "A-1042"},
                    "result": ORDER,
                }
            ],
        },
        {
            "id": "bad",
            "input": "Where is A-1042?",
            "output": "Order A-1042 was lost by DHL.",
            "tool_calls": [
                {
                    "name": "lookup_order",
                    "id": "c1",
                    "arguments": {"order_id": "A-1042"},
                    "result": ORDER,
                }
            ],
        },
    ]
    inp = tmp_path / "agent.jsonl"
    inp.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "out"
    with OpenAIServer() as judge:
        judge.handler = grounding_reply
        env = {
            **os.environ,
            "NEXAGAUGE_JUDGE_MODE": "llm",
            "NEXAGAUGE_JUDGE_BASE_URL": judge.base_url,
            "NEXAGAUGE_JUDGE_API_KEY": "sk-test-not-real-0001",
            "NEXAGAUGE_JUDGE_MAX_RETRIES": "0",
            "NEXAGAUGE_CACHE_ENABLED": "false",
        }
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "nexagauge",
                "run",
                "grounding",
                "--input",
                str(inp),
                "--output-dir",
                str(out),
                "--no-report",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr[-3000:]
        assert any("status: shipped" in r.text for r in judge.chat_requests())
        # tool text is case text: scrubbed before the judge like any other (run.scrub)
        assert not [r for r in judge.chat_requests() if SECRET in json.dumps(r.body)]
    for cid, label in (("good", "supported"), ("bad", "contradicted")):
        text = (out / "cases" / f"{cid}.json").read_text()
        assert SECRET not in text
        doc = json.loads(text)
        [metric] = doc["nodes"]["grounding"]["output"]["metrics"]
        claims = [c for c in metric["result"] if "verdict" in c]
        assert claims and {(c["label"], c.get("source")) for c in claims} == {
            (label, "tool:lookup_order#c1")
        }
        rec = doc["record"]
        assert rec["context_sources"] == ["tool:lookup_order#c1"]
        [call] = rec["tool_calls"]
        assert (call["name"], call["call_id"]) == ("lookup_order", "c1")
