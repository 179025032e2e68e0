"""Discourse and answer-type cues of the local judge (stdlib only, built-in word lists).

Similarity to the question is not enough to say a sentence answers it: "Ibuprofen was developed
in the 1960s" is about the same subject as "How often can I take ibuprofen?" but gives none of
the information asked for. These cues describe what a question asks for and what a sentence
gives, so the judge can weigh them with the similarity:

- :func:`question_type`: ``duration``, ``frequency``, ``quantity``, ``time``, ``place``,
  ``person``, ``reason``, ``procedure``, ``yesno`` or ``other``;
- :func:`answer_types`: what kinds of information a sentence gives (a duration, a number, a
  reason, an instruction, a verdict...);
- :func:`is_continuation`: the sentence only makes sense after the one before ("It ...",
  "That ...", "Also ...");
- :func:`is_trivia`: history/origin/record facts ("was invented in 1830", "named after");
- :func:`is_filler`: pleasantries that state nothing.

The grounding cues for contradictions (antonyms, over-generalisation) are in
:mod:`nexagauge.judge.local.contra`.

Example:
    >>> question_type("How often should I feed it?"), sorted(answer_types("Give it food twice a day."))
    ('frequency', ['advice', 'duration', 'frequency', 'procedure'])
"""

from __future__ import annotations

import re

from nexagauge.judge.local.lexical import _stem, content_words
from nexagauge.text.stopwords import wordset

_WORD = re.compile(r"[a-z0-9']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("\u2019", "'"))


_TIME_UNITS = (
    r"seconds?|secs?|minutes?|mins?|hours?|hrs?|days?|nights?|weeks?|fortnights?|months?|years?"
    r"|decades?|centuries|century"
)
_NUMWORD = (
    r"\d[\d,.]*|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen"
    r"|twenty|thirty|forty|fifty|sixty|ninety|hundred|several|few|couple|half"
)
_DURATION = re.compile(
    rf"\b(?:{_NUMWORD})(?:\s*(?:to|-|or|and a half)\s*(?:{_NUMWORD}))?[\s-]*(?:{_TIME_UNITS})\b"
    r"|\bovernight\b|\ball day\b|\bwithin (?:a|the) (?:day|week|month|year)\b",
    re.I,
)
_FREQUENCY = re.compile(
    r"\bevery\b|\bonce\b|\btwice\b|\b(?:per|a|each) (?:day|week|month|year|hour)\b|\bdaily\b"
    r"|\bweekly\b|\bmonthly\b|\byearly\b|\bannually\b|\btimes (?:a|per|each)\b|\bregularly\b",
    re.I,
)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty"
    r"|forty|fifty|hundred|thousand|million|billion|half|quarter|third|dozen|percent)\b",
    re.I,
)
_MONTHS = (
    r"january|february|march|april|may|june|july|august|september|october|november|december"
    r"|spring|summer|autumn|fall|winter|morning|evening|afternoon|night|weekend|monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday"
)
_TIME = re.compile(
    rf"\b(?:1[5-9]\d\d|20\d\d)\b|\b(?:{_MONTHS})\b|\b(?:before|after|until|by|during)\b"
    r"|\b\d{1,2}(?::\d\d)?\s*(?:a\.?m|p\.?m)\b|\b(?:today|tomorrow|yesterday|now|soon|later)\b",
    re.I,
)
_REASON = re.compile(
    r"\bbecause\b|\bsince\b|\bso (?:that|it|you|the|they)\b|\bdue to\b|\bas a result\b"
    r"|\bcaus(?:e|es|ed|ing)\b|\bwhich (?:means|is why|makes)\b|\bthat'?s why\b|\bthanks to\b"
    r"|\bleads? to\b|\bmeans?\b|\bresults? in\b|\bbecomes?\b|\bturns? into\b",
    re.I,
)
_PLACE = re.compile(
    r"\b(?:in|at|on|near|from|inside|outside|under|behind|beside|between)\s+(?:the\s+)?[A-Z]"
    r"|^(?:\w+\s+)?(?:in|at|on|inside|near|under)\s+(?:the|a|an|your|its|their)\s+[a-z]+\W*$"
    r"|\b(?:north|south|east|west|centre|center|room|city|country|office|floor|building)\b",
)
_VERDICT = re.compile(
    r"^(?:yes|no|yeah|nope|probably|possibly|usually|generally|typically|it depends|not really"
    r"|definitely|absolutely|only if|not if)\b",
    re.I,
)
_ADVICE = re.compile(
    r"\byou (?:can|could|should|shouldn't|must|mustn't|need|needn't|may|might|will|won't|'ll"
    r"|don't|do not|have to|are (?:allowed|able))\b|\b(?:is|are) (?:allowed|not allowed|fine"
    r"|safe|worth|required|enough)\b|\b(?:it'?s|is) (?:best|better|worth|fine|safe|ok)\b",
    re.I,
)
#: common verbs that start an instruction ("Run git reset", "Restart the router")
_IMPERATIVES = wordset(
    """
    add adjust aim allow apply ask avoid back bake boil book bring buy call cancel change
    check choose clean clear click close compare consider contact cook copy cover cut
    delete disable do don't download drink eat enable enter expect fill find finish fix
    follow freeze get give go hold increase install keep leave let limit look make mix
    move never open pay pick place plant plug press prune put read reduce refresh remove
    rename repeat replace request reset rest restart return rinse run save schedule select
    send set shut sign soak start stay stir stop store submit switch take talk tell test
    try turn type unplug update upgrade use wait wash watch water wear write always first
    then next finally
    """
)
_QTYPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("frequency", re.compile(r"\bhow (?:often|frequently)\b|\bhow many times\b", re.I)),
    (
        "duration",
        re.compile(
            rf"\bhow long\b|\bhow soon\b|\bhow many (?:{_TIME_UNITS})\b|\bhow quickly\b"
            r"|\bhow much time\b",
            re.I,
        ),
    ),
    (
        "quantity",
        re.compile(
            r"\bhow (?:much|many|big|far|fast|tall|high|deep|short|old|large|heavy|hot|cold)\b"
            r"|\bwhat (?:is|are) the (?:maximum|minimum|limit|cost|price|speed|size|rate|dose"
            r"|amount|temperature|distance|number|percentage)\b|\bwhat percentage\b",
            re.I,
        ),
    ),
    (
        "time",
        re.compile(
            r"^\s*when\b|\bwhat (?:time|year|date|day)\b|\bwhen (?:is|are|do|does|did|was|should|can)\b",
            re.I,
        ),
    ),
    (
        "place",
        re.compile(
            r"^\s*where\b|\bwhere (?:is|are|do|does|can|should)\b|\bwhich (?:country|city|place)\b",
            re.I,
        ),
    ),
    ("person", re.compile(r"^\s*who\b|\bwho (?:is|was|are|were|invented|wrote)\b", re.I)),
    ("reason", re.compile(r"\bwhy\b|\bwhat causes\b|\bwhat makes\b|\breason\b", re.I)),
    (
        "procedure",
        re.compile(
            r"\bhow (?:do|can|should|would) (?:i|we|you)\b|\bhow to\b|\bwhat (?:should|can|do)"
            r" (?:i|we)\b|\bsteps?\b|\bbest way\b|\bhow does\b|\bhow do\b|\btips?\b",
            re.I,
        ),
    ),
    (
        "yesno",
        re.compile(
            r"^\s*(?:is|are|can|could|should|do|does|did|will|would|may|must|was|were|has|have"
            r"|am)\b|[.?!]\s+(?:is|are|can|could|should|do|does|will|would|may|must)\b",
            re.I,
        ),
    ),
)
#: which answer types satisfy which question type
SATISFIES: dict[str, frozenset[str]] = {
    "frequency": frozenset({"frequency", "duration"}),
    "duration": frozenset({"duration"}),
    "quantity": frozenset({"quantity"}),
    "time": frozenset({"time", "duration"}),
    "place": frozenset({"place"}),
    "person": frozenset({"person"}),
    "reason": frozenset({"reason"}),
    "procedure": frozenset({"procedure", "advice"}),
    "yesno": frozenset({"verdict", "advice", "reason"}),
}


def question_type(question: str) -> str:
    """The kind of information a question asks for (first matching rule, else ``other``).

    Example:
        >>> question_type("How long does the battery last?"), question_type("Why is the sky blue?")
        ('duration', 'reason')
    """
    q = question.strip()
    for name, rx in _QTYPES:
        if rx.search(q):
            return name
    return "other"


#: the kinds a sentence gives when its pattern matches anywhere in it
_ANSWER_PATTERNS = (
    ("duration", _DURATION),
    ("frequency", _FREQUENCY),
    ("quantity", _NUMBER),
    ("time", _TIME),
    ("reason", _REASON),
    ("place", _PLACE),
)


def answer_types(sentence: str) -> set[str]:
    """The kinds of information a sentence gives (possibly none).

    Example:
        >>> sorted(answer_types("Don't use --hard, because it deletes your changes."))
        ['advice', 'procedure', 'reason']
    """
    s = sentence.strip()
    out = {name for name, rx in _ANSWER_PATTERNS if rx.search(s)}
    words = _words(s)
    if words and (words[0] in _IMPERATIVES or (words[0] == "do" and len(words) > 1
                                               and words[1] == "not")):  # fmt: skip
        out.add("procedure")
    if _VERDICT.search(s):
        out.add("verdict")
    if _ADVICE.search(s) or "procedure" in out:
        out.add("advice")
    if any(m.group(1).lower() not in _NOT_NAMES for m in _FULL_NAME.finditer(s)):
        out.add("person")
    return out


#: two capitalised words in a row: a full name ("Jane Austen"), unless the first is a function
#: word that merely starts the sentence ("The Eiffel ...")
_FULL_NAME = re.compile(r"\b([A-Z][a-z]+) [A-Z][a-z]+\b")
_NOT_NAMES = wordset(
    """
    the a an this that these those it its in on at for from to by with and or but if when
    while after before since as our your their his her my we you they
    """
)

_CONTINUATION_START = wordset(
    """
    it it's its they they're their them this that that's these those he she his her both
    also however but and so then otherwise instead plus even still which such there here
    the latter former either neither each
    """
)


def is_continuation(sentence: str) -> bool:
    """Whether the sentence leans on the one before it (starts with a pronoun or connector).

    Example:
        >>> is_continuation("It should be taken with food."), is_continuation("Take it with food.")
        (True, False)
    """
    words = _words(sentence)
    if not words:
        return False
    return words[0] in _CONTINUATION_START or (
        len(words) > 1 and words[0] in {"if", "when", "for"} and words[1] in {"so", "not", "that"}
    )


_TRIVIA = re.compile(
    r"\b(?:was|were) (?:first |originally )?(?:invented|developed|founded|discovered|introduced"
    r"|built|named|created|designed|written|established|opened|launched|sealed|fixed|coined"
    r"|patented|released|born|sold|made|reviewed|adopted|completed|constructed|finished|unveiled"
    r"|inaugurated|renovated|rebuilt|restored|demolished|awarded|won)\b|\bnamed after\b|\boriginally\b"
    r"|\bthe first\b|\bin the (?:1[0-9]|20)\d0s\b|\boldest\b|\btrademark\b|\bin the world\b"
    r"|\bcome from\b|\bcomes from\b|\bis often cited\b|\bfamous\b|\bhistory\b|\bcentur(?:y|ies)\b"
    r"|\bbotanically\b|\bbelongs to\b|\bpopular\b|\bis named\b|\bstands? for\b|\bmoved to\b",
    re.I,
)
_HISTORY_Q = re.compile(
    r"\b(?:history|histor|invent|origin|originally|founded|who|when was|when did|first|name)\w*",
    re.I,
)


def is_trivia(sentence: str, question: str) -> bool:
    """A history/origin/record fact, for a question that is not about history.

    Example:
        >>> is_trivia("The first lawnmower was invented in 1830.", "How short should I cut grass?")
        True
    """
    return bool(_TRIVIA.search(sentence)) and not _HISTORY_Q.search(question)


_FILLER = re.compile(
    r"^(?:thanks|thank you|hope|i hope|happy|great question|good question|let me know|glad"
    r"|we're proud|we are proud|feel free|good luck|enjoy|have a (?:great|good|nice)|i'm sorry"
    r"|sorry to hear|you're welcome|no problem|cheers|best of luck|hi|hello|sure|of course"
    r"|certainly|absolutely|happy to help)\b",
    re.I,
)


def is_filler(sentence: str) -> bool:
    """Pleasantries, sign-offs and questions back to the user: they state nothing checkable.

    Example:
        >>> is_filler("Happy baking!"), is_filler("Which library do you use?")
        (True, True)
        >>> is_filler("Bake it at 250 degrees.")
        False
    """
    s = sentence.strip()
    if _FILLER.search(s) or s.endswith("?"):
        return True
    return s.endswith("!") and len(_words(s)) <= 6 and not _NUMBER.search(s)


#: a sentence that opens with a goal of its own ("To change only the message, ...", "If you'd
#: like a higher limit, ...", "While you're in there, ...")
_GOAL_FRAME = re.compile(
    r"^(?:to|in order to|if you(?:'d| would)? (?:want|like|need|wish|prefer|plan)(?: to)?"
    r"|when you (?:want|need) to|while you(?:'re| are) (?:at it|in there|there))\b([^,;:]*)[,;:]",
    re.I,
)


def goal_shift(sentence: str, question: str) -> bool:
    """The sentence serves a goal of its own that the question does not name: it answers a
    neighbouring question (a tangent), however similar its words.

    Example:
        >>> q = "How do I undo my last commit but keep the changes?"
        >>> goal_shift("To change only the commit message, use git commit --amend.", q)
        True
        >>> goal_shift("To undo it but keep the changes, run git reset --soft HEAD~1.", q)
        False
    """
    m = _GOAL_FRAME.match(sentence.strip())
    if m is None:
        return False
    goal = [_stem(w) for w in content_words(m.group(1))]
    if not goal:  # "While you're in there, ..." announces an aside
        return m.group(0).lower().startswith("while")
    asked = {_stem(w) for w in content_words(question)}
    return sum(1 for w in goal if w in asked) / len(goal) < 0.5


def is_short(sentence: str) -> bool:
    """A fragment of at most four words ("6379.", "15 minutes.", "Mostly in the leaves."):
    people answer questions elliptically; such a sentence carries too little text for its
    similarity to the question to mean much.

    Example:
        >>> is_short("15 minutes."), is_short("The maximum timeout is 15 minutes.")
        (True, False)
    """
    return len(_words(sentence)) <= 4
