"""The single-file HTML report of an offline run (``nexagauge run --report``, ``nexagauge report``).

Modules, one job each: :mod:`~nexagauge.report.record` (the question/answer block ``run`` writes
into each case file), :mod:`~nexagauge.report.redact` (the scrubbing of everything embedded),
:mod:`~nexagauge.report.model` and :mod:`~nexagauge.report.load` (a results directory as
dataclasses), :mod:`~nexagauge.report.agent` (a case's tool calls, agent signals and task
completion), :mod:`~nexagauge.report.excerpt` (the passage of a claim's source),
:mod:`~nexagauge.report.compare` (against a baseline run),
:mod:`~nexagauge.report.charts` (score distributions as SVG geometry) and
:mod:`~nexagauge.report.render` (the Jinja2 template, inline CSS/JS, Content-Security-Policy).
This package module imports nothing, so ``run`` can write case files without loading Jinja2.

Example::

    from nexagauge.report.render import write_report
    write_report("nexagauge-out", "nexagauge-out/report.html", baseline="previous-out")
"""
