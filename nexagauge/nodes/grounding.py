"""``grounding``: is every claim of the output supported by the context? (one judge call)

Every claim of the case is judged against the joined context in ONE call with the record's
``grounding`` knobs (``scoring_mode``, ``include_reasoning``). Each claim's ``label`` tells
``supported`` / ``not_supported`` / ``contradicted`` apart (both of the latter are REJECTED; a
contradiction is worse news and is reported as such). Metric ``grounding``, category ``answer``;
score = mean of per-claim normalized scores; skips (empty metrics, zero cost) when grounding is
disabled, the context is empty, or the output has no claims.

Example:
    >>> GroundingNode.metric, GroundingNode.target_field
    ('grounding', 'context')
"""

from __future__ import annotations

from nexagauge.nodes.claims import ClaimMetricNode
from nexagauge.schema.results import GroundingMetrics


class GroundingNode(ClaimMetricNode):
    name = "grounding"
    version = "1"
    output_model = GroundingMetrics
    task = "grounding"
    metric = "grounding"
    target_field = "context"
    block = "grounding"
