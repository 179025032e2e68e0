"""Dataset input: streaming readers for JSON arrays, JSON Lines and CSV (see :mod:`.readers`)."""

from nexagauge.io.readers import FORMATS, RecordReader, detect_format, iter_records

__all__ = ["FORMATS", "RecordReader", "detect_format", "iter_records"]
