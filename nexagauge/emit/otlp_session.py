"""The ``requests`` session of the OTLP/HTTP exporters (evaluation spans, result records).

Each export is one POST on the exporter's thread; ``requests`` spends a fifth of its CPU
re-reading the environment (proxy variables, CA bundle) for every one of them.
:class:`EnvOnceSession` reads it once per URL. Imported only when an exporter speaks HTTP.

Example:
    >>> type(http_session("/v1/traces")).__name__
    'EnvOnceSession'
"""

from __future__ import annotations

import os
from typing import Any

import requests

#: OTLP HTTP path -> the signal's name in OpenTelemetry's credential-provider variables
_SIGNALS = {"/v1/traces": "TRACES", "/v1/logs": "LOGS"}


class EnvOnceSession(requests.Session):
    """A ``requests.Session`` that reads the environment once per URL, not on every request.

    ``requests`` looks up the proxy variables (``HTTP(S)_PROXY``, ``NO_PROXY``, with a
    ``NO_PROXY`` host match) and the CA bundle (``REQUESTS_CA_BUNDLE``, ``CURL_CA_BUNDLE``) on
    every request: ~0.12 ms of an OTLP POST's ~0.5 ms of CPU on the export thread. An exporter
    posts to one URL for its whole life, so the answer for a URL is kept: proxies and the CA
    bundle from the environment are honoured exactly as before, as they were when the URL was
    first posted to (a per-request ``proxies`` argument is merged afresh every time).

    Example:
        >>> s = EnvOnceSession()
        >>> a = s.merge_environment_settings("http://h:4318/v1/logs", {}, None, None, None)
        >>> a == s.merge_environment_settings("http://h:4318/v1/logs", {}, None, None, None)
        True
    """

    def __init__(self) -> None:
        super().__init__()
        self._env_settings: dict[tuple[Any, ...], dict[str, Any]] = {}

    def merge_environment_settings(
        self, url: Any, proxies: Any, stream: Any, verify: Any, cert: Any
    ) -> dict[str, Any]:
        if proxies:
            return super().merge_environment_settings(url, proxies, stream, verify, cert)
        key = (url, stream, verify, cert if not isinstance(cert, list) else tuple(cert))
        got = self._env_settings.get(key)
        if got is None:
            got = super().merge_environment_settings(url, proxies, stream, verify, cert)
            if len(self._env_settings) < 16:  # one or two URLs in practice: a bound anyway
                self._env_settings[key] = got
        return {**got, "proxies": dict(got["proxies"])}  # requests may add to its copy


def http_session(http_path: str) -> requests.Session | None:
    """The session of an HTTP exporter: :class:`EnvOnceSession`, unless the environment names
    an OpenTelemetry credential provider (its session then, as the exporter would pick)."""
    signal = _SIGNALS[http_path]
    for name in (
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
        f"OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal}_CREDENTIAL_PROVIDER",
    ):
        if os.environ.get(name):
            return None
    return EnvOnceSession()
