"""Scrubbing of an evaluation case before any judge, cache key, topic, dead letter or log sees it.

Most traffic the evaluator reads comes from instrumentation libraries that record prompts and
answers verbatim (openai-v2, OpenInference, Traceloop), and offline datasets are whatever the user
exported: the SDK's scrubber never saw them. :class:`CaseScrubber` applies the SDK's rules
(:mod:`nexagauge.sdk.secret_rules`, and with ``pii`` :mod:`nexagauge.sdk.pii_rules`) to every text
of an :class:`~nexagauge.schema.case.EvalCase`: input, output, reference, each context document
(and the joined context), conversation turns, the agent's tool-call arguments, results and
errors, rubric texts (geval criteria and steps, redteam rubrics, the conversation rubric),
metadata strings (keys included), warnings and source labels.

**Placeholders are stable within a case**: the same value gets the same numbered placeholder in
the question, the context and the answer (``[scrubbed:email#1]`` everywhere it occurs; another
email becomes ``[scrubbed:email#2]``), so a judge still sees that the answer repeats the address
the context gave ("your key ending in ..." stays grounded). Numbering follows a fixed order of
the fields, so the same case always scrubs to the same text (cache keys stay stable).

Cost: every text of a case is gated in one pass (byte scans, no regex for ordinary text); a case
with nothing to scrub is returned as it is. Text the SDK already scrubbed (``[scrubbed:...]``) is
not scrubbed again: the placeholders pass every gate untouched. Each rule's pattern is linear in
its text (no search restarts inside a run), so the cost of a value is bounded by its length.

Example::

    >>> from nexagauge.schema.case import parse_record
    >>> case = parse_record({"input": "Is bob@example.com on the list?",
    ...                      "context": ["Members: bob@example.com, ann@example.org"],
    ...                      "output": "Yes, bob@example.com is."})
    >>> s = CaseScrubber(pii=True).scrub(case)
    >>> (s.input, s.context, s.output)
    ('Is [scrubbed:email#1] on the list?', 'Members: [scrubbed:email#1], [scrubbed:email#2]', \
'Yes, [scrubbed:email#1] is.')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from nexagauge.schema.case import CONTEXT_SEPARATOR, EvalCase
from nexagauge.sdk.scrubbing import Scrubber

__all__ = ["CaseScrubber", "describe"]

_PREFIX = "[scrubbed:"


def describe(secrets: bool, pii: bool) -> str:
    """What a scrubber configured so removes, in words (the start-up line of serve and run).

    Example::

        >>> describe(True, False)
        'secrets (PII off)'
    """
    if not secrets and not pii:
        return "nothing (scrubbing off)"
    if not secrets:
        return "personal data only (secret rules off)"
    return "secrets and personal data (PII on)" if pii else "secrets (PII off)"


class _Numbering:
    """One case's placeholders: value -> ``[scrubbed:<rule>#<n>]``, numbered per rule."""

    __slots__ = ("by_value", "counts")

    def __init__(self) -> None:
        self.by_value: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def __call__(self, rule: str, value: str) -> str:
        placeholder = self.by_value.get(value)
        if placeholder is None:
            n = self.counts[rule] = self.counts.get(rule, 0) + 1
            placeholder = self.by_value[value] = f"{_PREFIX}{rule}#{n}]"
        return placeholder


class CaseScrubber:
    """Scrubs every text of a case (see module docstring); thread-safe, one per process.

    Args:
        secrets: the secret rules (keys, tokens, passwords...), on by default.
        pii: the personal-data rules (email, cards, IBAN, phone, national ids, IP addresses).
    """

    def __init__(self, *, secrets: bool = True, pii: bool = False) -> None:
        self.secrets = secrets
        self.pii = pii
        self._scrubber = Scrubber(secrets=secrets, pii=pii)
        #: cases that had something to scrub (tests and the bench read it)
        self.scrubbed = 0

    @property
    def active(self) -> bool:
        """Whether any rule is on."""
        return self._scrubber.active

    def describe(self) -> str:
        """:func:`describe` of this scrubber."""
        return describe(self.secrets, self.pii)

    def scrub_text(self, text: str) -> str:
        """One text on its own (an error message that echoes a value), numbered within itself."""
        return self._scrubber.relabel(text, _Numbering()) if self.active else text

    def scrub(self, case: EvalCase) -> EvalCase:
        """``case`` with every text scrubbed (the same object when nothing needed it)."""
        if not self.active:
            return case
        texts = _texts(case)
        memo = self._scrubber.known_clean
        unknown = [t for t in texts if t not in memo]
        docs = [d for d in case.context_documents if d not in memo]
        if not unknown or self._scrubber.gate(unknown, remember=docs):
            return case
        number = _Numbering()

        def fix(text: str) -> str:
            return self._scrubber.relabel(text, number)

        out = _rebuild(case, fix)
        if not number.by_value:  # only placeholders matched (the SDK's): nothing changed
            return case
        self.scrubbed += 1
        return out


def _texts(case: EvalCase) -> list[str]:
    """Every text :func:`_rebuild` fixes (the joined context only when it is not the documents'
    join), without copying the case: the gate of a clean case costs no model copy."""
    out = [case.output, *case.context_documents, *case.warnings]
    out += (s.partition(":")[2] or s for s in case.context_sources)  # as _label fixes them
    for v in (case.input, case.reference):
        if v is not None:
            out.append(v)
    if case.context is not None and case.context != CONTEXT_SEPARATOR.join(case.context_documents):
        out.append(case.context)
    for t in case.conversation:
        out += (t.input, t.output)
    if case.agent is not None:
        for c in case.agent.tool_calls:
            out.extend(v for v in (c.arguments, c.result, c.error) if v is not None)

    def take(text: str) -> str:
        out.append(text)
        return text

    for block in (case.geval, case.redteam, case.conversation_relevance):
        _block(block, take)
    if case.metadata:
        _data(case.metadata, take)
    return out


def _rebuild(case: EvalCase, fix: Callable[[str], str]) -> EvalCase:
    """``case`` with ``fix`` applied to each text (input first: placeholders number in reading
    order, question before context before answer)."""
    upd: dict[str, Any] = {}

    def opt(v: str | None) -> str | None:
        return None if v is None else fix(v)

    if case.input is not None:
        upd["input"] = fix(case.input)
    if case.conversation:
        upd["conversation"] = tuple(
            t.model_copy(update={"input": fix(t.input), "output": fix(t.output)})
            for t in case.conversation
        )
    docs = tuple(fix(d) for d in case.context_documents)
    upd["context_documents"] = docs
    if case.context is not None:
        joined = case.context == CONTEXT_SEPARATOR.join(case.context_documents)
        upd["context"] = CONTEXT_SEPARATOR.join(docs) if joined and docs else fix(case.context)
    upd["context_sources"] = tuple(_label(s, fix) for s in case.context_sources)
    upd["output"] = fix(case.output)
    upd["reference"] = opt(case.reference)
    if case.agent is not None:
        calls = tuple(
            c.model_copy(
                update={
                    "arguments": opt(c.arguments),
                    "result": opt(c.result),
                    "error": opt(c.error),
                }
            )
            for c in case.agent.tool_calls
        )
        upd["agent"] = case.agent.model_copy(update={"tool_calls": calls})
    if case.geval is not None:
        upd["geval"] = _block(case.geval, fix)
    upd["redteam"] = _block(case.redteam, fix)
    upd["conversation_relevance"] = _block(case.conversation_relevance, fix)
    upd["metadata"] = _data(case.metadata, fix)
    upd["warnings"] = tuple(fix(w) for w in case.warnings)
    return case.model_copy(update=upd)


# the free-text fields of the knob blocks (judge instructions); names, enums and numbers stay
_RUBRIC_TEXTS = {"goal", "criteria", "rubric_prompt"}
_RUBRIC_LISTS = {"violations", "non_violations", "evaluation_steps"}


def _block(model: Any, fix: Callable[[str], str]) -> Any:
    """A knob block with its rubric texts fixed (nested models and lists of models walked)."""
    if not isinstance(model, BaseModel):
        return model
    upd: dict[str, Any] = {}
    for name in type(model).model_fields:
        v = getattr(model, name)
        if name in _RUBRIC_TEXTS and isinstance(v, str):
            upd[name] = fix(v)
        elif name in _RUBRIC_LISTS and isinstance(v, list):
            upd[name] = [fix(x) if isinstance(x, str) else x for x in v]
        elif isinstance(v, BaseModel):
            upd[name] = _block(v, fix)
        elif isinstance(v, list) and v and isinstance(v[0], BaseModel):
            upd[name] = [_block(x, fix) for x in v]
    return model.model_copy(update=upd) if upd else model


def _label(label: str, fix: Callable[[str], str]) -> str:
    """A source label (``doc:<id>``, ``tool:<name>#<call id>``) with its id part fixed (a value
    right after ``doc:`` is read as an id by the number rules otherwise)."""
    kind, sep, rest = label.partition(":")
    return kind + sep + fix(rest) if sep else fix(label)


def _data(value: Any, fix: Callable[[str], str]) -> Any:
    """JSON-like ``value`` with every string (keys included) fixed."""
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, dict):
        return {_data(k, fix): _data(v, fix) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_data(v, fix) for v in value]
    return value
