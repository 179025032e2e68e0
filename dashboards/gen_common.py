"""What every generated dashboard and rule file shares: metric names, datasource, label sets.

Part of ``dashboards/generate.py`` (see its docstring); the metric names come from
``nexagauge.emit.metric_names`` so a query can only name a metric the evaluator exports. Alert
thresholds live in ``nexagauge.emit.alerts`` (shared with ``nexagauge demo``).
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from nexagauge.emit import metric_names as mn
except ImportError:  # run from a checkout without the package installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from nexagauge.emit import metric_names as mn

__all__ = [
    "DATASOURCE_UID",
    "DS",
    "EVALUATOR_JOB",
    "FILTER",
    "ROUTE_LABELS",
    "RUNBOOK_BASE",
    "SCORE_LABELS",
    "mn",
]

#: the provisioned Prometheus datasource (dashboards/grafana/provisioning/datasources/)
DATASOURCE_UID = "nexagauge-prometheus"
DS = {"type": "prometheus", "uid": DATASOURCE_UID}
#: the scrape job of the evaluator in dashboards/prometheus/prometheus.yml
EVALUATOR_JOB = "nexagauge-evaluator"
#: where runbook_url annotations point; a path relative to the repository root by default
RUNBOOK_BASE = "docs/runbooks.md"

#: label set of every recorded score series (model kept so dashboards can filter by it)
SCORE_LABELS = "metric, service, span_name, model"
ROUTE_LABELS = "metric, service, span_name"

FILTER = 'service=~"$service", span_name=~"$route", model=~"$model"'
