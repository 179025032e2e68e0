"""Whether a traced call's fixed attributes may be set when its span ends instead of when it starts.

OpenTelemetry hands the attributes given at span start to the sampler (and copies them twice on
the way: the sampler's result, then the span's attribute map); attributes set later are not seen
by the sampler. OpenTelemetry's own samplers -- always on/off, trace-id ratio, and parent-based
compositions of them -- never read attributes. With one of them, a traced call's fixed attributes
(operation, workflow name, SDK version, knobs, session ids) go to the span with its recorded content
in one ``set_attributes`` at the end: one attribute-map update per span instead of two (a tenth of
``@nexagauge.trace``'s own cost on the RAG shape, ``bench/sdk_overhead.py``). With any other
sampler (an app's own, which may decide on ``gen_ai.operation.name``) they are given at start, as
the specification says, and the sampler sees them.

Example::

    >>> from opentelemetry.sdk.trace import TracerProvider
    >>> attributes_at_end(TracerProvider().get_tracer("x"))
    True
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import sampling
from opentelemetry.trace import ProxyTracer

#: OpenTelemetry's samplers that decide without looking at attributes (exact types: a subclass
#: may override ``should_sample``)
_BLIND = (sampling.StaticSampler, sampling.TraceIdRatioBased)
_PARENT_BASED = (sampling.ParentBased, sampling.ParentBasedTraceIdRatio)
_DELEGATES = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def _blind(sampler: Any) -> bool:
    kind = type(sampler)
    if kind in _BLIND:
        return True
    if kind in _PARENT_BASED:
        return all(_blind(getattr(sampler, name, None)) for name in _DELEGATES)
    return False


def attributes_at_end(tracer: Any) -> bool:
    """True when ``tracer``'s sampler never reads span attributes (see the module docstring);
    False for any other sampler, a tracer that is not the OpenTelemetry SDK's, or one not resolved
    yet (a proxy before the global provider is set)."""
    if isinstance(tracer, ProxyTracer):  # the global provider's: resolved once one is set
        tracer = tracer._tracer
    return _blind(getattr(tracer, "sampler", None))
