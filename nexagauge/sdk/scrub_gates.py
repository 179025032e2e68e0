"""Byte-level gates of the scrubber and its memo of texts found clean.

A rule's regular expression runs only when the text passes the rule's gates (:class:`ScrubRule`
in :mod:`nexagauge.sdk.secret_rules`); the helpers here compute those gates with C-level passes
over the UTF-8 bytes (``translate``, ``find``: memchr for one byte) and as few Python steps as
possible, since they run on every recorded text. :class:`CleanMemo` remembers texts found clean so
that a passage retrieved again is not scanned again.

Example::

    >>> may_follow_key(b"Height: 330 m", 2, key_windows([b"password"]))
    False
    >>> may_follow_key(b'"password": "x"', 2, key_windows([b"password"]))
    True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

#: ``lean(texts, plans, keyed, windows) -> 3 | 1 | 0 | -1``: the gate's common case in one pass
#: (``nexagauge/sdk/_gate.c``, an optional extension setup.py builds when a C compiler is there);
#: None without it -- the Python gate alone then, with the same verdicts (see Scrubber.gate)
lean_native: Callable[[list[str], tuple[object, ...], int, frozenset[bytes]], int] | None
try:
    from nexagauge.sdk._gate import lean as lean_native
except ImportError:  # pragma: no cover - built wherever the test suite runs
    lean_native = None

# bytes.translate table of the gates: token characters -> b"a" (the long-token gate); the bytes
# JSON escapes as two characters that plain_json_body writes (double quote, newline) -> b'"'; the
# other bytes JSON escapes (backslash, other control characters) -> b"\\" (a text without them is
# PLAIN: one memchr tells); the rest -> b" "
TOKEN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
JSON_ESCAPED = frozenset(b'"\\') | frozenset(range(0x20))
PLAIN_ESCAPED = frozenset(b'"\n')
CLASS_TABLE = bytes(
    0x61
    if i in TOKEN_CHARS
    else 0x22
    if i in PLAIN_ESCAPED
    else 0x5C
    if i in JSON_ESCAPED
    else 0x20
    for i in range(256)
)
B64_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
B64_TABLE = bytes(0x61 if i in B64_CHARS else 0x20 for i in range(256))
NON_DIGITS = bytes(i for i in range(256) if not 0x30 <= i <= 0x39)
LONG_RUN = b"a" * 16
# bit mask (1: "=", 2: ":", 4: "@") -> the separators present, in b"=:@" order
SEPS_PRESENT = tuple(bytes(c for i, c in enumerate(b"=:@") if m & (1 << i)) for m in range(8))
# the key gate looks at most at this many separators (then it lets the rules run)
MAX_KEY_SEPARATORS = 64
KEY_STRIP = b"\"'\\ \t"
# the memo of texts found clean (documents retrieved again are not scanned again): at most this
# many texts and characters in all, each text at most MEMO_MAX_TEXT characters
MEMO_TEXTS = 4096
MEMO_CHARS = 2_000_000
MEMO_MAX_TEXT = 8192
# admission of new passages (CleanMemo): after this many calls in a row with only new passages,
# one call in ADMIT_SAMPLE has its passages remembered
MISS_STREAK = 64
ADMIT_SAMPLE = 8


def plain_json_body(text: str) -> str:
    """The JSON string of a text the gate found :data:`PLAIN`, without its quotes: newlines and
    double quotes escaped (valid only for such texts). Each ``replace`` is guarded by ``in`` (memchr):
    a ``replace`` whose replacement is longer counts the matches first, a slow byte loop that
    costs ~10x the memchr on a text without any."""
    if '"' in text:
        text = text.replace('"', '\\"')
    if "\n" in text:
        text = text.replace("\n", "\\n")
    return text


def key_ends(raw: bytes, tails: frozenset[bytes], keys: tuple[bytes, ...]) -> list[int] | None:
    """Offsets in ``raw`` where a text ending (case-insensitively) with one of ``keys`` meets a
    ``=`` / ``:`` (quotes and blanks in between skipped); None when there are too many separators
    to look at each. ``tails``: the last 3 characters of each key in every letter case, a cheap
    first check (one 3-byte slice per separator, no lowercasing, no copy of the text)."""
    ends: list[int] = []
    seen = 0
    find = raw.find
    for sep in b"=:":
        i = find(sep)  # memchr
        while i >= 0:
            seen += 1
            if seen > MAX_KEY_SEPARATORS:
                return None
            j = i
            while j > 0 and raw[j - 1] in KEY_STRIP:
                j -= 1
            if raw[j - 3 : j] in tails and raw[max(0, j - 16) : j].lower().endswith(keys):
                ends.append(j)
            i = find(sep, i + 1)
    return ends


def may_follow_key(raw: bytes, mask: int, windows: frozenset[bytes]) -> bool:
    """False when no ``=`` / ``:`` of ``raw`` can follow a key; True when one may, or when there
    are too many separators to look at each. ``mask``: bit 0 set when ``=`` occurs, bit 1 when
    ``:`` does. ``windows``: every 3 bytes that can directly precede a separator after a key
    (:func:`key_windows`).

    The common case of :func:`key_ends` for one 3-byte slice per separator (found by memchr);
    the offsets are computed only when this is True.
    """
    find = raw.find
    budget = MAX_KEY_SEPARATORS
    for bit, sep in ((1, 0x3D), (2, 0x3A)):  # "=", ":"
        if mask & bit:
            i = find(sep)
            while i >= 0:
                budget -= 1
                if budget < 0 or raw[i - 3 : i] in windows:
                    return True
                i = find(sep, i + 1)
    return False


def key_windows(keys: Iterable[bytes]) -> frozenset[bytes]:
    """The 3 bytes before a separator that follows one of ``keys`` (any letter case): the key's
    last 3 characters, or its last 2, 1, 0 followed by 1, 2, 3 of the characters skipped between
    a key and its separator (quotes, backslash, blanks)."""
    out: set[bytes] = set()
    strips = [bytes([c]) for c in KEY_STRIP]
    pads = {
        0: [b""],
        1: strips,
        2: [a + b for a in strips for b in strips],
        3: [a + b + c for a in strips for b in strips for c in strips],
    }
    for key in keys:
        for pad in range(4):
            for head in all_cases(key[len(key) - 3 + pad :] if pad < 3 else b""):
                out.update(head + p for p in pads[pad])
    return frozenset(out)


def all_cases(tail: bytes) -> set[bytes]:
    """``tail`` in every combination of letter case (``key`` -> ``key``, ``Key``, ``kEY``...)."""
    out = {b""}
    for c in tail:
        ch = bytes([c])
        out = {p + v for p in out for v in {ch.lower(), ch.upper()}}
    return out


def long_runs(raw: bytes, classes: bytes) -> list[tuple[int, bytes]]:
    """``(start, run)`` of each run of 16+ token characters (``classes``: raw via CLASS_TABLE)."""
    runs: list[tuple[int, bytes]] = []
    i = classes.find(LONG_RUN)
    while i >= 0:  # i starts a run: the run before it, if any, ended at a non-token byte
        # the run ends at the first byte of another class (blank, quote/newline, other escaped)
        end = len(classes)
        for other in (b" ", b'"', b"\\"):
            j = classes.find(other, i, end)
            if j >= 0:
                end = j
        runs.append((i, raw[i:end]))
        i = classes.find(LONG_RUN, end)
    return runs


def may_start(run: bytes, starts: tuple[bytes, ...]) -> bool:
    """True when one of ``starts`` begins the long token ``run`` or follows a ``-`` in it: the
    only places a pattern beginning with ``\\b`` can match inside a token (``-`` is its only
    non-word character).

    Example::

        >>> may_start(b"call_8f3kq1c0ffee42", (b"sk-",))
        False
        >>> may_start(b"x-sk-proj-abcdefghijklmnop", (b"sk-",))
        True
    """
    if run.startswith(starts):
        return True
    i = run.find(b"-")  # memchr
    while i >= 0:
        if run.startswith(starts, i + 1):
            return True
        i = run.find(b"-", i + 1)
    return False


class CleanMemo:
    """Texts a scrubber found clean, so that a passage retrieved again is not scanned again, each
    with its JSON string body once a recorder has written it (:meth:`body`), so that it is not
    escaped again either.

    Two generations of plain dicts: texts are added to the young one; when it holds half the
    budget (:data:`MEMO_TEXTS` texts or :data:`MEMO_CHARS` characters) it becomes the old one and
    the previous old one is dropped whole. A text seen in either is known. Why not an LRU: when
    every call brings new passages (nothing to gain from the memo) an ordered dict's insert and
    evict per text cost more than the scan the memo saves; a dict insert costs a hash the lookup
    already computed. A text stays known while at least half the budget of newer texts is
    added; a hit does not refresh it, so a passage retrieved on every call is scanned again once
    per two generations (then remembered again).

    Admission: after :data:`MISS_STREAK` calls in a row whose passages were all new (an app whose
    passages never repeat: the memo cannot pay off), a call's new passages are remembered on one
    call in :data:`ADMIT_SAMPLE` only; a passage retrieved again is still remembered within
    ``ADMIT_SAMPLE`` retrievals, and the first call with a known passage ends the streak. The
    inserts cost ~1 us per call of three new passages, measured in place (bench/sdk_overhead.py).

    Example::

        >>> memo = CleanMemo()
        >>> memo.add(["Paris is the capital of France."])
        >>> "Paris is the capital of France." in memo, len(memo)
        (True, 1)
    """

    __slots__ = ("_chars", "_streak", "old", "young")

    def __init__(self) -> None:
        #: text -> its JSON string body without quotes (None until a recorder wrote it)
        self.young: dict[str, str | None] = {}
        self.old: dict[str, str | None] = {}
        self._chars = 0  # characters in ``young``
        self._streak = 0  # calls in a row whose passages were all new (see admission)

    def __contains__(self, text: object) -> bool:
        return text in self.young or text in self.old

    def __len__(self) -> int:
        return len(self.young.keys() | self.old.keys())

    def __iter__(self) -> Iterator[str]:
        yield from self.young
        yield from self.old.keys() - self.young.keys()

    def body(self, text: str) -> str | None:
        """The JSON string body (no quotes) kept with ``text``; None when not known or not kept."""
        body = self.young.get(text)
        return self.old.get(text) if body is None else body

    def add(
        self,
        texts: Sequence[str],
        bodies: Sequence[str | None] | None = None,
        *,
        all_new: bool = False,
    ) -> None:
        """Remember ``texts`` (found clean), with their JSON string bodies when given; texts
        longer than :data:`MEMO_MAX_TEXT` are not kept. ``all_new``: the call's passages were all
        new (none known): counts towards the admission streak (class docstring).

        A call's passages are added in one ``dict.update`` when they are short and all have
        bodies (the recorder's case, on every call with new passages: the per-text loop cost
        ~0.25 us per passage); the young generation is swapped first when the batch would not
        fit in half the budget, so the bounds hold as with one text at a time."""
        if all_new:
            streak = self._streak = self._streak + 1
            if streak >= MISS_STREAK and streak % ADMIT_SAMPLE:
                return
        else:
            self._streak = 0
        young = self.young
        size = sum(map(len, texts))
        if (
            size <= MEMO_MAX_TEXT  # so is every text
            and bodies is not None
            and None not in bodies
            and len(texts) <= MEMO_TEXTS // 2
        ):
            if len(young) + len(texts) > MEMO_TEXTS // 2 or self._chars + size > MEMO_CHARS // 2:
                self.old = young  # the previous old generation is dropped whole
                young = self.young = {}
                self._chars = 0
            young.update(zip(texts, bodies, strict=True))
            self._chars += size
            return
        chars = self._chars
        for text, body in (
            zip(texts, bodies, strict=True) if bodies is not None else ((t, None) for t in texts)
        ):
            size = len(text)
            if size > MEMO_MAX_TEXT:
                continue
            if len(young) >= MEMO_TEXTS // 2 or chars + size > MEMO_CHARS // 2:
                self.old = young  # the previous old generation is dropped whole
                young = self.young = {}
                chars = 0
            if body is not None or text not in young:
                young[text] = body
            chars += size
        self._chars = chars
