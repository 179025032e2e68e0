"""Secrets and personal values a support-bot case may carry, and checks that none leaked.

Shared by the case-scrubber unit tests, the offline run tests and the end-to-end test through
the real stack (issue 31): each value is realistic (valid checksum where the kind has one) and
each appears in a sentence that a judge must still be able to read around the placeholder.
"""

from __future__ import annotations

from collections.abc import Iterable

#: kind -> value (secrets: scrubbed by default)
SECRETS: dict[str, str] = {
    "openai_key": "sk-proj-Q8vX2mN4pL7rT1wZ9yK3bH6dF0sA5eJc",
    "aws_key_id": "AKIAZ7Q4M2N8P5R3T6W9",
    "aws_secret": "kS9dF2hJ4lZ6xC8vB0nM1qW3eR5tY7uI9oP2aS4d",
    "github_token": "ghp_R4nD0mT0k3nV4lu3F0rT35t1ngAbCdEfGh1234",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1c2VyLTQyIiwicm9sZSI6ImFkbWluIn0.c2lnbmF0dXJlX2Zvcl90ZXN0aW5n",
    "db_password": "Tr0ub4dor-3-horse-battery",
}
#: kind -> value (personal data: scrubbed with scrub_pii)
PERSONAL: dict[str, str] = {
    "card": "4111 1111 1111 1111",
    "iban": "DE89 3704 0044 0532 0130 00",
    "email": "maria.garcia@example.com",
    "phone": "+44 20 7946 0958",
    "national_id": "12345678Z",
}

#: sentences carrying them: (question, context passage, answer) per kind
SENTENCES: dict[str, tuple[str, str, str]] = {
    "openai_key": (
        f"My OpenAI key {SECRETS['openai_key']} stopped working, why?",
        f"Ticket 4411: customer key {SECRETS['openai_key']} was revoked after a leak.",
        f"Your key {SECRETS['openai_key']} was revoked after a leak; create a new one.",
    ),
    "aws_key_id": (
        f"Is access key {SECRETS['aws_key_id']} still active?",
        f"IAM audit: access key {SECRETS['aws_key_id']} was disabled on Monday.",
        f"No, access key {SECRETS['aws_key_id']} was disabled on Monday.",
    ),
    "aws_secret": (
        f"I pasted aws_secret_access_key = {SECRETS['aws_secret']} in the app, is that bad?",
        f"Config dump: aws_secret_access_key = {SECRETS['aws_secret']} region eu-west-1.",
        "Yes: rotate the secret access key you pasted at once.",
    ),
    "github_token": (
        f"Why does {SECRETS['github_token']} get a 401 from the API?",
        f"Token {SECRETS['github_token']} expired on 1 March.",
        f"The token {SECRETS['github_token']} expired on 1 March.",
    ),
    "jwt": (
        f"The session token {SECRETS['jwt']} is rejected, why?",
        "Session tokens expire after one hour.",
        f"Session tokens such as {SECRETS['jwt']} expire after one hour.",
    ),
    "db_password": (
        f"The app fails with DB_PASSWORD={SECRETS['db_password']} set, what now?",
        "Database passwords are rotated every 90 days.",
        f"DB_PASSWORD={SECRETS['db_password']} was rotated; passwords rotate every 90 days.",
    ),
    "card": (
        f"Was my card {PERSONAL['card']} charged twice?",
        f"Payments: card {PERSONAL['card']} charged once on 3 May.",
        f"No, card {PERSONAL['card']} was charged once on 3 May.",
    ),
    "iban": (
        f"Did the refund to IBAN {PERSONAL['iban']} go out?",
        f"Refunds: IBAN {PERSONAL['iban']} paid on 4 May.",
        f"Yes, the refund to IBAN {PERSONAL['iban']} was paid on 4 May.",
    ),
    "email": (
        f"Please send the invoice to {PERSONAL['email']}, is that my account email?",
        f"Account 7731: email {PERSONAL['email']}, plan Pro.",
        f"Yes, {PERSONAL['email']} is the email of account 7731.",
    ),
    "phone": (
        f"Can support call me on {PERSONAL['phone']}?",
        f"Callback list: {PERSONAL['phone']} at 10:00.",
        f"Yes, support will call {PERSONAL['phone']} at 10:00.",
    ),
    "national_id": (
        f"Is my DNI {PERSONAL['national_id']} verified?",
        f"KYC: DNI {PERSONAL['national_id']} verified on 2 May.",
        f"Yes, DNI {PERSONAL['national_id']} was verified on 2 May.",
    ),
}


def fragments(values: Iterable[str]) -> list[str]:
    """What must not appear: each value, and for a grouped value its digits without the grouping
    (a leak may drop the blanks) -- long enough never to occur by chance."""
    out: list[str] = []
    for v in values:
        out.append(v)
        compact = v.replace(" ", "").replace("-", "")
        if compact != v:
            out.append(compact)
    return out


SECRET_FRAGMENTS = fragments(SECRETS.values())
PERSONAL_FRAGMENTS = fragments(PERSONAL.values())


def leaks(text: str, fragments: Iterable[str]) -> list[str]:
    """The fragments found in ``text`` (also JSON-escaped forms: ``&`` as ``\\u0026``)."""
    found = []
    for f in fragments:
        if f in text or f.replace("&", "\\u0026") in text:
            found.append(f)
    return found
