"""Version of the SDK written on every span (``nexagauge.sdk.version``)."""

from __future__ import annotations


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("nexagauge")
    except Exception:  # not installed (source checkout on sys.path)
        return "0.0.0+unknown"


SDK_VERSION: str = _version()
