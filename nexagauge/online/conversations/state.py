"""Per-conversation state of the conversation stage, and its changelog form.

:class:`ConversationState` keeps the last ``window_size`` turns of one conversation (what the next
window needs), a bounded set of recently seen turn ids (redelivery never double counts) and the
running counters. :meth:`ConversationState.to_dict` / :meth:`ConversationState.from_dict` are
the value written to the changelog topic (:mod:`nexagauge.online.delivery.changelog`) so that the state
survives restarts and rebalances.

Example:
    >>> s = ConversationState(size=2)
    >>> t = lambda i: TurnRecord("c", i, f"{i:032x}", f"{i:016x}", "q", "a", "svc", "chat")
    >>> [a.windows for a in (s.add(t(1)), s.add(t(2)), s.add(t(3)))]
    [[Window(start=0, end=0)], [Window(start=0, end=1)], [Window(start=1, end=2)]]
    >>> s.add(t(2))
    'duplicate_turn'
    >>> ConversationState.from_dict(s.to_dict()).to_dict() == s.to_dict()
    True
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, overload

from nexagauge.nodes.conversation_relevance import Window, new_windows
from nexagauge.online.conversations.turns import BadTurn, TurnRecord
from nexagauge.schema.case import Turn

DUPLICATE = "duplicate_turn"
LATE = "late_turn"
#: version of the changelog value layout (a restore skips values of another version)
STATE_VERSION = 1


class TurnTail(Sequence[Turn]):
    """The kept turns of a conversation, indexed by their position in the whole conversation.

    ``judge_windows`` numbers turns by index, so the judge sees "turn 7" for the conversation's
    7th turn even though only the last few are kept; indexes before ``base`` are gone.
    """

    def __init__(self, base: int, turns: Sequence[TurnRecord]) -> None:
        self.base = base
        self._turns = [Turn(input=t.input, output=t.output) for t in turns]

    def __len__(self) -> int:
        return self.base + len(self._turns)

    @overload
    def __getitem__(self, i: int) -> Turn: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Turn]: ...
    def __getitem__(self, i: int | slice) -> Turn | Sequence[Turn]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not self.base <= i < len(self):
            raise IndexError(f"turn {i} is not kept (kept: {self.base}..{len(self) - 1})")
        return self._turns[i - self.base]

    def __iter__(self) -> Iterator[Turn]:
        raise TypeError("iterate over range(base, len(tail)) instead: earlier turns are not kept")


@dataclass
class Added:
    """A turn accepted into a conversation: its index, the window(s) to judge, the turns they need."""

    index: int
    windows: list[Window]
    tail: TurnTail
    late: bool = False


class ConversationState:
    """Bounded state of one conversation (see module docstring).

    ``size`` is the window size W; the last W turns are kept (what the next window needs), plus
    ``memory`` recently seen turn ids for deduplication.
    """

    def __init__(self, size: int, memory: int | None = None) -> None:
        if size < 1:
            raise ValueError("window size must be >= 1")
        self.size = size
        self.turns: list[TurnRecord] = []
        self._keys: list[tuple[int, str]] = []
        self.n_turns = 0
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._memory = memory if memory is not None else max(64, 8 * size)
        self.windows = 0
        self.total = 0.0
        self.late = 0

    @property
    def base(self) -> int:
        """Index (in the whole conversation) of the oldest kept turn."""
        return self.n_turns - len(self.turns)

    @property
    def score(self) -> float | None:
        """Running score: relevant windows / windows so far (None before the first window)."""
        return self.total / self.windows if self.windows else None

    def seen(self, turn_id: str) -> bool:
        return turn_id in self._seen or any(t.turn_id == turn_id for t in self.turns)

    def add(self, turn: TurnRecord) -> Added | str:
        """Insert ``turn`` in (time, id) order; the windows it adds, or a skip reason."""
        if self.seen(turn.turn_id):
            return DUPLICATE
        key = (turn.time_ns, turn.turn_id)
        if self.turns and key < self._keys[0] and self.base > 0:
            self._remember(turn.turn_id)
            return LATE
        pos = bisect.bisect(self._keys, key)
        n_before = self.n_turns
        base = self.base
        self.turns.insert(pos, turn)
        self._keys.insert(pos, key)
        self.n_turns += 1
        self._remember(turn.turn_id)
        index = base + pos
        late = pos < len(self.turns) - 1
        if late:
            self.late += 1
            windows = [Window(max(base, index - self.size + 1), index)]
        else:
            windows = new_windows(n_before, self.n_turns, self.size)
        tail = TurnTail(base, self.turns)
        while len(self.turns) > self.size:
            self.turns.pop(0)
            self._keys.pop(0)
        return Added(index=index, windows=windows, tail=tail, late=late)

    def record(self, scores: Sequence[float]) -> float | None:
        """Count judged windows' normalized scores; returns the running score."""
        self.windows += len(scores)
        self.total += sum(scores)
        return self.score

    def _remember(self, turn_id: str) -> None:
        self._seen[turn_id] = None
        while len(self._seen) > self._memory:
            self._seen.popitem(last=False)

    # -- changelog form ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able snapshot: kept turns, seen ids, counters (the changelog value)."""
        return {
            "v": STATE_VERSION,
            "size": self.size,
            "memory": self._memory,
            "n_turns": self.n_turns,
            "turns": [asdict(t) for t in self.turns],
            "seen": list(self._seen),
            "windows": self.windows,
            "total": self.total,
            "late": self.late,
        }

    @classmethod
    def from_dict(cls, d: Any) -> ConversationState:
        """Rebuild a state from :meth:`to_dict`; ``ValueError`` names what is wrong."""
        if not isinstance(d, dict) or d.get("v") != STATE_VERSION:
            raise ValueError(f"conversation state: expected version {STATE_VERSION}")
        try:
            s = cls(int(d["size"]), int(d["memory"]))
            turns = [TurnRecord.from_dict(t) for t in d["turns"]]
            n_turns, windows = int(d["n_turns"]), int(d["windows"])
            total, late = float(d["total"]), int(d["late"])
            seen = [str(x) for x in d["seen"]]
        except (KeyError, TypeError, BadTurn) as e:
            raise ValueError(f"conversation state: {type(e).__name__}: {e}") from None
        if n_turns < len(turns) or len(turns) > s.size or windows < 0:
            raise ValueError("conversation state: inconsistent counters")
        s.turns = sorted(turns, key=lambda t: (t.time_ns, t.turn_id))
        s._keys = [(t.time_ns, t.turn_id) for t in s.turns]
        s.n_turns, s.windows, s.total, s.late = n_turns, windows, total, late
        for tid in seen:
            s._remember(tid)
        return s
