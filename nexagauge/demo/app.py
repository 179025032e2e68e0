"""A small RAG-like app instrumented with ``@nexagauge.trace``: the traffic of the compose demo.

It answers questions about a fictional product ("Acme Cloud") from a tiny in-memory knowledge
base: a traced retriever picks the best-matching documents (recorded as the call's context) and a
deterministic stand-in for the LLM writes the answer from them. No model or API key is needed; the
evaluator judges the answers like any other app's.

After ``--drift-after`` seconds a share (``--drift-share``) of the answers goes wrong the two ways
the dashboards and alerts are built to catch:

* ``off_topic``: the answer talks about a different part of the product (relevance drops; it is also
  not supported by the retrieved context, so grounding drops too);
* ``ungrounded``: the answer stays on topic but states facts the documents do not contain
  (grounding drops, relevance stays).

Run (the collector's OTLP gRPC endpoint; standard ``OTEL_*`` variables work too)::

    python -m nexagauge.demo.app --endpoint http://localhost:4317 --rate 2 \\
        --drift-after 600 --drift-share 0.4

A share of the traffic (``--agent-share``) is a support agent with tools instead
(:mod:`nexagauge.demo.agent`: ``@nexagauge.tool`` / ``@nexagauge.trace(tools=...)``, with failing
tools, loops and undeclared tools now and then), so the agent signals and the Agents dashboard
have data.

Every option also reads an environment variable (``DEMO_RATE``, ``DEMO_DRIFT_AFTER_S``,
``DEMO_DRIFT_SHARE``, ``DEMO_DURATION_S``, ``DEMO_SEED``, ``DEMO_MODEL``, ``DEMO_AGENT_SHARE``),
which is how ``docker-compose.yml`` configures it.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import nexagauge
from nexagauge.demo import from_flags
from nexagauge.demo.agent import DemoAgent
from nexagauge.sdk import conventions as C

# ---------------------------------------------------------------------------------------------
# knowledge base: topic -> documents; each document is a few factual sentences


@dataclass(frozen=True)
class Doc:
    id: str
    topic: str
    text: str


DOCS: tuple[Doc, ...] = (
    Doc(
        "kb-billing-1",
        "billing",
        "Acme Cloud bills compute per second with a one-minute minimum. Invoices are issued on "
        "the first day of each month. Unused credits expire after twelve months.",
    ),
    Doc(
        "kb-billing-2",
        "billing",
        "Payment methods are credit card and bank transfer. Accounts with unpaid invoices older "
        "than thirty days are suspended, never deleted.",
    ),
    Doc(
        "kb-backups-1",
        "backups",
        "Volume snapshots run every six hours and are kept for fourteen days. Restoring a snapshot "
        "creates a new volume in the same region.",
    ),
    Doc(
        "kb-backups-2",
        "backups",
        "Cross-region backup copies are an opt-in feature billed at the storage rate of the "
        "destination region.",
    ),
    Doc(
        "kb-sso-1",
        "sso",
        "Single sign-on supports SAML 2.0 and OpenID Connect. SSO is available on the Business "
        "and Enterprise plans. Administrators can enforce SSO for every member.",
    ),
    Doc(
        "kb-limits-1",
        "limits",
        "The public API allows 600 requests per minute per API key. Exceeding the limit returns "
        "HTTP 429 with a Retry-After header.",
    ),
    Doc(
        "kb-regions-1",
        "regions",
        "Acme Cloud runs in three regions: Frankfurt, Virginia and Singapore. Data never leaves "
        "the region a project is created in.",
    ),
    Doc(
        "kb-support-1",
        "support",
        "Standard support answers within one business day. Enterprise support is available 24/7 "
        "with a one-hour response target for critical incidents.",
    ),
    Doc(
        "kb-keys-1",
        "keys",
        "API keys are created in the console under Settings. A key can be scoped to one project "
        "and rotated without downtime; old keys stay valid for 24 hours after rotation.",
    ),
)

QUESTIONS: dict[str, tuple[str, ...]] = {
    "billing": (
        "How is compute billed?",
        "When are invoices issued?",
        "What happens to an account with unpaid invoices?",
    ),
    "backups": (
        "How often are volume snapshots taken?",
        "How long are snapshots kept?",
        "Can backups be copied to another region?",
    ),
    "sso": ("Which single sign-on protocols are supported?", "Which plans include SSO?"),
    "limits": ("What is the API rate limit?", "What happens when I exceed the rate limit?"),
    "regions": ("In which regions does Acme Cloud run?", "Does my data leave its region?"),
    "support": ("How fast does standard support answer?", "Is there 24/7 support?"),
    "keys": ("How do I create an API key?", "What happens to old keys after rotation?"),
}

#: on-topic statements that no document supports (the "ungrounded" drift)
INVENTED: dict[str, str] = {
    "billing": "Compute is billed per hour and invoices are issued weekly, with credits that "
    "never expire.",
    "backups": "Snapshots are taken every minute and kept forever at no cost.",
    "sso": "Single sign-on supports Kerberos and LDAP and is free on every plan.",
    "limits": "The API has no rate limit for paying customers.",
    "regions": "Acme Cloud runs in twelve regions and replicates all data worldwide by default.",
    "support": "Every plan gets a dedicated engineer who answers within five minutes.",
    "keys": "API keys never expire and cannot be rotated.",
}

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "be",
        "by",
        "can",
        "do",
        "does",
        "how",
        "i",
        "in",
        "is",
        "it",
        "my",
        "of",
        "on",
        "or",
        "the",
        "to",
        "what",
        "when",
        "which",
        "with",
    ]
)


def _terms(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


# ---------------------------------------------------------------------------------------------
# the traced app


@nexagauge.retriever(name="kb.search")
def search(query: str, k: int = 2) -> list[dict[str, object]]:
    """Keyword-overlap retrieval over the knowledge base (the traced retrieval step)."""
    q = _terms(query)
    scored = sorted(DOCS, key=lambda d: len(q & _terms(d.text)), reverse=True)[:k]
    return [
        {"id": d.id, "content": d.text, "score": float(len(q & _terms(d.text)))} for d in scored
    ]


@dataclass
class DemoLLM:
    """A deterministic stand-in for the model: composes the answer from the documents."""

    model: str
    rng: random.Random

    def complete(self, question: str, docs: Sequence[dict[str, object]], mode: str) -> str:
        topic = _topic_of(docs)
        if mode == "off_topic":  # a part of the product neither asked about nor retrieved
            seen = {str(d["id"]) for d in docs}
            other = self.rng.choice([d for d in DOCS if d.topic != topic and d.id not in seen])
            return " ".join(_sentences(other.text)[:2])
        if mode == "ungrounded":
            return INVENTED[topic]
        q = _terms(question)
        sents = [s for d in docs for s in _sentences(str(d["content"]))]
        best = sorted(sents, key=lambda s: len(q & _terms(s)), reverse=True)[:2]
        return " ".join(best)


def _topic_of(docs: Sequence[dict[str, object]]) -> str:
    first = str(docs[0]["id"]) if docs else ""
    return next((d.topic for d in DOCS if d.id == first), "billing")


@dataclass
class DemoApp:
    """Generates the traffic: questions, conversations, and drift after a while."""

    drift_after_s: float = 600.0
    drift_share: float = 0.4
    model: str = "demo-llm-1"
    seed: int = 7
    #: share of the traffic that is agent runs (nexagauge.demo.agent)
    agent_share: float = 0.25
    started: float = field(default_factory=time.monotonic)
    counts: dict[str, int] = field(
        default_factory=lambda: {"ok": 0, "off_topic": 0, "ungrounded": 0, "agent": 0}
    )

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.llm = DemoLLM(self.model, random.Random(self.seed + 1))
        self.agent = DemoAgent(random.Random(self.seed + 2), model=self.model)
        attrs = {C.GEN_AI_REQUEST_MODEL: self.model}
        # built per instance so the model attribute follows the configuration
        self._generate = nexagauge.trace(
            name="llm.generate", operation=C.OPERATION_CHAT, attributes=attrs, context_arg=False
        )(self._complete)
        self._answer = nexagauge.trace(name="rag.answer", attributes=attrs)(self._rag)

    def mode(self) -> str:
        """``ok`` before the drift point; afterwards ``off_topic``/``ungrounded`` for a share."""
        if time.monotonic() - self.started < self.drift_after_s:
            return "ok"
        if self.rng.random() >= self.drift_share:
            return "ok"
        return self.rng.choice(["off_topic", "ungrounded"])

    def _complete(self, question: str, docs: list[dict[str, object]], mode: str) -> str:
        return self.llm.complete(question, docs, mode)

    def _rag(self, question: str, mode: str) -> str:
        docs = search(question)  # recorded as the context of this call by the retriever
        return str(self._generate(question, docs, mode))

    def ask(self, question: str) -> str:
        """Answer one question (one trace: rag.answer > kb.search + llm.generate)."""
        mode = self.mode()
        self.counts[mode] += 1
        return str(self._answer(question, mode))

    def agent_run(self) -> str:
        """One agent run (one trace: support.agent > execute_tool spans + the LLM call)."""
        self.counts["agent"] += 1
        return self.agent.ask()

    def conversation(self, turns: int) -> None:
        """A short conversation about one topic, grouped by a session id."""
        topic = self.rng.choice(list(QUESTIONS))
        with nexagauge.session(
            session_id=f"demo-{self.rng.getrandbits(48):012x}",
            user_id=f"user-{self.rng.randint(1, 50)}",
        ):
            for _ in range(turns):
                self.ask(self.rng.choice(QUESTIONS[topic]))


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    return float(value) if value not in (None, "") else default


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="nexa-gauge demo RAG app (synthetic traffic).")
    ap.add_argument(
        "--endpoint", default=None, help="OTLP endpoint (default: OTEL_EXPORTER_OTLP_ENDPOINT)"
    )
    ap.add_argument("--protocol", default=os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"))
    ap.add_argument("--service-name", default=os.environ.get("OTEL_SERVICE_NAME", "demo-rag"))
    ap.add_argument(
        "--rate", type=float, default=_env_float("DEMO_RATE", 2.0), help="questions per second"
    )
    ap.add_argument(
        "--duration",
        type=float,
        default=_env_float("DEMO_DURATION_S", 0.0),
        help="seconds to run; 0 = until stopped",
    )
    # every DemoApp option's flag has the field as its dest (from_flags reads them by name)
    ap.add_argument(
        "--drift-after",
        dest="drift_after_s",
        metavar="DRIFT_AFTER",
        type=float,
        default=_env_float("DEMO_DRIFT_AFTER_S", 600.0),
    )
    ap.add_argument("--drift-share", type=float, default=_env_float("DEMO_DRIFT_SHARE", 0.4))
    ap.add_argument("--seed", type=int, default=int(_env_float("DEMO_SEED", 7)))
    ap.add_argument("--model", default=os.environ.get("DEMO_MODEL", "demo-llm-1"))
    ap.add_argument(
        "--agent-share",
        type=float,
        default=_env_float("DEMO_AGENT_SHARE", 0.25),
        help="share of the traffic that is agent runs with tools",
    )
    args = ap.parse_args(argv)
    if args.rate <= 0 or not 0 <= args.drift_share <= 1 or not 0 <= args.agent_share <= 1:
        ap.error("--rate must be > 0, --drift-share and --agent-share in [0, 1]")

    nexagauge.configure(
        service_name=args.service_name, endpoint=args.endpoint, protocol=args.protocol
    )
    app: DemoApp = from_flags(DemoApp, args)
    stop = False

    def _stop(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    t0 = time.monotonic()
    last_report = t0
    while not stop and (args.duration <= 0 or time.monotonic() - t0 < args.duration):
        if app.rng.random() < app.agent_share:
            app.agent_run()
            turns = 1
        else:
            turns = app.rng.randint(1, 3)
            app.conversation(turns)
        time.sleep(turns / args.rate)
        if time.monotonic() - last_report >= 30:
            last_report = time.monotonic()
            print(f"demo-app: {app.counts}", flush=True)
    nexagauge.shutdown()
    print(f"demo-app done: {app.counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
