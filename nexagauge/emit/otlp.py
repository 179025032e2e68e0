"""The OTLP exporter arguments shared by the evaluation span and result event exporters.

Example:
    >>> from types import SimpleNamespace
    >>> otlp_args(SimpleNamespace(otlp_endpoint="collector:4318", otlp_protocol="http"), "/v1/logs")
    (False, 'http://collector:4318/v1/logs', {})
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


def otlp_args(emit: Any, http_path: str) -> tuple[bool, str | None, dict[str, Any]]:
    """``(grpc?, endpoint, kwargs)`` for an OTLP exporter from ``EmitSettings``.

    ``otlp_endpoint=None`` leaves the endpoint to the standard ``OTEL_EXPORTER_OTLP_*``
    variables; an HTTP base URL gets ``http_path`` (``/v1/traces``, ``/v1/logs``).
    """
    endpoint: str | None = getattr(emit, "otlp_endpoint", None)
    grpc = getattr(emit, "otlp_protocol", "grpc") == "grpc"
    insecure = getattr(emit, "otlp_insecure", None)
    timeout = getattr(emit, "otlp_timeout_s", None)
    kwargs: dict[str, Any] = {}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if grpc:
        if insecure is not None:
            kwargs["insecure"] = insecure
    elif endpoint is not None:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        if parts.path in ("", "/"):
            endpoint = parts._replace(path=http_path).geturl()
    return grpc, endpoint, kwargs
