"""``nexagauge.session``: the conversation (and user) of every traced call inside a block.

The ids are recorded text like any other: scrubbed (with the scrubber in use when the block is
entered) before they reach a span.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from nexagauge.sdk import config as _config
from nexagauge.sdk import conventions as C


class _Session:
    __slots__ = ("attrs", "marks", "session_id", "user_id")

    def __init__(self, session_id: str | None, user_id: str | None) -> None:
        self.session_id = session_id
        self.user_id = user_id
        attrs: dict[str, Any] = {}
        marks: list[str] = []
        scrubber = _config.STATE.scrubber
        for attribute, value in ((C.GEN_AI_CONVERSATION_ID, session_id), (C.NG_USER_ID, user_id)):
            if value is not None:
                attrs[attribute], found = scrubber.scrub(attribute, value)
                marks.extend(found or ())
        self.attrs = attrs
        self.marks = marks or None


SESSION: ContextVar[_Session | None] = ContextVar("nexagauge_session", default=None)


class session:
    """Set the conversation (and user) of every traced call inside the block.

    Works with ``with`` and ``async with``; nests (an inner block inherits the ids it does not
    set); isolated per thread and per asyncio task (contextvars).

    Example::

        with nexagauge.session(session_id="conv-42", user_id="user-7"):
            answer("hi")       # gen_ai.conversation.id = conv-42, nexagauge.user.id = user-7
    """

    __slots__ = ("_tokens", "session_id", "user_id")

    def __init__(self, session_id: str | int | None = None, user_id: str | int | None = None):
        for label, value in (("session_id", session_id), ("user_id", user_id)):
            if value is not None and not isinstance(value, (str, int)):
                raise TypeError(f"{label} must be str or int, got {type(value).__name__}")
        self.session_id = None if session_id is None else str(session_id)
        self.user_id = None if user_id is None else str(user_id)
        self._tokens: list[Token[_Session | None]] = []

    def __enter__(self) -> session:
        outer = SESSION.get()
        sid = self.session_id
        uid = self.user_id
        if outer is not None:
            sid = sid if sid is not None else outer.session_id
            uid = uid if uid is not None else outer.user_id
        self._tokens.append(SESSION.set(_Session(sid, uid)))
        return self

    def __exit__(self, *exc: object) -> None:
        SESSION.reset(self._tokens.pop())

    async def __aenter__(self) -> session:
        return self.__enter__()

    async def __aexit__(self, *exc: object) -> None:
        self.__exit__(*exc)


def current_session() -> tuple[str | None, str | None]:
    """``(session_id, user_id)`` of the innermost ``nexagauge.session`` block, or ``(None, None)``.

    Example:
        >>> with session("conv-42", user_id="user-7"):
        ...     current_session()
        ('conv-42', 'user-7')
        >>> current_session()
        (None, None)
    """
    s = SESSION.get()
    return (s.session_id, s.user_id) if s is not None else (None, None)
