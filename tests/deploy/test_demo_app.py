"""The compose demo app (examples/demo_app): real SDK spans, grounded answers, then drift."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support.otlp_receiver import OtlpReceiver
from support.prometheus import REPO

APP = REPO / "examples" / "demo_app" / "app.py"

_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {repo!r})
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    import nexagauge
    from examples.demo_app.app import DOCS, DemoApp
    exp = InMemorySpanExporter()
    nexagauge.configure(service_name="demo-rag", exporter=exp, batch=False)
    out = []
    for drift_after, share in ((1e9, 0.0), (0.0, 1.0)):
        app = DemoApp(drift_after_s=drift_after, drift_share=share, seed=5)
        for _ in range(12):
            app.conversation(2)
        out.append(app.counts)
    spans = [dict(name=s.name, trace=s.context.trace_id, parent=bool(s.parent),
                  attrs=dict(s.attributes)) for s in exp.get_finished_spans()]
    print(json.dumps(dict(counts=out, spans=spans, docs=[d.text for d in DOCS])))
""")


def _answer(attrs: dict[str, str]) -> str:
    msgs = json.loads(attrs["gen_ai.output.messages"])
    return str(msgs[0]["parts"][0]["content"])


def test_spans_answers_and_drift() -> None:
    r = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(repo=str(REPO))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout.strip().splitlines()[-1])
    before, after = data["counts"]
    assert before == {"ok": 24, "off_topic": 0, "ungrounded": 0, "agent": 0}
    assert after["ok"] == 0 and after["off_topic"] > 0 and after["ungrounded"] > 0
    roots = [s for s in data["spans"] if s["name"] == "rag.answer"]
    assert len(roots) == 48 and not any(s["parent"] for s in roots)
    names = {s["name"] for s in data["spans"]}
    assert names == {"rag.answer", "kb.search", "llm.generate"}
    for i, s in enumerate(roots):
        a = s["attrs"]
        assert a["gen_ai.request.model"] == "demo-llm-1"
        assert a["gen_ai.conversation.id"].startswith("demo-")
        docs = [d["content"] for d in json.loads(a["gen_ai.retrieval.documents"])]
        answer = _answer(a)
        grounded = all(sent in " ".join(docs) for sent in answer.split(". ") if sent)
        if i < 24:  # before the drift: every sentence comes from the retrieved documents
            assert grounded, (answer, docs)
        else:  # drifted: off-topic or invented, never copied from the retrieved documents
            assert not grounded, (answer, docs)


@pytest.mark.integration
def test_cli_exports_over_otlp() -> None:
    with OtlpReceiver(http=False) as rx:
        r = subprocess.run(
            [
                sys.executable,
                str(APP),
                "--endpoint",
                rx.endpoint_grpc,
                "--protocol",
                "grpc",
                "--duration",
                "1.5",
                "--rate",
                "10",
                "--drift-after",
                "0",
                "--drift-share",
                "0.5",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        spans = rx.wait_for_spans(lambda s: s.name == "rag.answer", timeout=10)
        assert spans and spans[0].attributes["gen_ai.request.model"] == "demo-llm-1"
        assert "demo-app done" in r.stdout
