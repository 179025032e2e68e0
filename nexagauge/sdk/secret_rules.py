"""The secrets (and personal data) the scrubber recognises: one named, gated pattern per kind.

Coverage follows the rule sets of well-kept secret scanners (gitleaks, detect-secrets): provider
tokens with a recognisable prefix, AWS access and secret keys, JWTs, private key blocks, HTTP
authorization values, credentials in URLs, and ``key = value`` assignments whose key names a
secret (``OPENAI_API_KEY=...``, ``DB_PASSWORD=...``, ``db_pass=...``, ``"SecretAccessKey": ...``,
``AccountKey=...``). docs/sdk.md shows the same list as a table; tests/sdk/test_secret_corpus.py
checks every kind in every place the SDK records text.

Each rule has *gates*: cheap checks (a literal present, a long token present, a key before a
``=``/``:``) that must all pass before its regular expression runs, so ordinary text costs a few
byte scans and no regex. See :class:`ScrubRule`.

Example::

    >>> sorted({r.name for r in SECRET_RULES})[:4]
    ['api_key', 'authorization', 'aws_secret_key', 'bearer_token']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: ``hook(attribute_name, value) -> new value``; return the value unchanged to keep it.
ScrubHook = Callable[[str, str], str]


@dataclass(frozen=True, slots=True)
class ScrubRule:
    """One named pattern. If it has ``(?P<v>...)`` groups only the matched group is replaced.

    Gates keep the common case (nothing secret in the text) cheap: the regex runs only when the
    text passes every gate given. ``separators``: one of these characters (from ``=``, ``:``,
    ``@``) must occur; ``long_token``: the text must contain a run of >= 16 characters from
    ``[A-Za-z0-9_-]``; ``min_digits``: at least that many digits; ``raw_triggers``:
    case-sensitive literals, one must occur; ``triggers``: lowercase literals, one must occur in
    the lowercased text; ``base64_run``: a run of at least that many ``[A-Za-z0-9+/]``;
    ``token_only`` (every match is 16+ characters of ``[A-Za-z0-9_-]``, its pattern only ASCII):
    the pattern must match inside one of the text's long tokens, so a text is searched only where
    it has long tokens, not along its whole length; ``token_starts`` (with ``token_only``): every
    match begins with one of these literals, at the start of a long token or right after a ``-``
    in it (where the pattern's ``\\b`` can be), so only such tokens are searched (an agent's tool
    call ids are long tokens: they cost a ``startswith``, not a regex); ``run_prefixes``: a long token must directly
    follow one of these literals (``ya29.`` before a Google token); ``keys``: lowercase key names
    (3 to 16 characters), one must end the text before some ``=`` or ``:`` (quotes and blanks in
    between ignored; ``"DB_PASSWORD" :`` ends with ``password``). No gate: the regex always runs. ``check`` (optional) gets the matched text and returns False to
    keep it (e.g. a Luhn check).

    Example (``nexagauge.configure(scrub_rules=[rule])`` adds it to the built-in rules):
        >>> from nexagauge.sdk.scrubbing import Scrubber
        >>> rule = ScrubRule("order_id", r"ORD-\\d{8}", raw_triggers=("ORD-",))
        >>> Scrubber(extra_rules=[rule]).scrub("input", "refund ORD-12345678 please")
        ('refund [scrubbed:order_id] please', ['input:order_id'])
    """

    name: str
    pattern: str
    check: Callable[[str], bool] | None = None
    separators: str = ""
    long_token: bool = False
    min_digits: int = 0
    raw_triggers: tuple[str, ...] | None = None
    triggers: tuple[str, ...] | None = None
    keys: tuple[str, ...] | None = None
    base64_run: int = 0
    token_only: bool = False
    token_starts: tuple[str, ...] | None = None
    run_prefixes: tuple[str, ...] | None = None


def luhn_ok(text: str) -> bool:
    """The Luhn checksum of the digits of ``text`` (13 to 19 of them), as payment cards carry."""
    digits = [int(c) for c in text if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# between a key and its value: an optional closing quote (escaped in JSON text), blanks, the
# separator, blanks
_SEP = r"(?:\\?[\"'])?[ \t]*(?::=|=>|[:=])[ \t]*"


def _value(minimum: int) -> str:
    """A value after ``key=``: quoted (spaces allowed) or bare (up to a delimiter)."""
    # no alternative consumes a backslash: in JSON text (a serialized argument) a match never
    # splits an escape sequence, so scrubbing keeps the JSON valid; \"...\" is a quoted value there
    return (
        rf"(?:\"(?P<v>[^\"\n\\]{{{minimum},}})\"|'(?P<v>[^'\n\\]{{{minimum},}})'"
        rf"|\\\"(?P<v>[^\"\n\\]{{{minimum},}})\\\"|(?P<v>[^\s\"',;&}}<>\\]{{{minimum},}}))"
    )


# Keys that name a secret, matched as the end of the key (``DB_PASSWORD``, ``dbPassword``,
# ``OPENAI_API_KEY``, ``"SecretAccessKey"``, ``AccountKey``).
_PASSWORD_KEYS = r"passw(?:or)?d|passphrase"
_SECRET_KEYS = (
    r"secret|api[_\-.]?key|apikey|access[_\-.]?key|private[_\-.]?key|account[_\-.]?key"
    r"|signing[_\-.]?key|encryption[_\-.]?key|master[_\-.]?key"
    r"|(?:access|auth|refresh|session|id|bearer|api)[_\-.]?token|credentials?"
)
# Short keys (pass, pwd, token) only as a whole word or the last part of a key (``db_pass``,
# ``dbPass``, ``GITHUB_TOKEN``), never inside a word (``bypass``, ``compass``).

#: Secrets scrubbed by default.
SECRET_RULES: tuple[ScrubRule, ...] = (
    ScrubRule(
        "private_key",
        # a whole block, or (cut by a size limit, or pasted without its end) everything after BEGIN
        r"-----BEGIN [A-Z ]*PRIVATE KEY( BLOCK)?-----(?:[\s\S]*?-----END [A-Z ]*PRIVATE KEY"
        r"( BLOCK)?-----|[A-Za-z0-9+/=\s:,\-]*)",
        long_token=True,  # the base64 body always has long runs
        raw_triggers=("-----BEGIN",),
    ),
    ScrubRule(
        "api_key",
        r"\b(?:"
        r"(?:sk|pk|rk)-(?:proj-|ant-(?:api\d\d-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}"
        r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16}"
        r"|gh[pousr]_[A-Za-z0-9]{30,}"
        r"|github_pat_[A-Za-z0-9_]{30,}"
        r"|xox[abposr]-[A-Za-z0-9\-]{11,}"
        r"|AIza[0-9A-Za-z_\-]{35}"
        r"|hf_[A-Za-z0-9]{30,}"
        r"|glpat-[A-Za-z0-9_\-]{20,}"
        r"|npm_[A-Za-z0-9]{36}"
        r"|pypi-AgE[A-Za-z0-9_\-]{50,}"
        r"|dop_v1_[a-f0-9]{64}"
        r"|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"
        r"|dapi[a-h0-9]{32}"
        r"|gsk_[A-Za-z0-9]{48,}"
        r"|r8_[A-Za-z0-9]{37}"
        r")",
        long_token=True,
        token_only=True,
        # the literal each alternative above begins with
        token_starts=(
            *(f"{p}{s}" for p in ("sk", "pk", "rk") for s in ("-", "_")),
            *("A3T", "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA"),
            *("ANVA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AIza"),
            *("hf_", "glpat-", "npm_", "pypi-AgE", "dop_v1_", "shp", "dapi", "gsk_", "r8_"),
        ),
    ),
    ScrubRule(
        "api_key",
        r"\bSG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}",  # SendGrid (dots: not one token)
        long_token=True,
        run_prefixes=("SG.",),
    ),
    ScrubRule(
        # 40 characters of base64 with upper, lower and a digit or / +, standing alone
        "aws_secret_key",
        r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
        r"(?=[A-Za-z0-9/+]{0,39}[0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])",
        base64_run=40,
    ),
    ScrubRule(
        "oauth_token",
        r"\bya29\.[0-9A-Za-z_\-]{20,}",  # Google OAuth access token
        long_token=True,
        run_prefixes=("ya29.",),
    ),
    ScrubRule(
        "jwt",
        r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        long_token=True,
        raw_triggers=("eyJ",),
    ),
    ScrubRule(
        "bearer_token",
        # after "Bearer" any long token; after "token" one with a digit ("token verification" stays)
        r"(?i:\bbearer\s+)(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)"
        r"|(?i:\btoken\s+)(?P<v>(?=[A-Za-z0-9\-._~+/]*\d)[A-Za-z0-9\-._~+/]{16,}=*)",
        long_token=True,
        triggers=("bearer", "token"),
    ),
    ScrubRule(
        "authorization",
        r"(?ai:\b(?:proxy-)?authorization)" + _SEP + r"(?ai:(?:basic|bearer|token|digest)\s+)?"
        r"(?P<v>[^\s\"',;\\]{6,})",
        separators=":=",
        keys=("authorization",),
    ),
    ScrubRule(
        "password",
        rf"(?:(?ai:{_PASSWORD_KEYS})|(?<![A-Za-z0-9])(?ai:pass|pwd)"
        rf"|(?<=[a-z])(?:Pass|Pwd)|(?<=[A-Z])(?:PASS|PWD))" + _SEP + _value(1),
        separators=":=",
        keys=("password", "passwd", "passphrase", "pass", "pwd"),
    ),
    ScrubRule(
        "pin",
        r"(?:(?<![A-Za-z0-9])(?ai:pin)|(?<=[a-z])Pin|(?<=[A-Z])PIN)"
        + _SEP
        + r"[\"']?(?P<v>\d{4,8})\b",
        separators=":=",
        keys=("pin",),
    ),
    ScrubRule(
        "password",
        r"(?ai:\b[a-z][a-z0-9+.\-]*://[^/\s:@]+:)(?P<v>[^@\s/\\]+)(?=@)",  # scheme://user:pw@host
        separators="@",
        raw_triggers=("://",),
    ),
    ScrubRule(
        "password",
        r"(?i:\bpassword\s+(?:is|was)\s*)(?P<v>[^\s\"',;\\]+)",
        raw_triggers=("assword", "ASSWORD"),  # the gate is case-sensitive; the pattern is not
    ),
    ScrubRule(
        "secret",
        rf"(?ai:{_SECRET_KEYS})"
        + _SEP
        + _value(4)
        +
        # a bare ``token`` key: only long values (``max token: 256`` is not a secret)
        r"|(?:(?<![A-Za-z0-9])(?ai:token)|(?<=[a-z])Token|(?<=[A-Z])TOKEN)"
        + _SEP
        + _value(8)
        +
        # an Azure shared access signature in a URL
        r"|(?<=[?&])sig=(?P<v>[A-Za-z0-9%+/=]{16,})",
        separators=":=",
        keys=("secret", "key", "token", "credential", "credentials", "sig"),
    ),
)
