"""The demo's agent path: a support agent with tools, traced with ``@nexagauge.tool`` and
``@nexagauge.trace(operation="invoke_agent", tools=[...])``, so a new user sees agent signals.

The agent answers account questions about the fictional "Acme Cloud": it looks up the account
(``account_status``, a JSON result) and searches the knowledge base (``search_docs``, text), then a
deterministic stand-in for the model writes the answer from the tool results (which the evaluator
uses as grounding evidence, labelled ``tool:<name>#<call id>``). Every trace: ``support.agent``
(invoke_agent, declared tools) > ``execute_tool ...`` spans + ``chat demo-llm-1``, the span an
LLM client's OpenTelemetry instrumentation records (GenAI conventions, content on the span).

A few runs go wrong the three ways the agent signals catch (fixed shares, from the app's seeded
random generator):

* ``tool_failure`` (~10 %): the account service times out (the tool raises; the agent answers
  from the documents alone);
* ``loop`` (~5 %): the agent repeats the same ``search_docs`` call three times;
* ``undeclared`` (~5 %): the agent calls ``escalate_ticket``, a tool it was not given.

Example::

    agent = DemoAgent(random.Random(7), model="demo-llm-1")
    agent.ask("What plan is account acme-42 on?")
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

import nexagauge
from nexagauge.sdk import conventions as C

AGENT = "acme-support"

ACCOUNTS: dict[str, dict[str, Any]] = {
    f"acme-{n}": {
        "account_id": f"acme-{n}",
        "plan": plan,
        "region": region,
        "sso_enforced": plan != "Starter",
        "open_invoices": n % 3,
    }
    for n, plan, region in (
        (7, "Business", "Frankfurt"),
        (12, "Enterprise", "Virginia"),
        (42, "Starter", "Singapore"),
        (77, "Business", "Virginia"),
    )
}
#: the help center the agent searches (its own: the demo app's knowledge base answers questions)
ARTICLES = (
    "Plans are Starter, Business and Enterprise. Single sign-on is included in the Business "
    "and Enterprise plans.",
    "An account runs in one region: Frankfurt, Virginia or Singapore. Data never leaves the "
    "region of the account.",
    "Single sign-on can be enforced by administrators for every member of an account.",
    "Open invoices are listed in the console under Billing. Invoices older than thirty days "
    "suspend the account.",
)
#: question templates about an account; ``{a}`` = the account id
QUESTIONS = (
    "What plan is account {a} on?",
    "In which region does account {a} run?",
    "Does account {a} have single sign-on enforced?",
    "How many open invoices does account {a} have?",
)
#: share of runs per fault (the rest are clean)
FAULTS = (("tool_failure", 0.10), ("loop", 0.05), ("undeclared", 0.05))


class AccountServiceTimeout(TimeoutError):
    """The account service did not answer in time (the demo's failing tool)."""


@dataclass
class DemoAgent:
    """The traced support agent (see module docstring)."""

    rng: random.Random
    model: str = "demo-llm-1"
    #: where the LLM spans go (default: the global provider, which ``nexagauge.configure`` sets)
    provider: Any = None
    counts: dict[str, int] = field(
        default_factory=lambda: {"clean": 0, "tool_failure": 0, "loop": 0, "undeclared": 0}
    )

    def __post_init__(self) -> None:
        self._fail_next = False

        @nexagauge.tool(description="Look up an Acme Cloud account by id")
        def account_status(account_id: str, tool_call_id: str) -> dict[str, Any]:
            if self._fail_next:
                raise AccountServiceTimeout("account service timed out after 2.0 s")
            return ACCOUNTS[account_id]

        @nexagauge.tool(description="Search the Acme Cloud help center")
        def search_docs(query: str, tool_call_id: str) -> str:
            words = set(query.lower().strip("?").split())
            return max(ARTICLES, key=lambda a: len(words & set(a.lower().split())))

        @nexagauge.tool(description="Hand the conversation to a human")
        def escalate_ticket(reason: str, tool_call_id: str) -> str:
            return "ticket T-1001 opened"

        self.account_status = account_status
        self.search_docs = search_docs
        self.escalate_ticket = escalate_ticket
        self._run = nexagauge.trace(
            name="support.agent",
            operation=C.OPERATION_INVOKE_AGENT,
            tools=[account_status, search_docs],  # escalate_ticket is not declared
            attributes={C.GEN_AI_AGENT_NAME: AGENT, C.GEN_AI_REQUEST_MODEL: self.model},
        )(self._agent)

    def fault(self) -> str:
        x = self.rng.random()
        for name, share in FAULTS:
            if x < share:
                return name
            x -= share
        return "clean"

    def question(self) -> str:
        return self.rng.choice(QUESTIONS).format(a=self.rng.choice(list(ACCOUNTS)))

    def ask(self, question: str | None = None, fault: str | None = None) -> str:
        """One agent run (one trace); returns the answer. ``fault``: one of :data:`FAULTS` or
        ``clean`` (default: drawn from the demo's shares)."""
        fault = fault or self.fault()
        self.counts[fault] += 1
        return str(self._run(question or self.question(), fault))

    def _agent(self, question: str, fault: str) -> str:
        account = next((w.strip("?.") for w in question.split() if w.startswith("acme-")), "")
        facts: list[str] = []
        calls = 0

        def cid() -> str:
            nonlocal calls
            calls += 1
            return f"call_{calls}"

        self._fail_next = fault == "tool_failure"
        try:
            status = self.account_status(account, tool_call_id=cid())
            facts.append(_describe(status))
        except AccountServiceTimeout:
            facts.append("The account service is not answering right now.")
        finally:
            self._fail_next = False
        topic = " ".join(w for w in question.split() if not w.startswith("acme-"))
        for _ in range(3 if fault == "loop" else 1):
            doc = self.search_docs(topic, tool_call_id=cid())
        facts.append(doc.split(". ")[0].rstrip(".") + ".")
        if fault == "undeclared":
            self.escalate_ticket("customer asked for a human", tool_call_id=cid())
        return self._generate(question, facts)

    def _generate(self, question: str, facts: list[str]) -> str:
        """The model's final answer, recorded as an instrumented LLM client records a chat call."""
        answer = " ".join(facts)
        tracer = trace.get_tracer("nexagauge.demo.llm", tracer_provider=self.provider)
        with tracer.start_as_current_span(f"{C.OPERATION_CHAT} {self.model}") as span:
            span.set_attributes(
                {
                    C.GEN_AI_OPERATION_NAME: C.OPERATION_CHAT,
                    C.GEN_AI_REQUEST_MODEL: self.model,
                    C.GEN_AI_INPUT_MESSAGES: _messages(C.ROLE_USER, question),
                    C.GEN_AI_OUTPUT_MESSAGES: _messages(C.ROLE_ASSISTANT, answer, final=True),
                }
            )
        return answer


def _messages(role: str, text: str, *, final: bool = False) -> str:
    msg: dict[str, Any] = {
        C.MSG_ROLE: role,
        C.MSG_PARTS: [{C.PART_TYPE: C.PART_TYPE_TEXT, C.PART_CONTENT: text}],
    }
    if final:
        msg[C.MSG_FINISH_REASON] = C.FINISH_REASON_STOP
    return json.dumps([msg])


def _describe(status: dict[str, Any]) -> str:
    sso = "enforced" if status["sso_enforced"] else "not enforced"
    return (
        f"Account {status['account_id']} is on the {status['plan']} plan in "
        f"{status['region']}, with single sign-on {sso} and {status['open_invoices']} open "
        "invoices."
    )
