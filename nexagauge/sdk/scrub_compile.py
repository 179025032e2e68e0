"""Scrub rules compiled for the scrubber, and the lean check it makes first on every text.

:class:`CompiledRule` is a :class:`~nexagauge.sdk.secret_rules.ScrubRule` with its regular
expression compiled and its gates encoded as bytes. :func:`lean_plans` derives, for each *shape* of
text (which of ``=``, ``:``, ``@`` occur; whether a long token does), the cheapest check per rule
that every match of the rule needs -- one of its trigger literals, a ``/`` or ``+`` for a base64 run,
enough digits -- so that :meth:`Scrubber.gate <nexagauge.sdk.scrubbing.Scrubber.gate>` can tell
the common case (ordinary prose: no rule can match) from a few C-level passes, without visiting the
rules one by one; only a text that passes some rule's check goes through every gate of every rule
(``Scrubber._candidates``). Texts with a long token always do (their rules check the tokens).

Example::

    >>> from nexagauge.sdk.secret_rules import SECRET_RULES
    >>> rule = CompiledRule(SECRET_RULES[0], builtin=True)
    >>> rule.name, rule.raw_triggers
    ('private_key', (b'-----BEGIN',))
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from nexagauge.sdk.scrub_gates import NON_DIGITS
from nexagauge.sdk.secret_rules import ScrubRule

_V_GROUP = re.compile(r"\(\?P<v>")

#: a shape's lean checks: the trigger literals of its rules (any present: go through every gate),
#: whether a "/" or "+" sends it there (a base64 run without a long token holds one), and the
#: digits that do (0: none); None when the shape's texts always go through every gate
Plan = tuple[tuple[bytes, ...], bool, int] | None


class CompiledRule:
    __slots__ = (
        "base64_run",
        "builtin",
        "bytes_regex",
        "check",
        "keys",
        "long_token",
        "min_digits",
        "name",
        "raw_triggers",
        "regex",
        "run_prefixes",
        "separators",
        "token_starts",
        "triggers",
        "vnames",
    )

    def __init__(self, rule: ScrubRule, builtin: bool) -> None:
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
        self.builtin = builtin
        self.vnames = tuple(vnames)
        self.check = rule.check
        self.separators = tuple(c.encode() for c in rule.separators)
        self.long_token = rule.long_token
        self.base64_run = b"a" * rule.base64_run if rule.base64_run else b""
        self.min_digits = rule.min_digits
        self.raw_triggers = (
            tuple(t.encode() for t in rule.raw_triggers) if rule.raw_triggers else None
        )
        self.triggers = tuple(t.lower().encode() for t in rule.triggers) if rule.triggers else None
        self.keys = tuple(k.lower().encode() for k in rule.keys) if rule.keys else None
        self.bytes_regex = re.compile(self.regex.pattern.encode()) if rule.token_only else None
        self.token_starts = (
            tuple(t.encode() for t in rule.token_starts)
            if rule.token_only and rule.token_starts
            else None
        )
        self.run_prefixes = (
            tuple(t.encode() for t in rule.run_prefixes) if rule.run_prefixes else None
        )


def lean_plans(shapes: Sequence[Sequence[CompiledRule]]) -> tuple[Plan, ...]:
    """Per shape (the scrubber's ``_by_shape`` order: separators mask << 1 | long run), the lean
    checks of its rules without a key gate: for each rule the cheapest condition all its matches
    need (a trigger literal; a "/" or "+" for a base64 run; its digits). None for a shape with a
    long token or with a rule that has no such condition. User rules are planned alike."""
    plans: list[Plan] = []
    for index, rules in enumerate(shapes):
        if index & 1:  # a long token: its rules check the tokens themselves
            plans.append(None)
            continue
        literals: list[bytes] = []
        slash_or_plus = False
        digits = 0
        for rule in rules:
            if rule.raw_triggers is not None:
                literals.extend(t for t in rule.raw_triggers if t not in literals)
            elif rule.base64_run:
                slash_or_plus = True
            elif rule.min_digits:
                digits = min(digits or rule.min_digits, rule.min_digits)
            else:
                plans.append(None)
                break
        else:
            plans.append((tuple(literals), slash_or_plus, digits))
    return tuple(plans)


def may_need_rules(plan: tuple[tuple[bytes, ...], bool, int], raw: bytes) -> bool:
    """True when some rule's lean check passes on ``raw`` (then every gate is consulted)."""
    literals, slash_or_plus, digits = plan
    for literal in literals:
        if raw.rfind(literal) >= 0:  # rfind: see Scrubber._shape
            return True
    if slash_or_plus and (raw.find(b"/") >= 0 or raw.find(b"+") >= 0):  # memchr
        return True
    return digits > 0 and len(raw.translate(None, NON_DIGITS)) >= digits
