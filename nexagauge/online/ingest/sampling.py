"""Which extracted cases are evaluated: deterministic sampling, rules, rate and budget limits.

Decisions are a pure function of the trace id (or the conversation id when sessions are sampled
whole) and the configuration, so every consumer process decides the same way and a re-delivered
trace gets the same answer. The rate test is OpenTelemetry's ``TraceIdRatioBased``: the low 64
bits of the trace id below ``rate * 2**64``; a lower rate's sample is therefore a subset of a higher
rate's (10% is inside 25%). Conversation ids are hashed (BLAKE2b, 64 bits) onto the same scale.

Rules are tried in order; the first rule whose ``service``/``span_name`` (shell patterns) and
``attribute`` values all match decides the rate and which metric nodes run. ``always`` rules and
(with ``always_on_error``) traces with an error span are evaluated regardless of rate.

:class:`Limiter` then enforces the hard caps: evaluations per second (token bucket) and USD per
rolling hour/day (spend recorded from results, plus the expected cost of evaluations in flight).
Every refusal has a reason (``rate_limit``, ``budget_hour``, ``budget_day``) for the skip counter.

Example:
    >>> from nexagauge.settings import SamplingSettings
    >>> s = Sampler(SamplingSettings(default_rate=0.25, by_conversation=False))
    >>> tid = bytes.fromhex("00000000000000000000000000000001")
    >>> s.decide(tid, service="svc", span_name="chat", attrs={}).sampled
    True
"""

from __future__ import annotations

import fnmatch
import hashlib
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nexagauge.sdk import conventions as C
from nexagauge.settings import SamplingRule, SamplingSettings

_LIMIT = 2**64
#: attributes holding a conversation id (GenAI, OpenInference, OpenLLMetry association property)
_CONVERSATION_MARKS = frozenset(
    {
        C.GEN_AI_CONVERSATION_ID,
        C.OI_SESSION_ID,
        C.TRACELOOP_ASSOCIATION_PROPERTIES_PREFIX + "session_id",
    }
)


def ratio_bound(rate: float) -> int:
    """The TraceIdRatioBased bound: sampled iff ``low64(trace_id) < bound``."""
    return round(min(max(rate, 0.0), 1.0) * _LIMIT)


def trace_key(trace_id: bytes) -> int:
    """The low 64 bits of a 16-byte trace id (what TraceIdRatioBased compares)."""
    return int.from_bytes(trace_id[-8:], "big")


def conversation_key(conversation_id: str) -> int:
    """A uniform 64-bit key for a conversation id (same id -> same key on every process)."""
    return int.from_bytes(
        hashlib.blake2b(conversation_id.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
        "big",
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """The sampling decision for one case. ``nodes`` None = the configured default node set."""

    sampled: bool
    rule: str
    nodes: tuple[str, ...] | None = None


def _match(rule: SamplingRule, service: str, span_name: str, attrs: Mapping[str, Any]) -> bool:
    if rule.service is not None and not fnmatch.fnmatchcase(service, rule.service):
        return False
    if rule.span_name is not None and not fnmatch.fnmatchcase(span_name, rule.span_name):
        return False
    if rule.attribute:
        for k, want in rule.attribute.items():
            have = attrs.get(k)
            if have is None:
                return False
            if isinstance(have, bool):
                have = "true" if have else "false"
            if str(have) != want:
                return False
    return True


class Sampler:
    """Deterministic, rule-based sampling (see module docstring)."""

    def __init__(self, settings: SamplingSettings) -> None:
        self.settings = settings
        self._rules = [(r, ratio_bound(r.rate)) for r in settings.rules]
        self._default = ratio_bound(settings.default_rate)
        self._max_bound = max([self._default, *(b for _, b in self._rules)])
        self._always = [r for r in settings.rules if r.always]
        self._on_error = settings.always_on_error
        self._by_conv = settings.by_conversation

    @property
    def attribute_keys(self) -> frozenset[str]:
        """Attribute keys any rule looks at (the decoder reads them eagerly)."""
        return frozenset(k for r in self.settings.rules for k in (r.attribute or {}))

    @property
    def has_always_rules(self) -> bool:
        return bool(self._always)

    @property
    def max_bound(self) -> int:
        """The highest rate bound of any rule: a key at or above it is never rate-sampled."""
        return self._max_bound

    def could_sample_span(
        self, trace_id: bytes, service: str, span_name: str, marks: Mapping[str, Any], error: bool
    ) -> bool:
        """Decode-time check on one span: False when nothing about it can make its trace
        sampled (rate by trace id or conversation id, error, always rules).

        Conversation ids are read from ``marks`` (the eagerly decoded attributes).
        """
        bound = self._max_bound
        if error and self._on_error:
            return True
        conv = False
        if self._by_conv and marks:
            # the same key as decide(): the conversation id when the span carries one
            for k, cid in marks.items():
                if k in _CONVERSATION_MARKS and isinstance(cid, str) and cid:
                    conv = True
                    if conversation_key(cid) < bound:
                        return True
        if not conv and int.from_bytes(trace_id[-8:], "big") < bound:
            return True
        return bool(self._always) and any(
            _match(r, service, span_name, marks) for r in self._always
        )

    def may_sample(
        self,
        trace_id: bytes,
        spans: Iterable[tuple[str, str, Mapping[str, Any]]],
        *,
        error: bool = False,
        conversation_ids: Iterable[str] = (),
    ) -> bool:
        """Cheap trace-level pre-check: False only when no span of the trace can be sampled.

        ``spans`` are ``(service, span_name, eager attributes)``; used to skip case extraction
        (the expensive part) for the vast majority of traces at low rates.
        """
        if error and self.settings.always_on_error:
            return True
        bound = self.max_bound
        convs = list(conversation_ids) if self.settings.by_conversation else []
        # the key decide() uses: a conversation id of the trace if any, else the trace id
        if convs:
            if any(conversation_key(cid) < bound for cid in convs):
                return True
        elif trace_key(trace_id) < bound:
            return True
        if self._always:
            for service, name, attrs in spans:
                if any(_match(r, service, name, attrs) for r in self._always):
                    return True
        return False

    def decide(
        self,
        trace_id: bytes,
        *,
        service: str,
        span_name: str,
        attrs: Mapping[str, Any],
        error: bool = False,
        conversation_id: str | None = None,
    ) -> Decision:
        """Decide for one case (its span's service, name and attributes; the trace's error flag)."""
        key = (
            conversation_key(conversation_id)
            if conversation_id and self.settings.by_conversation
            else trace_key(trace_id)
        )
        for rule, bound in self._rules:
            if _match(rule, service, span_name, attrs):
                nodes = tuple(rule.nodes) if rule.nodes is not None else None
                if rule.always or key < bound:
                    return Decision(True, rule.name, nodes)
                if error and self.settings.always_on_error:
                    return Decision(True, "error", nodes)
                return Decision(False, rule.name, nodes)
        if key < self._default:
            return Decision(True, "default")
        if error and self.settings.always_on_error:
            return Decision(True, "error")
        return Decision(False, "default")


class Limiter:
    """Hard caps on evaluations per second and judge spend per rolling hour and day."""

    HOUR = 3600.0
    DAY = 86400.0

    def __init__(self, settings: SamplingSettings, clock: Any = time.monotonic) -> None:
        self.rate = settings.max_evaluations_per_second
        self.budget = {"hour": settings.budget_usd_per_hour, "day": settings.budget_usd_per_day}
        self._clock = clock
        self._tokens = float(max(1.0, self.rate or 1.0))
        self._last = clock()
        self._spend: deque[tuple[float, float]] = deque()
        self._n_cost = 0
        self._sum_cost = 0.0
        self.in_flight = 0

    def _refill(self, now: float) -> None:
        if self.rate is None:
            return
        cap = max(1.0, self.rate)
        self._tokens = min(cap, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def spent(self, window: str, now: float | None = None) -> float:
        """USD recorded in the rolling window (``hour`` or ``day``)."""
        now = self._clock() if now is None else now
        span = self.HOUR if window == "hour" else self.DAY
        while self._spend and now - self._spend[0][0] > self.DAY:
            self._spend.popleft()
        return sum(c for t, c in self._spend if now - t <= span)

    @property
    def expected_cost(self) -> float:
        """Average USD per evaluation so far (reserved for each evaluation in flight)."""
        return self._sum_cost / self._n_cost if self._n_cost else 0.0

    def remaining(self, window: str) -> float | None:
        cap = self.budget[window]
        if cap is None:
            return None
        return max(0.0, cap - self.spent(window))

    def try_acquire(self) -> str | None:
        """Reserve one evaluation; returns a skip reason, or None when it may run."""
        now = self._clock()
        reserved = self.in_flight * self.expected_cost
        for window in ("hour", "day"):
            cap = self.budget[window]
            if cap is not None and self.spent(window, now) + reserved + self.expected_cost >= cap:
                return f"budget_{window}"
        if self.rate is not None:
            self._refill(now)
            if self._tokens < 1.0:
                return "rate_limit"
            self._tokens -= 1.0
        self.in_flight += 1
        return None

    def cancel(self) -> None:
        """Release the reservation of an evaluation that never ran (dropped from the queue)."""
        self.in_flight = max(0, self.in_flight - 1)

    def finish(self, cost_usd: float) -> None:
        """Record the judge spend of a finished evaluation and release its reservation."""
        self.in_flight = max(0, self.in_flight - 1)
        self._n_cost += 1
        self._sum_cost += max(0.0, cost_usd)
        if cost_usd > 0:
            self._spend.append((self._clock(), cost_usd))
