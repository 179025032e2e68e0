"""Scrubbing of offline datasets (``nexagauge run`` / ``estimate``): ``run.scrub`` / ``run.scrub_pii``.

A dataset exported from production holds whatever users typed and tools returned; ``run`` sends
its cases to the same judges as ``serve``. Each record is parsed and its case scrubbed
(:class:`~nexagauge.schema.scrub.CaseScrubber`) before the graph sees it, so no judge request,
cache key, case file or report carries a secret (or, with ``scrub_pii``, a personal value); the
reason of a record that could not be parsed (a validation message may echo the bad value) is
scrubbed too, and so are log lines. At start one line says what is scrubbed and where case text
goes.

Example::

    >>> from nexagauge.settings import Settings
    >>> rs = RunScrub(Settings())
    >>> [(i, c.input) for i, c in rs.records([(0, {"input": "key sk-abcdefghijklmnop1234",
    ...                                            "output": "ok"})], {}, None)]
    [(0, 'key [scrubbed:api_key#1]')]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nexagauge.schema.case import EvalCase, RecordError, parse_record
from nexagauge.schema.scrub import CaseScrubber

log = logging.getLogger("nexagauge.cli.run")


class RunScrub:
    """The scrubbing of one offline command (see module docstring)."""

    def __init__(self, settings: Any) -> None:
        r = settings.run
        self.scrubber = CaseScrubber(secrets=r.scrub, pii=r.scrub_pii)

    def announce(self, settings: Any, judge_kind: str | None, command: str = "run") -> None:
        """Log the start line (what is scrubbed, where case text goes) and make log lines lose
        personal data when ``run.scrub_pii`` is on."""
        from nexagauge.judge.destination import scrub_notice
        from nexagauge.online.delivery.redact import configure_redaction

        configure_redaction(pii=self.scrubber.pii)
        s = self.scrubber
        notice = scrub_notice(settings, judge_kind, secrets=s.secrets, pii=s.pii)
        log.warning("nexagauge %s: %s", command, notice)

    def case(self, case: EvalCase) -> EvalCase:
        """``case`` scrubbed."""
        return self.scrubber.scrub(case)

    def error(self, e: RecordError) -> RecordError:
        """``e`` with its message scrubbed (a validation message may echo the value it rejects)."""
        if not self.scrubber.active:
            return e
        reason = self.scrubber.scrub_text(e.reason)
        return e if reason == e.reason else RecordError(e.index, e.field, reason, e.case_id)

    def records(
        self,
        reader: Iterable[tuple[int, Any]],
        field_map: Mapping[str, str],
        rubrics: Any,
    ) -> Iterator[tuple[int, Any]]:
        """``(index, scrubbed case)`` per record of ``reader``, or ``(index, error)`` as
        :meth:`nexagauge.graph.executor.Executor.run_records` takes them."""
        for index, raw in reader:
            if isinstance(raw, RecordError):
                yield index, self.error(raw)
                continue
            if isinstance(raw, Exception | EvalCase):
                yield index, raw if isinstance(raw, Exception) else self.case(raw)
                continue
            try:
                case = parse_record(raw, index, field_map, rubrics=rubrics)
            except RecordError as e:
                yield index, self.error(e)
                continue
            except Exception as e:  # a record parse_record did not foresee: still only this one
                log.exception("record %d could not be parsed", index)
                why = self.scrubber.scrub_text(f"cannot be read: {type(e).__name__}: {e}")
                yield index, ValueError(why)
                continue
            yield index, self.case(case)
