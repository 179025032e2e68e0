"""Redaction of secrets (and optionally PII) from recorded values, before they leave the process.

Why here and not in the collector: a secret that reaches the exporter queue has already left the
app's control (retries, logs of a failing exporter, a misconfigured collector). The SDK therefore
scrubs every string it records (input, output, documents, exception messages) when it records it.

Rules are regular expressions with names. Each rule replaces either the whole match or only its
``(?P<v>...)`` group (so ``password=hunter2`` keeps ``password=`` for readability) with
``[scrubbed:<rule>]``; every (attribute, rule) that changed a value is listed in the span attribute
``nexagauge.scrubbed`` so a reader knows the value was altered. A user hook runs after the rules and
may rewrite anything; if the hook raises, the value is dropped (fail closed).

For speed all rules are compiled into one alternation and a text is scanned once; a text with no
candidate prefix (the common case) costs a single regex search.

Example::

    >>> s = Scrubber()
    >>> s.scrub("gen_ai.input.messages", "my key is sk-abcdefghijklmnop1234")
    ('my key is [scrubbed:api_key]', ['gen_ai.input.messages:api_key'])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nexagauge.sdk import conventions as C
from nexagauge.sdk._errors import internal_error

#: ``hook(attribute_name, value) -> new value``; return the value unchanged to keep it.
ScrubHook = Callable[[str, str], str]


@dataclass(frozen=True, slots=True)
class ScrubRule:
    """One named pattern. If it has ``(?P<v>...)`` groups only the matched group is replaced.

    Gates keep the common case (nothing secret in the text) cheap: the regex runs only when the
    text passes every gate given, cheapest first. ``separators``: one of these characters (from
    ``=``, ``:``, ``@``) must occur; ``long_token``: the text must contain a run of >= 16
    ``[A-Za-z0-9_-]`` characters; ``min_digits``: at least that many digits; ``raw_triggers``:
    case-sensitive literals, one must occur; ``triggers``: lowercase literals, one must occur in
    the lowercased text. No gate: the regex always runs. ``check`` (optional) gets the matched text
    and returns False to keep it (e.g. a Luhn check).

    Example (``nexagauge.configure(scrub_rules=[rule])`` adds it to the built-in rules):
        >>> rule = ScrubRule("order_id", r"ORD-\\d{8}", raw_triggers=("ORD-",))
        >>> Scrubber(extra_rules=[rule]).scrub("input", "refund ORD-12345678 please")
        ('refund [scrubbed:order_id] please', ['input:order_id'])
    """

    name: str
    pattern: str
    check: Callable[[str], bool] | None = None
    separators: str = ""
    long_token: bool = False
    min_digits: int = 0
    raw_triggers: tuple[str, ...] | None = None
    triggers: tuple[str, ...] | None = None


def _luhn_ok(text: str) -> bool:
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


#: Secrets scrubbed by default.
SECRET_RULES: tuple[ScrubRule, ...] = (
    ScrubRule(
        "private_key",
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
        long_token=True,
        raw_triggers=("-----BEGIN",),
    ),
    ScrubRule(
        "api_key",
        r"\b(?:"
        r"(?:sk|pk|rk)-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"
        r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|AKIA[0-9A-Z]{16}"
        r"|gh[pousr]_[A-Za-z0-9]{30,}"
        r"|github_pat_[A-Za-z0-9_]{30,}"
        r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
        r"|AIza[0-9A-Za-z_\-]{35}"
        r"|hf_[A-Za-z0-9]{30,}"
        r"|glpat-[A-Za-z0-9_\-]{20,}"
        r")",
        long_token=True,
    ),
    ScrubRule(
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        long_token=True,
        raw_triggers=("eyJ",),
    ),
    ScrubRule(
        "bearer_token",
        r"(?i:\b(?:bearer|token)\s+)(?P<v>(?=[A-Za-z0-9\-._~+/]*\d)[A-Za-z0-9\-._~+/]{16,}=*)",
        long_token=True,
        triggers=("bearer", "token"),
    ),
    ScrubRule(
        "authorization",
        r"(?i:\bauthorization[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token|digest)?\s*)"
        r"(?P<v>[^\s\"',;]{6,})",
        separators=":=",
        triggers=("authorization",),
    ),
    ScrubRule(
        "password",
        r"(?i:\b(?:password|passwd|pwd|passphrase)\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?P<v>[^\s\"',;&}]+)"
        r"|(?i:\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:)(?P<v>[^@\s/]+)(?=@)",
        separators=":=",
        triggers=("passw", "pwd", "passphrase", "://"),
    ),
    ScrubRule(
        "password",
        r"(?i:\bpassword\s+(?:is|was)\s*)(?P<v>[^\s\"',;]+)",
        raw_triggers=("assword",),
    ),
    ScrubRule(
        "secret",
        r"(?i:\b(?:secret|client[_\-]?secret|api[_\-]?key|apikey|access[_\-]?token|auth[_\-]?token"
        r"|refresh[_\-]?token|private[_\-]?key|secret[_\-]?key)\b[\"']?\s*[:=]\s*[\"']?)"
        r"(?P<v>[^\s\"',;&}]{4,})"
        # a bare `token` key: only long values (``max token: 256`` is not a secret)
        r"|(?i:\btoken\b[\"']?\s*[:=]\s*[\"']?)(?P<v>[^\s\"',;&}]{8,})",
        separators=":=",
        triggers=("secret", "api_key", "api-key", "apikey", "token", "private_key", "private-key"),
    ),
)

#: Personal data, scrubbed only with ``configure(scrub_pii=True)``.
PII_RULES: tuple[ScrubRule, ...] = (
    ScrubRule(
        "email",
        r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b",
        separators="@",
    ),
    ScrubRule("card_number", r"\b(?:\d[ \-]?){12,18}\d\b", check=_luhn_ok, min_digits=13),
)

_V_GROUP = re.compile(r"\(\?P<v>")

# bytes.translate table for the long-token gate: token characters -> b"a", the rest -> b" "
_TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_CLASS_TABLE = bytes(0x61 if i in _TOKEN_CHARS else 0x20 for i in range(256))
_NON_DIGITS = bytes(i for i in range(256) if not 0x30 <= i <= 0x39)
_LONG_RUN = b"a" * 16
# bit mask (1: "=", 2: ":", 4: "@") -> the separators present, in b"=:@" order
_SEPS_PRESENT = tuple(bytes(c for i, c in enumerate(b"=:@") if m & (1 << i)) for m in range(8))


class _Compiled:
    __slots__ = (
        "check",
        "long_token",
        "min_digits",
        "name",
        "raw_triggers",
        "regex",
        "separators",
        "triggers",
        "vnames",
    )

    def __init__(self, rule: ScrubRule) -> None:
        vnames: list[str] = []

        def _rename(_m: re.Match[str]) -> str:
            vnames.append(f"v{len(vnames)}")
            return f"(?P<{vnames[-1]}>"

        try:
            self.regex = re.compile(_V_GROUP.sub(_rename, rule.pattern))
        except re.error as exc:
            raise ValueError(f"scrub rule {rule.name!r}: invalid pattern: {exc}") from None
        bad = set(rule.separators) - set("=:@")
        if bad:
            raise ValueError(f"scrub rule {rule.name!r}: separators must be from '=:@', got {bad}")
        self.name = rule.name
        self.vnames = tuple(vnames)
        self.check = rule.check
        self.separators = tuple(c.encode() for c in rule.separators)
        self.long_token = rule.long_token
        self.min_digits = rule.min_digits
        self.raw_triggers = (
            tuple(t.encode() for t in rule.raw_triggers) if rule.raw_triggers else None
        )
        self.triggers = tuple(t.lower().encode() for t in rule.triggers) if rule.triggers else None


class Scrubber:
    """Applies the rules and the hook to strings; see the module docstring.

    Example::

        >>> Scrubber(pii=True).scrub("a", "mail bob@example.com")
        ('mail [scrubbed:email]', ['a:email'])
    """

    __slots__ = ("_by_shape", "_rules", "hook", "scrub_keys")

    def __init__(
        self,
        *,
        secrets: bool = True,
        pii: bool = False,
        extra_rules: Iterable[ScrubRule] = (),
        hook: ScrubHook | None = None,
    ) -> None:
        rules: list[ScrubRule] = []
        if secrets:
            rules.extend(SECRET_RULES)
        if pii:
            rules.extend(PII_RULES)
        rules.extend(extra_rules)
        self._rules = tuple(_Compiled(r) for r in rules)
        self.hook = hook
        self.scrub_keys = secrets
        # The cheap gates (separators present, long token present) are computed once per text;
        # the rules that can pass them are precomputed per "shape", so a clean text visits only
        # the few rules without such gates.
        self._by_shape: dict[tuple[bytes, bool], tuple[_Compiled, ...]] = {}
        for mask in range(8):
            present = bytes(c for i, c in enumerate(b"=:@") if mask & (1 << i))
            for long_run in (False, True):
                self._by_shape[(present, long_run)] = tuple(
                    r
                    for r in self._rules
                    if (not r.separators or any(sep in present for sep in r.separators))
                    and (long_run or not r.long_token)
                )

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

    def is_clean(self, text: str) -> bool:
        """True when :meth:`scrub` would certainly return ``text`` unchanged (cheap gates only).

        Lets a caller gate several texts with one pass over their concatenation.
        """
        if self.hook is not None:
            return False
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return not self._rules or not self._candidates(raw)

    def _candidates(self, raw: bytes) -> list[_Compiled]:
        """The rules whose gates ``raw`` passes (usually none)."""
        # bytes.find is a memchr / fast search in C (measurably cheaper than `in` here)
        seps = _SEPS_PRESENT[
            (raw.find(b"=") >= 0) | (raw.find(b":") >= 0) << 1 | (raw.find(b"@") >= 0) << 2
        ]
        long_run = raw.translate(_CLASS_TABLE).find(_LONG_RUN) >= 0
        rules = self._by_shape[(seps, long_run)]
        out: list[_Compiled] = []
        if not rules:
            return out
        low: bytes | None = None
        digits = -1
        for rule in rules:
            if rule.min_digits:
                if digits < 0:
                    digits = len(raw.translate(None, _NON_DIGITS))
                if digits < rule.min_digits:
                    continue
            if rule.raw_triggers is not None:
                for t in rule.raw_triggers:
                    if raw.find(t) >= 0:
                        break
                else:
                    continue
            if rule.triggers is not None:
                if low is None:
                    low = raw.lower()
                for t in rule.triggers:
                    if t in low:
                        break
                else:
                    continue
            out.append(rule)
        return out

    def _apply_rules(self, text: str, raw: bytes) -> tuple[str, list[str]] | None:
        names: list[str] = []
        for rule in self._candidates(raw):
            hit: list[bool] = []
            new = rule.regex.sub(lambda m, r=rule, h=hit: _replace(m, r, h), text)  # type: ignore[misc]
            if hit:
                text = new
                if rule.name not in names:
                    names.append(rule.name)
        return (text, names) if names else None


def _replace(m: re.Match[str], rule: _Compiled, hit: list[bool]) -> str:
    whole = m.group(0)
    if rule.check is not None and not rule.check(whole):
        return whole
    hit.append(True)
    replacement = C.SCRUBBED_REPLACEMENT_TEMPLATE.format(rule=rule.name)
    base = m.start()
    for vname in rule.vnames:
        start, end = m.span(vname)
        if start >= 0:
            if whole.startswith("[scrubbed:", start - base):  # already scrubbed (by key)
                hit.pop()
                return whole
            return whole[: start - base] + replacement + whole[end - base :]
    return replacement
