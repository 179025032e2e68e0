"""Per-call state of a traced call (:class:`Call`) and per-function facts (:class:`Meta`).

A :class:`Call` lives from the start of a traced call to the end of its span and is reachable from
code inside the call through the OpenTelemetry context (``add_context``, ``set_eval_knobs``...).
It owns the rule every recorded text follows: cut to what is kept first, then scrub, then mark
(:meth:`Call.text`), so scrubbing never costs more than the size limit allows.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context as otel_context

from nexagauge.sdk import config as _config
from nexagauge.sdk import conventions as C
from nexagauge.sdk.scrubbing import Scrubber
from nexagauge.sdk.serialize import dumps

MISSING: Any = object()
CALL_KEY = otel_context.create_key("nexagauge-call")
MAX_DOCUMENTS = 256
#: characters scrubbed past the size limit, so that a secret cut by the limit is still recognised
#: whole (a private key block longer than this is scrubbed from its BEGIN line to the cut)
SCRUB_MARGIN = 256


#: static attributes whose values the SDK itself writes (not app data): never scrubbed, so a hook
#: that redacts everything cannot make spans unrecognisable to the evaluator
_SDK_CONSTANTS = frozenset({C.GEN_AI_OPERATION_NAME, C.NG_SDK_VERSION})


def add_marks(marks: list[str] | None, new: list[str]) -> list[str]:
    """``marks`` plus the ones of ``new`` not already there (order kept)."""
    if marks is None:
        return list(new)
    marks.extend(m for m in new if m not in marks)
    return marks


class Meta:
    """What is known about a traced function at decoration time (computed once).

    The span name and static attributes are scrubbed with the scrubber in use; when ``configure``
    installs another one they are scrubbed again on the next call (:meth:`scrubbed_for`).
    """

    __slots__ = (
        "capture_input",
        "capture_output",
        "context_default",
        "context_name",
        "context_pos",
        "input_auto",
        "input_default",
        "input_name",
        "input_pos",
        "is_retrieval",
        "name",
        "raw_name",
        "raw_static",
        "scrubber",
        "static",
        "static_marks",
    )

    def __init__(self) -> None:
        self.name = ""
        self.raw_name = ""
        self.static: dict[str, Any] = {}
        self.raw_static: dict[str, Any] = {}  # scalars, or JSON-compatible dicts / lists
        self.scrubber: Scrubber | None = None
        self.static_marks: list[str] | None = None
        self.capture_input = True
        self.capture_output = True
        self.input_name: str | None = None
        self.input_pos: int | None = None
        self.input_default: Any = MISSING
        self.input_auto = False
        self.context_name: str | None = None
        self.context_pos: int | None = None
        self.context_default: Any = MISSING
        self.is_retrieval = False

    def scrubbed_for(self, scrubber: Scrubber) -> None:
        """Scrub the span name and the static attributes with ``scrubber`` (once per scrubber)."""
        marks: list[str] = []
        name, found = scrubber.scrub("span.name", self.raw_name)
        if found:
            marks = add_marks(marks, found)
        static: dict[str, Any] = {}
        for key, value in self.raw_static.items():
            found = None
            if (
                key in _SDK_CONSTANTS
            ):  # written by the SDK, never app data: the evaluator needs them
                pass
            elif isinstance(value, str):
                value, found = scrubber.scrub(key, value)
            elif isinstance(value, (dict, list)):  # structured: scrubbed before it is JSON
                data, found = scrubber.scrub_data(key, value)
                value = dumps(data)
            if found:
                marks = add_marks(marks, found)
            static[key] = value
        self.name = name
        self.static = static
        self.static_marks = marks or None
        self.scrubber = scrubber


class Call:
    """State of one traced call, reachable from code inside it through the OpenTelemetry context."""

    __slots__ = (
        "ctx",
        "docs",
        "input_text",
        "knobs",
        "late",
        "marks",
        "meta",
        "original",
        "parent",
        "recording",
        "span",
        "state",
        "strs",
        "turn_end",
    )

    def __init__(self, meta: Meta, state: _config.State) -> None:
        self.meta = meta
        self.state = state
        self.span: Any = None
        self.ctx: Any = None
        self.docs: list[dict[str, Any]] | None = None  # recorded (scrubbed) when the call ends
        #: documents passed as a list of plain strings (the common case), kept as they are until
        #: recorded: normalized only when other documents join them (:meth:`add_docs`)
        self.strs: tuple[str, ...] | None = None
        self.input_text: str | None = None  # str input, recorded when the call ends
        self.knobs: dict[str, str] | None = None
        #: attributes set when the span ends, before the recorded content: the fixed ones when the
        #: sampler does not read them (:mod:`nexagauge.sdk.sampler_view`), a tool's call
        self.late: dict[str, Any] | None = None
        self.marks: list[str] | None = None
        self.original: dict[str, int] | None = None
        self.parent: Call | None = None
        self.recording = True
        self.turn_end = False

    def mark(self, marks: list[str] | None) -> None:
        """Note that values were scrubbed (``nexagauge.scrubbed``)."""
        if marks:
            self.marks = add_marks(self.marks, marks)

    def add_late(self, attrs: dict[str, Any]) -> None:
        """Set ``attrs`` on the span when it ends, with the others (one attribute-map update)."""
        self.late = {**self.late, **attrs} if self.late else attrs

    def text(self, attribute: str, text: str, original: int = -1, clean: bool = False) -> str:
        """Cut, then scrub, then mark one recorded text.

        Only what is kept (the size limit plus :data:`SCRUB_MARGIN`) is scrubbed: a 10 MB argument
        costs what 32 KiB cost. ``original``: the length before the caller already dropped a tail
        (streams keep only what fits); the marker and ``nexagauge.original_length.*`` then report
        it. ``clean``: the caller already established (``Scrubber.gate``) that scrubbing would
        not change the text.
        """
        limit = self.state.max_value_length
        full = max(original, len(text))
        if len(text) > limit + SCRUB_MARGIN:
            text = text[: limit + SCRUB_MARGIN]
        if not clean:
            text, marks = self.state.scrubber.scrub(attribute, text)
            if marks is not None:
                self.mark(marks)
        if full > limit:
            text = self.truncate(attribute, text, full, limit)
        return text

    def truncate(self, attribute: str, text: str, original: int, limit: int) -> str:
        self.note_truncated(attribute, original)
        return text[:limit] + C.TRUNCATION_MARKER_TEMPLATE.format(original=original)

    def note_truncated(self, attribute: str, original: int) -> None:
        if self.original is None:
            self.original = {}
        self.original[attribute] = self.original.get(attribute, 0) + original

    def add_docs(self, docs: list[dict[str, Any]]) -> None:
        """Keep normalized documents (at most :data:`MAX_DOCUMENTS`); recorded at the end."""
        if self.strs is not None:
            self.docs = [{C.DOC_CONTENT: s} for s in self.strs]
            self.strs = None
        if self.docs is None:
            self.docs = []
        room = MAX_DOCUMENTS - len(self.docs)
        if len(docs) > room:
            self.note_truncated(C.GEN_AI_RETRIEVAL_DOCUMENTS, 0)
            docs = docs[: max(room, 0)]
        self.docs.extend(docs)
