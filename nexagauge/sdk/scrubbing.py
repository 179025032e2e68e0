"""Redaction of secrets (and optionally PII) from recorded values, before they leave the process.

Why here and not in the collector: a secret that reaches the exporter queue has already left the
app's control (retries, logs of a failing exporter, a misconfigured collector). The SDK therefore
scrubs every string it records -- input, output, documents (content, id, metadata), span names,
static attributes, session and user ids, evaluation knobs, exception messages and stack traces,
streamed output -- when it records it, after cutting it to what is kept (the cost is bounded by
the size limit, never by the size of the argument).

Rules (:mod:`nexagauge.sdk.secret_rules`) are regular expressions with names. Each rule replaces
either the whole match or only its ``(?P<v>...)`` group (so ``password=hunter2`` keeps
``password=`` for readability) with ``[scrubbed:<rule>]``; every (attribute, rule) that changed a
value is listed in the span attribute ``nexagauge.scrubbed`` so a reader knows the value was
altered. A user hook runs after the rules and may rewrite anything; if the hook raises, the value
is dropped (fail closed).

For speed each rule has gates (byte scans in C: a literal, a long token, a secret-looking key
before ``=``/``:``) and its regex runs only when they pass; ordinary text costs a few scans and no
regex. Several texts of one call are gated together in one pass (:meth:`Scrubber.gate`, which
also tells whether the texts need JSON escaping).
:func:`scrub_text` is the stable entry point for code outside the SDK.

Example::

    >>> s = Scrubber()
    >>> s.scrub("gen_ai.input.messages", "my key is sk-abcdefghijklmnop1234")
    ('my key is [scrubbed:api_key]', ['gen_ai.input.messages:api_key'])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from nexagauge.sdk import conventions as C
from nexagauge.sdk import scrub_gates
from nexagauge.sdk._errors import internal_error
from nexagauge.sdk.pii_rules import PII_RULES
from nexagauge.sdk.scrub_compile import CompiledRule, lean_plans, may_need_rules
from nexagauge.sdk.scrub_gates import (
    B64_TABLE,
    CLASS_TABLE,
    LONG_RUN,
    MEMO_CHARS,
    MEMO_MAX_TEXT,
    MEMO_TEXTS,
    NON_DIGITS,
    SEPS_PRESENT,
    CleanMemo,
    all_cases,
    key_ends,
    key_windows,
    long_runs,
    may_follow_key,
    may_start,
)
from nexagauge.sdk.secret_rules import SECRET_RULES, ScrubHook, ScrubRule

__all__ = [
    "CLEAN",
    "MEMO_CHARS",
    "MEMO_MAX_TEXT",
    "MEMO_TEXTS",
    "PII_RULES",
    "PLAIN",
    "SECRET_RULES",
    "CleanMemo",
    "Label",
    "ScrubHook",
    "ScrubRule",
    "Scrubber",
    "scrub_text",
]

#: ``label(rule name, matched value) -> placeholder`` (:meth:`Scrubber.relabel`)
Label = Callable[[str, str], str]
# joins the texts gated together: a blank line no rule's match needs and every boundary accepts
JOIN = "\n"
#: :meth:`Scrubber.gate` verdicts: no text needs scrubbing; and none needs JSON escaping but
#: for its newlines and double quotes
CLEAN = 1
PLAIN = 2


class Scrubber:
    """Applies the rules and the hook to strings; see the module docstring.

    Example::

        >>> Scrubber(pii=True).scrub("a", "mail bob@example.com")
        ('mail [scrubbed:email]', ['a:email'])
    """

    __slots__ = (
        "_all_keys",
        "_by_shape",
        "_key_tails",
        "_key_windows",
        "_keyed",
        "_lean",
        "_plans",
        "_rules",
        "hook",
        "known_clean",
        "scrub_keys",
    )

    def __init__(
        self,
        *,
        secrets: bool = True,
        pii: bool = False,
        extra_rules: Iterable[ScrubRule] = (),
        hook: ScrubHook | None = None,
    ) -> None:
        rules: list[CompiledRule] = []
        if secrets:
            rules.extend(CompiledRule(r, builtin=True) for r in SECRET_RULES)
        if pii:
            rules.extend(CompiledRule(r, builtin=True) for r in PII_RULES)
        rules.extend(CompiledRule(r, builtin=False) for r in extra_rules)
        self._rules = tuple(rules)
        #: texts (documents) this scrubber found clean: a passage retrieved again is not scanned
        #: again (bounded: MEMO_TEXTS texts, MEMO_CHARS characters, oldest dropped first)
        self.known_clean = CleanMemo()
        self._all_keys = tuple({k for r in rules for k in (r.keys or ())})
        if any(len(k) < 3 or len(k) > 16 for k in self._all_keys):
            raise ValueError("scrub rule keys must be 3 to 16 characters long")
        self._key_tails = frozenset(v for k in self._all_keys for v in all_cases(k[-3:]))
        self._key_windows = key_windows(self._all_keys)
        self.hook = hook
        self.scrub_keys = secrets
        # The cheap gates (separators present, long token present) are computed once per text;
        # the rules that can pass them are precomputed per "shape", so a clean text visits only
        # the few rules without such gates.
        # per shape (index: separators mask << 1 | long run): (rules without a key gate, with one)
        by_shape: list[tuple[tuple[CompiledRule, ...], tuple[CompiledRule, ...]]] = []
        for index in range(16):
            present = SEPS_PRESENT[index >> 1]
            long_run = bool(index & 1)
            shape = [
                r
                for r in self._rules
                if (not r.separators or any(sep in present for sep in r.separators))
                and (long_run or not r.long_token)
            ]
            by_shape.append(
                (
                    tuple(r for r in shape if r.keys is None),
                    tuple(r for r in shape if r.keys is not None),
                )
            )
        self._by_shape = tuple(by_shape)
        #: per shape, the lean checks that tell most clean texts apart without visiting each
        #: rule's gates (:mod:`nexagauge.sdk.scrub_compile`)
        self._plans = lean_plans([rules for rules, _keyed in by_shape])
        #: shapes with key-gated rules (bit i: shape i), for the native lean gate; it is used
        #: unless a window holds the newline that joins texts (then only the joined text tells)
        self._keyed = sum(1 << i for i, (_r, keyed) in enumerate(by_shape) if keyed)
        lean = scrub_gates.lean_native
        self._lean = lean if not any(b"\n" in w for w in self._key_windows) else None

    @property
    def active(self) -> bool:
        """True when scrubbing can change anything (rules or a hook configured)."""
        return bool(self._rules) or self.hook is not None

    def scrub(self, attribute: str, text: str) -> tuple[str, list[str] | None]:
        """Return ``(scrubbed text, ["<attribute>:<rule>", ...] or None when unchanged)``.

        Also replaces lone surrogates (not encodable as UTF-8) with ``?``: an OTLP exporter would
        fail on them and drop the whole batch.
        """
        marks: list[str] | None = None
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
            raw = text.encode("utf-8")
        if self._rules:
            hits = self._apply_rules(text, raw)
            if hits is not None:
                text, names = hits
                marks = [f"{attribute}:{name}" for name in names]
        if self.hook is not None:
            try:
                new = self.hook(attribute, text)
                if not isinstance(new, str):
                    new = str(new)
            except Exception as exc:
                new = C.SCRUBBED_REPLACEMENT_TEMPLATE.format(rule="hook_error")
                marks = [*(marks or ()), f"{attribute}:hook_error"]
                internal_error("scrub hook", exc)
            if new != text:
                text = new
                if f"{attribute}:hook" not in (marks or ()) and not (marks or [""])[-1].endswith(
                    ":hook_error"
                ):
                    marks = [*(marks or ()), f"{attribute}:hook"]
        return text, marks

    def scrub_data(self, attribute: str, data: Any) -> tuple[Any, list[str] | None]:
        """Scrub every string (keys included) of JSON-compatible ``data``; returns a new copy.

        Used for structured values recorded as JSON (document metadata, static attributes,
        evaluation knobs): scrubbing the strings before encoding keeps the JSON valid, which
        scrubbing the encoded text (with its escapes) would not.

        Example::

            >>> Scrubber().scrub_data("m", {"note": "DB_PASSWORD=hunter2", "n": 1})
            ({'note': 'DB_PASSWORD=[scrubbed:password]', 'n': 1}, ['m:password'])
        """
        marks: list[str] = []

        def walk(value: Any) -> Any:
            if isinstance(value, str):
                new, found = self.scrub(attribute, value)
                if found:
                    marks.extend(m for m in found if m not in marks)
                return new
            if isinstance(value, dict):
                return {walk(k): walk(v) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return [walk(v) for v in value]
            return value

        out = walk(data)
        return out, marks or None

    def is_clean(self, text: str) -> bool:
        """True when :meth:`scrub` would certainly return ``text`` unchanged (cheap gates only).

        Lets a caller gate several texts with one pass over their concatenation (joined with
        :data:`JOIN`): every gate is monotone, so a clean concatenation means clean parts.
        """
        if self.hook is not None:
            return False
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return not self._rules or not self._candidates(raw)

    def all_clean(self, texts: list[str], remember: list[str] | None = None) -> bool:
        """True when :meth:`scrub` would certainly return each of ``texts`` unchanged.

        One pass over the texts joined by :data:`JOIN`: the gates, then (only for built-in rules
        whose gates pass) one regex search. A built-in rule that matches nowhere in the joined
        text matches in none of the parts: its matches never need the text around them and every
        boundary it tests accepts a newline as it accepts the start or end of a text.
        Custom rules and hooks may depend on where a text starts, so they make this False.
        ``remember``: texts (among ``texts``) to add to :attr:`known_clean` when all are clean.

        Example::

            >>> Scrubber().all_clean(["What is the capital of France?", "Paris: 2.1 million"])
            True
        """
        return self.gate(texts, remember) != 0

    def gate(self, texts: list[str], remember: list[str] | None = None) -> int:
        """:meth:`all_clean` with what the same pass learnt about JSON: 0 when some text may
        need scrubbing, else :data:`CLEAN`, plus :data:`PLAIN` when the only characters JSON
        escapes in the texts are newlines and double quotes (no backslash or other control
        character), so ``'"' + plain_json_body(text) + '"'`` is a text's JSON string (the recorder
        then skips the escaping pass; computed only when scrubbing rules run).

        Example::

            >>> Scrubber().gate(["Paris: 2.1 million"]) == CLEAN | PLAIN
            True
            >>> Scrubber().gate(['He said "hi"']) == CLEAN | PLAIN
            True
            >>> Scrubber().gate(["a\\tb"]) == CLEAN  # a tab: escaped by the JSON encoder
            True
        """
        if self.hook is not None:
            return 0
        if not self._rules:
            return CLEAN
        if self._lean is not None and type(texts) is list:  # one C pass (scrub_gates.lean_native)
            verdict = self._lean(texts, self._plans, self._keyed, self._key_windows)
            if verdict >= 0:
                if verdict and remember:
                    self.known_clean.add(remember)
                return verdict
        joined = JOIN.join(texts)
        try:
            raw = joined.encode("utf-8")
        except UnicodeEncodeError:
            return 0
        classes = raw.translate(CLASS_TABLE)
        # the common case inline (it runs on every recorded text): see _shape and _lean_clean
        find = raw.find
        mask = (find(b"=") >= 0) | (find(b":") >= 0) << 1 | (find(b"@") >= 0) << 2
        shape = mask << 1 | (classes.rfind(LONG_RUN) >= 0)
        plan = self._plans[shape]
        if (
            plan is None
            or (self._by_shape[shape][1] and may_follow_key(raw, mask, self._key_windows))
            or may_need_rules(plan, raw)
        ):
            for rule in self._candidates(raw, classes, shape):
                if not rule.builtin or rule.regex.search(joined) is not None:
                    return 0
        if remember:
            self.known_clean.add(remember)
        # no byte JSON escapes but newlines and double quotes (CLASS_TABLE: the others, never
        # part of a longer character in UTF-8, are b"\\"): one memchr
        return CLEAN if classes.find(b"\\") >= 0 else CLEAN | PLAIN

    @staticmethod
    def _shape(raw: bytes, classes: bytes) -> int:
        """Which separators ``raw`` holds and whether it has a long token: the index of
        ``_by_shape`` (separators mask << 1 | long run)."""
        # single-byte finds are memchr (SIMD), several times cheaper than any other pass
        find = raw.find
        mask = (find(b"=") >= 0) | (find(b":") >= 0) << 1 | (find(b"@") >= 0) << 2
        # existence tests of multi-byte needles use rfind: CPython's find of a short needle in a
        # text of a few KB is 2-3x slower than rfind on prose (its skip loop), memchr aside
        return mask << 1 | (classes.rfind(LONG_RUN) >= 0)

    def _lean_clean(self, raw: bytes, shape: int) -> bool:
        """True when no rule can match ``raw`` by the lean checks of its shape (ordinary prose);
        False means "go through every gate" (:mod:`nexagauge.sdk.scrub_compile`)."""
        plan = self._plans[shape]
        if plan is None:
            return False
        if self._by_shape[shape][1] and may_follow_key(raw, shape >> 1, self._key_windows):
            return False
        return not may_need_rules(plan, raw)

    def _candidates(
        self, raw: bytes, classes: bytes | None = None, shape: int = -1
    ) -> list[CompiledRule]:
        """The rules whose gates ``raw`` passes (usually none); ``classes``: ``raw`` translated
        with ``CLASS_TABLE`` and ``shape`` (:meth:`_shape`) when the caller has them.

        Every gate is a C-level pass over the bytes (translate, find, split) or a check of the
        few long tokens; the passes are computed once per text and only when a rule needs them.
        """
        if classes is None:
            classes = raw.translate(CLASS_TABLE)
        if shape < 0:
            shape = self._shape(raw, classes)
        mask = shape >> 1
        long_run = bool(shape & 1)
        rules, keyed = self._by_shape[shape]
        heads: list[int] | None = None  # where a key of some rule meets a separator (rarely)
        if keyed and may_follow_key(raw, mask, self._key_windows):
            heads = key_ends(raw, self._key_tails, self._all_keys)  # None: too many to look at
            if heads is None or heads:
                rules = rules + keyed
        out: list[CompiledRule] = []
        if not rules:
            return out
        low: bytes | None = None
        digits = -1
        runs: list[tuple[int, bytes]] | None = None
        for rule in rules:
            if rule.min_digits:
                if digits < 0:
                    digits = len(raw.translate(None, NON_DIGITS))
                if digits < rule.min_digits:
                    continue
            if rule.raw_triggers is not None:
                for t in rule.raw_triggers:
                    if raw.rfind(t) >= 0:
                        break
                else:
                    continue
            if rule.base64_run and (
                # a 40-char base64 run with at most one / or + holds a 16-char token run
                (
                    not long_run
                    and (
                        (raw.find(b"/") < 0 and raw.find(b"+") < 0)  # memchr, then count
                        or raw.count(b"/") + raw.count(b"+") < 2
                    )
                )
                or raw.translate(B64_TABLE).rfind(rule.base64_run) < 0
            ):
                continue
            if rule.bytes_regex is not None or rule.run_prefixes is not None:
                if runs is None:
                    runs = long_runs(raw, classes)
                if rule.bytes_regex is not None:
                    search = rule.bytes_regex.search
                    starts = rule.token_starts
                    if not any(
                        search(run) for _, run in runs if starts is None or may_start(run, starts)
                    ):
                        continue
                if rule.run_prefixes is not None and not any(
                    raw[max(0, i - 8) : i].endswith(rule.run_prefixes) for i, _ in runs
                ):
                    continue
            if rule.triggers is not None:
                if low is None:
                    low = raw.lower()
                for t in rule.triggers:
                    if low.rfind(t) >= 0:
                        break
                else:
                    continue
            if (
                rule.keys is not None
                and heads is not None
                and not any(raw[max(0, j - 16) : j].lower().endswith(rule.keys) for j in heads)
            ):
                continue
            out.append(rule)
        return out

    def relabel(self, text: str, label: Label) -> str:
        """``text`` with the rules applied (no hook, no marks), each matched value replaced by
        ``label(rule name, value)``: the evaluator's case scrubber gives one value one numbered
        placeholder throughout a case (:mod:`nexagauge.schema.scrub`).

        Example::

            >>> Scrubber().relabel("key sk-abcdefghijklmnop1234", lambda r, v: f"<{r}:{len(v)}>")
            'key <api_key:23>'
        """
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
            raw = text.encode("utf-8")
        hits = self._apply_rules(text, raw, label) if self._rules else None
        return text if hits is None else hits[0]

    def _apply_rules(
        self, text: str, raw: bytes, label: Label | None = None
    ) -> tuple[str, list[str]] | None:
        names: list[str] = []
        classes = raw.translate(CLASS_TABLE)
        shape = self._shape(raw, classes)
        if self._lean_clean(raw, shape):
            return None
        for rule in self._candidates(raw, classes, shape):
            hit: list[bool] = []
            new = rule.regex.sub(lambda m, r=rule, h=hit: _replace(m, r, h, label), text)  # type: ignore[misc]
            if hit:
                text = new
                if rule.name not in names:
                    names.append(rule.name)
        return (text, names) if names else None


_DEFAULT: dict[bool, Scrubber] = {}


def scrub_text(text: str, *, pii: bool = False) -> str:
    """``text`` with the built-in secret rules (and, with ``pii``, personal data) scrubbed.

    The stable entry point for code outside the SDK (the evaluator's logs and dead-letter
    records): the same rules as ``@nexagauge.trace`` with its defaults, no hook, no marks.

    Example::

        >>> scrub_text("export OPENAI_API_KEY=abc123def456")
        'export OPENAI_API_KEY=[scrubbed:secret]'
    """
    scrubber = _DEFAULT.get(pii)
    if scrubber is None:
        scrubber = _DEFAULT[pii] = Scrubber(pii=pii)
    return scrubber.scrub("text", text)[0]


def _replace(m: re.Match[str], rule: CompiledRule, hit: list[bool], label: Label | None) -> str:
    whole = m.group(0)
    if rule.check is not None and not rule.check(whole):
        return whole
    hit.append(True)
    base = m.start()
    for vname in rule.vnames:
        start, end = m.span(vname)
        if start >= 0:
            if whole.startswith("[scrubbed:", start - base):  # already scrubbed (by key)
                hit.pop()
                return whole
            value = whole[start - base : end - base]
            new = label(rule.name, value) if label else _template(rule.name)
            return whole[: start - base] + new + whole[end - base :]
    return label(rule.name, whole) if label else _template(rule.name)


def _template(rule: str) -> str:
    return C.SCRUBBED_REPLACEMENT_TEMPLATE.format(rule=rule)
