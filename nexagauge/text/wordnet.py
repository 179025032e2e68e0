"""Optional WordNet synonyms for METEOR, from locally installed WordNet 3.0 files.

NLTK's METEOR matches words in three stages: exact, Porter stem, WordNet synonym. The synonym
stage needs the WordNet database, and ``nltk.download`` does not work offline. We therefore look
for an installed WordNet database, in this order:

1. ``$WNSEARCHDIR`` (WordNet's own variable), then ``$WNHOME/dict``;
2. Debian/Ubuntu's ``wordnet-base`` package: ``/usr/share/wordnet``;
3. the upstream install location ``/usr/local/WordNet-3.0/dict``;
4. NLTK's own ``corpora/wordnet`` if it is already in an ``nltk.data.path`` directory (found by
   ``nltk.data.find``, which never downloads).

System databases are read with NLTK's ``WordNetCorpusReader`` with two adaptations:
``wordnet-base`` ships no ``lexnames`` file (the list of the 45 lexicographer files, documented in
``lexnames(5WN)``), so the WordNet 3.0 list is supplied from :data:`LEXNAMES_30`; and the
reader's mapping to NLTK's own ``wordnet`` corpus (only used for multilingual data) is disabled.
NLTK (>= 3.9) confines file access to its data roots, so the database directory is appended to
``nltk.data.path``.

When no database is found, :func:`load_synonyms` returns :data:`NO_SYNONYMS`, a source with no
synonyms: METEOR then runs with exact + stem matching only, and says so.

The loaded reader is shared by threads; NLTK's reader seeks in shared file handles, so every
lookup holds a lock (and results are memoized per word).

Example:
    >>> NO_SYNONYMS.synsets("quick")
    []
"""

from __future__ import annotations

import io
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Protocol

log = logging.getLogger(__name__)

#: The WordNet 3.0 lexicographer files (number = position), as listed in lexnames(5WN).
LEXNAMES_30: tuple[str, ...] = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather",
    "adj.ppl",
)  # fmt: skip
_LEX_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
#: Files a WordNet database directory must hold to be used.
REQUIRED_FILES = (
    "index.noun", "index.verb", "index.adj", "index.adv",
    "data.noun", "data.verb", "data.adj", "data.adv",
)  # fmt: skip


def lexnames_text() -> str:
    """The WordNet 3.0 ``lexnames`` file content (``NN<TAB>name<TAB>category`` per line)."""
    return "".join(
        f"{i:02d}\t{name}\t{_LEX_CATEGORY[name.split('.')[0]]}\n"
        for i, name in enumerate(LEXNAMES_30)
    )


class SynonymSource(Protocol):
    """What NLTK's METEOR needs from WordNet: ``synsets(word)`` whose ``lemmas()`` have ``name()``."""

    def synsets(self, word: str) -> list[Any]: ...


class _NoSynonyms:
    """A synonym source without synonyms: METEOR degrades to exact + stem matching."""

    def synsets(self, word: str) -> list[Any]:
        return []

    def __repr__(self) -> str:
        return "NO_SYNONYMS"


NO_SYNONYMS: SynonymSource = _NoSynonyms()


@dataclass(frozen=True)
class WordNetInfo:
    """Which synonym data METEOR used: ``variant`` is ``"wordnet"`` or ``"exact+stem"``."""

    variant: str
    source: str | None = None  # database directory (or "nltk:<path>")
    version: str | None = None
    error: str | None = None


class LockedWordNet:
    """A thread-safe, memoizing wrapper of an NLTK WordNet reader (``synsets`` only)."""

    def __init__(self, reader: Any, info: WordNetInfo):
        self._reader = reader
        self._lock = threading.Lock()
        self.info = info
        self._synsets = lru_cache(maxsize=65536)(self._lookup)

    def _lookup(self, word: str) -> tuple[Any, ...]:
        with self._lock:
            syns = tuple(self._reader.synsets(word))
            for s in syns:  # materialize lemmas while holding the lock
                s.lemmas()
            return syns

    def synsets(self, word: str) -> list[Any]:
        return list(self._synsets(word))

    def synonyms(self, word: str) -> set[str]:
        """Single-word lemma names of every synset of ``word`` (what METEOR matches on)."""
        return {
            lemma.name()
            for s in self.synsets(word)
            for lemma in s.lemmas()
            if "_" not in lemma.name()
        }


def candidate_dirs() -> list[Path]:
    """Directories searched for a WordNet database, in order (see module docstring)."""
    out: list[Path] = []
    if os.environ.get("WNSEARCHDIR"):
        out.append(Path(os.environ["WNSEARCHDIR"]))
    if os.environ.get("WNHOME"):
        out.append(Path(os.environ["WNHOME"]) / "dict")
    out += [Path("/usr/share/wordnet"), Path("/usr/local/WordNet-3.0/dict")]
    return out


def is_database(path: Path) -> bool:
    """Whether ``path`` holds a WordNet database (index and data files of all four POS)."""
    return path.is_dir() and all((path / f).is_file() for f in REQUIRED_FILES)


def locate() -> str | None:
    """Where WordNet would be loaded from, without loading it (cheap; for cache keys).

    Returns a directory, ``"nltk:<path>"`` for NLTK's own corpus, or ``None``.
    """
    for d in candidate_dirs():
        if is_database(d):
            return str(d)
    try:
        import nltk.data

        return "nltk:" + str(nltk.data.find("corpora/wordnet"))
    except (LookupError, ImportError, OSError, ValueError):
        return None


def _system_reader(root: Path) -> Any:
    import nltk.data
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    has_lexnames = (root / "lexnames").is_file()

    class SystemWordNetReader(WordNetCorpusReader):
        def open(self, file: str) -> IO[str]:
            if file == "lexnames" and not has_lexnames:
                return io.StringIO(lexnames_text())
            return super().open(file)

        def map_wn(self, version: str = "wordnet") -> Any:
            return None  # only used to map NLTK's multilingual (OMW) data; not needed here

    resolved = str(root.resolve())
    if resolved not in [str(p) for p in nltk.data.path]:
        nltk.data.path.append(resolved)  # NLTK >= 3.9 only opens files under its data roots
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "multilingual functions are not available"
        return SystemWordNetReader(resolved, None)


def load_synonyms(source: str | None = None) -> tuple[SynonymSource, WordNetInfo]:
    """Load WordNet from ``source`` (default: :func:`locate`) or fall back to no synonyms.

    Never downloads. A database that exists but cannot be read falls back too, and the returned
    :class:`WordNetInfo` carries the error.

    Example:
        >>> src, info = load_synonyms("/nonexistent")
        >>> (src is NO_SYNONYMS, info.variant)
        (True, 'exact+stem')
    """
    where = source if source is not None else locate()
    if where is None:
        return NO_SYNONYMS, WordNetInfo("exact+stem")
    try:
        if where.startswith("nltk:"):
            from nltk.corpus import wordnet as nltk_wordnet

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nltk_wordnet.ensure_loaded()
            reader: Any = nltk_wordnet
        else:
            if not is_database(Path(where)):
                return NO_SYNONYMS, WordNetInfo(
                    "exact+stem", where, error=f"no WordNet database in {where}"
                )
            reader = _system_reader(Path(where))
        version = reader.get_version()
        info = WordNetInfo("wordnet", where, version)
        return LockedWordNet(reader, info), info
    except Exception as e:  # unreadable/corrupt database: degrade, but say why
        log.warning("WordNet at %s could not be loaded (%s); METEOR uses exact+stem", where, e)
        return NO_SYNONYMS, WordNetInfo("exact+stem", where, error=f"{type(e).__name__}: {e}")


_default_lock = threading.Lock()
_default: tuple[SynonymSource, WordNetInfo] | None = None


def default_synonyms() -> tuple[SynonymSource, WordNetInfo]:
    """The process-wide synonym source (loaded once, ~2 s for WordNet; call it off the loop)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = load_synonyms()
    return _default


def default_info() -> WordNetInfo:
    """What :func:`default_synonyms` uses or would use, without loading WordNet."""
    if _default is not None:
        return _default[1]
    where = locate()
    return WordNetInfo("wordnet", where) if where else WordNetInfo("exact+stem")
