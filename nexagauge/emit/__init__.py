"""Where scores go: evaluation spans (OTLP) and Prometheus metrics. See ``docs/emit.md``.

* :mod:`~nexagauge.emit.target` - :class:`EvaluationTarget` (the evaluated span) and
  :func:`config_fingerprint`;
* :mod:`~nexagauge.emit.emitter` - :class:`Emitter`: ``await emit(target, case_result)``;
* :mod:`~nexagauge.emit.prometheus` - :class:`EvaluatorMetrics` (every series of
  :mod:`~nexagauge.emit.metric_names`, bounded labels, exemplars);
* :mod:`~nexagauge.emit.spans` - :class:`EvaluationSpanWriter` (child span per evaluated span);
* :mod:`~nexagauge.emit.events` - ``gen_ai.evaluation.result`` log events in the evaluated
  span's context;
* :mod:`~nexagauge.emit.attributes` - the ``gen_ai.evaluation.result`` attributes (one builder
  for log events and span events); :mod:`~nexagauge.emit.otlp` - what both writers share
  (exporters, resource, parent context, export counting, lifecycle);
* :mod:`~nexagauge.emit.labels` / :mod:`~nexagauge.emit.zero` - bounded label values, and known
  label sets created at zero (no "No data" panels);
* :mod:`~nexagauge.emit.http` - ``/metrics``, ``/healthz``, ``/readyz``;
* :mod:`~nexagauge.emit.dedupe` / :mod:`~nexagauge.emit.view` - idempotency and result flattening.

Import the submodules directly; this package imports nothing so that
``from nexagauge.emit.target import EvaluationTarget`` stays light.
"""
