"""Internal-failure policy of the SDK: log once, swallow, never break the app.

Every code path of the SDK that runs inside the user's call is guarded; when it fails, the failure is
handed to :func:`internal_error`, which logs it once per site and returns, so the user's function
runs and returns exactly as if the SDK was absent. Under the test suite (``NEXAGAUGE_SDK_STRICT=1``,
set by ``tests/sdk/conftest.py``) the failure is re-raised instead, so SDK bugs cannot hide.

Example::

    try:
        risky_sdk_step()
    except Exception as exc:
        internal_error("finish span", exc)
"""

from __future__ import annotations

import logging
import os
import threading

logger = logging.getLogger("nexagauge.sdk")

STRICT_ENV = "NEXAGAUGE_SDK_STRICT"

_logged: set[tuple[str, str]] = set()
_lock = threading.Lock()
_strict_override: bool | None = None


def set_strict(value: bool | None) -> None:
    """Force strict mode on/off (``None``: follow ``NEXAGAUGE_SDK_STRICT``)."""
    global _strict_override
    _strict_override = value


def is_strict() -> bool:
    """True when internal failures must be re-raised (tests), read at failure time (rare path)."""
    if _strict_override is not None:
        return _strict_override
    return os.environ.get(STRICT_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


class SDKInternalError(RuntimeError):
    """Raised only in strict mode: an SDK code path failed (the cause is chained)."""


def internal_error(site: str, exc: BaseException) -> None:
    """Handle a failure inside the SDK at ``site``: log once per (site, type), or raise if strict."""
    if is_strict():
        raise SDKInternalError(f"nexagauge SDK internal failure in {site}: {exc!r}") from exc
    key = (site, type(exc).__name__)
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    logger.warning(
        "nexagauge SDK: internal failure in %s (%r); the traced call is unaffected and this "
        "message is logged once",
        site,
        exc,
        exc_info=exc,
    )


def warn_once(site: str, message: str) -> None:
    """Log a usage warning once per site (never raises, even in strict mode)."""
    key = (site, "warning")
    with _lock:
        if key in _logged:
            return
        _logged.add(key)
    logger.warning("nexagauge SDK: %s", message)


def reset_logged() -> None:
    """Forget which failures were logged (tests)."""
    with _lock:
        _logged.clear()
