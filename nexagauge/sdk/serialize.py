"""Turn any Python value into JSON-compatible data or text, without ever raising.

What the SDK records comes from user code: pydantic models, dataclasses, numpy values, bytes, sets,
objects with broken ``__repr__``, self-referencing containers. :func:`to_text` must return a string
for every one of them, because a serialization error must never reach the traced call. Unknown types
fall back to a bounded, guarded ``repr``. No third-party module is imported here: pydantic, numpy and
attrs are recognised by duck typing, so importing the SDK stays light.

Example::

    >>> to_text({"q": "hi", "tags": {"b"}, "raw": b"ok"})
    '{"q":"hi","tags":["b"],"raw":"ok"}'
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import datetime as _dt
import enum
import ipaddress
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any

MAX_DEPTH = 24
MAX_ITEMS = 1000
MAX_REPR = 2000
MAX_BYTES = 64 * 1024

_IP_TYPES = (
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
    ipaddress.IPv4Interface,
    ipaddress.IPv6Interface,
)

CIRCULAR = "<circular reference>"
DEPTH = "<max depth reached>"

#: a dict key whose value is a secret: a secret word anywhere in the key (case-insensitive), or a
#: short one (pass, pin, pwd, token, sig) as the whole key or its last part (``db_pass``,
#: ``dbPin``, ``id_token``; not ``max_tokens``, ``bypass``)
SENSITIVE_KEY = re.compile(
    r"passw|pwd|secret|api[._ -]?key|apikey|access[._ -]?token|auth[._ -]?token|refresh[._ -]?token"
    r"|auth(?!or(?!i[sz]ation))|private[._ -]?key|access[._ -]?key|account[._ -]?key|credential"
    r"|cookie|session[._ -]?key|x-api-key|bearer|csrf|xsrf|jwt|passphrase"
    r"|(?:^|[._ -])(?:pass|pin|token|sig|signature)$|(?-i:[a-z](?:Pass|Pin|Token)$)",
    re.IGNORECASE,
)

_encode_str = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_encode_ascii = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode


def safe_repr(value: Any, limit: int = MAX_REPR) -> str:
    """``repr(value)`` that never raises and is at most ``limit`` characters (plus a marker)."""
    try:
        text = repr(value)
    except Exception:
        try:
            return f"<unrepresentable {type(value).__qualname__} object>"
        except Exception:
            return "<unrepresentable object>"
    if not isinstance(text, str):  # a broken __repr__ returning a non-str is caught by repr()
        return "<unrepresentable object>"
    if len(text) > limit:
        return text[:limit] + f"...<repr truncated, {len(text)} chars>"
    return text


class _Encoder:
    """One conversion pass; tracks the containers on the current path to break cycles."""

    __slots__ = ("active", "on_sensitive_key", "scrub_keys")

    def __init__(self, scrub_keys: bool, on_sensitive_key: Callable[[], None] | None) -> None:
        self.active: set[int] = set()
        self.scrub_keys = scrub_keys
        self.on_sensitive_key = on_sensitive_key

    def convert(self, value: Any, depth: int) -> Any:
        cls = type(value)
        if cls is str or cls is int or cls is bool or value is None:
            return value
        if cls is float:
            return value if math.isfinite(value) else repr(value)
        if isinstance(value, enum.Enum):  # before str/int: IntEnum/StrEnum are ints/strs too
            return self.convert(value.value, depth + 1) if depth < MAX_DEPTH else DEPTH
        if isinstance(value, str):
            return str.__str__(value)
        if isinstance(value, int):  # bool subclasses were handled above via cls is bool
            return int.__index__(value) if not isinstance(value, bool) else bool(value)
        if isinstance(value, float):
            f = float.__float__(value)
            return f if math.isfinite(f) else repr(f)
        if depth >= MAX_DEPTH:
            return DEPTH
        if isinstance(value, (bytes, bytearray, memoryview)):
            return _bytes(value)
        if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
            return value.isoformat()
        if isinstance(value, _dt.timedelta):
            return value.total_seconds()
        if isinstance(value, (Decimal, uuid.UUID, PurePath, complex, _IP_TYPES)):
            return str(value)
        if isinstance(value, re.Pattern):
            return value.pattern if isinstance(value.pattern, str) else _bytes(value.pattern)
        if isinstance(value, BaseException):
            return {"type": type(value).__qualname__, "message": safe_repr(str(value))}
        ident = id(value)
        if ident in self.active:
            return CIRCULAR
        self.active.add(ident)
        try:
            return self._container(value, depth)
        except RecursionError:
            return DEPTH
        except Exception:  # a container whose iteration/attributes raise: only it degrades
            return safe_repr(value)
        finally:
            self.active.discard(ident)

    def _container(self, value: Any, depth: int) -> Any:
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for i, (k, v) in enumerate(value.items()):
                if i >= MAX_ITEMS:
                    out["..."] = f"{len(value) - MAX_ITEMS} more items"
                    break
                key = k if isinstance(k, str) else _key(k)
                if self.scrub_keys and SENSITIVE_KEY.search(key) and v is not None:
                    out[key] = "[scrubbed:sensitive_key]"
                    if self.on_sensitive_key is not None:
                        self.on_sensitive_key()
                else:
                    out[key] = self.convert(v, depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            items = [self.convert(v, depth + 1) for v in value[:MAX_ITEMS]]
            if len(value) > MAX_ITEMS:
                items.append(f"...{len(value) - MAX_ITEMS} more items")
            return items
        if isinstance(value, (set, frozenset)):
            items = [self.convert(v, depth + 1) for v in value]
            with contextlib.suppress(Exception):  # ordering is cosmetic (stable output)
                items.sort(key=lambda x: (type(x).__name__, str(x)))
            return items[:MAX_ITEMS]
        cls = type(value)
        # pydantic v2 / v1 (duck-typed: no import)
        dump = getattr(cls, "model_dump", None)
        if dump is not None and callable(dump) and not isinstance(value, type):
            try:
                return self.convert(value.model_dump(mode="json"), depth + 1)
            except Exception:
                try:
                    return self.convert(value.model_dump(), depth + 1)
                except Exception:
                    return safe_repr(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields: dict[str, Any] = {}
            for f in dataclasses.fields(value):
                try:
                    fields[f.name] = getattr(value, f.name)
                except Exception:
                    fields[f.name] = "<unreadable>"
            return self._container(fields, depth)
        module = getattr(cls, "__module__", "") or ""
        if module.startswith("numpy"):
            return self._numpy(value, depth)
        if module.startswith("pandas"):
            return self._pandas(value, depth)
        if getattr(cls, "__attrs_attrs__", None) is not None:
            try:
                attrs = {a.name: getattr(value, a.name) for a in cls.__attrs_attrs__}
                return self._container(attrs, depth)
            except Exception:
                return safe_repr(value)
        pdict = getattr(cls, "dict", None)  # pydantic v1
        if pdict is not None and getattr(cls, "__fields__", None) is not None:
            try:
                return self.convert(value.dict(), depth + 1)
            except Exception:
                return safe_repr(value)
        return safe_repr(value)

    def _pandas(self, value: Any, depth: int) -> Any:
        """DataFrame -> first rows as records, Series -> list; bounded (never the whole frame)."""
        try:
            head = value.head(MAX_ITEMS // 10) if len(value) > MAX_ITEMS // 10 else value
            is_frame = hasattr(value, "columns")
            data = head.to_dict(orient="records") if is_frame else head.tolist()
            if len(value) > len(head):
                data.append(f"...{len(value) - len(head)} more rows")
            return self.convert(data, depth + 1)
        except Exception:
            return safe_repr(value)

    def _numpy(self, value: Any, depth: int) -> Any:
        try:
            size = int(getattr(value, "size", 1))
            if size > MAX_ITEMS:
                shape = getattr(value, "shape", "?")
                return f"<numpy array shape={shape} dtype={getattr(value, 'dtype', '?')}>"
            tolist = getattr(value, "tolist", None)
            if tolist is not None:
                return self.convert(tolist(), depth + 1)
        except Exception:
            pass
        return safe_repr(value)


def _key(k: Any) -> str:
    if isinstance(k, (int, float, bool)) or k is None:
        return json.dumps(k)
    if isinstance(k, enum.Enum):
        return str(k.value)
    return safe_repr(k, 200)


def _bytes(value: bytes | bytearray | memoryview) -> str:
    raw = bytes(value[:MAX_BYTES])
    suffix = f"...<{len(value)} bytes>" if len(value) > MAX_BYTES else ""
    try:
        return raw.decode("utf-8") + suffix
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode("ascii") + suffix


def to_jsonable(
    value: Any,
    *,
    scrub_keys: bool = False,
    on_sensitive_key: Callable[[], None] | None = None,
) -> Any:
    """Convert ``value`` to data ``json.dumps`` accepts; never raises.

    ``scrub_keys`` replaces the values of secret-looking mapping keys (``password``, ``api_key``...)
    and calls ``on_sensitive_key`` for each one replaced.

    Example::

        >>> to_jsonable({1: {2, 3}, "when": __import__("datetime").date(2024, 1, 2)})
        {'1': [2, 3], 'when': '2024-01-02'}
    """
    try:
        return _Encoder(scrub_keys, on_sensitive_key).convert(value, 0)
    except Exception:  # RecursionError, a __eq__/__hash__ raising inside a Mapping, ...
        return safe_repr(value)


def dumps(value: Any, *, utf8_checked: bool = False) -> str:
    """Compact JSON of data already made JSON-compatible (non-ASCII kept); never raises.

    The result is always encodable as UTF-8 (lone surrogates are escaped), so an OTLP exporter
    cannot fail on it. ``utf8_checked``: the caller already encoded every string of ``value`` to
    UTF-8 (the SDK's secret gate does), so that check is skipped.
    """
    try:
        text = _encode_str(value)
    except Exception:
        text = json.dumps(safe_repr(value), ensure_ascii=False)
        utf8_checked = False
    if utf8_checked:
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _encode_ascii(value) if text.startswith(("{", "[", '"')) else json.dumps(text)
    return text


def to_text(
    value: Any,
    *,
    scrub_keys: bool = False,
    on_sensitive_key: Callable[[], None] | None = None,
) -> str:
    """A string for any value: ``str`` as is, bytes decoded, anything else as compact JSON.

    Example::

        >>> to_text("hello")
        'hello'
        >>> to_text([1, b"\\xff"])
        '[1,"base64:/w=="]'
    """
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes(value)
    return dumps(to_jsonable(value, scrub_keys=scrub_keys, on_sensitive_key=on_sensitive_key))
