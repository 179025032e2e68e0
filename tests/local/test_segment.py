"""Sentence segmentation: abbreviations, decimals, initials, lists, headings, offsets."""

from __future__ import annotations

import pytest

from nexagauge.text.sentences import sentences, split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris is in France. Rome is in Italy.", ["Paris is in France.", "Rome is in Italy."]),
        # titles, Latin abbreviations, months with numbers
        (
            "Dr. Smith met Mr. Jones on Jan. 5 at 9 a.m. in the lab. They talked.",
            ["Dr. Smith met Mr. Jones on Jan. 5 at 9 a.m. in the lab.", "They talked."],
        ),
        (
            "Use a tool, e.g. grep or awk. See Fig. 3 too.",
            ["Use a tool, e.g. grep or awk.", "See Fig. 3 too."],
        ),
        # decimals, thousands, versions, URLs, money
        (
            "Pi is approx. 3.14159. Python 3.11.2 costs $0. See https://python.org/x. It grew 2.5%.",
            [
                "Pi is approx. 3.14159.",
                "Python 3.11.2 costs $0.",
                "See https://python.org/x.",
                "It grew 2.5%.",
            ],
        ),
        # initials are not sentence ends; a single letter before an opener is
        (
            "J. K. Rowling wrote it. George W. Bush read it.",
            ["J. K. Rowling wrote it.", "George W. Bush read it."],
        ),
        ("Take vitamin C. It helps.", ["Take vitamin C.", "It helps."]),
        # ambiguous abbreviations end a sentence only before a typical opener
        ("He works at Apple Inc. The firm is big.", ["He works at Apple Inc.", "The firm is big."]),
        ("The U.S. economy grew. Prices fell.", ["The U.S. economy grew.", "Prices fell."]),
        # ?, !, ellipsis, quotes
        (
            "Really? Yes! Wait... what happened? Nobody knows.",
            ["Really?", "Yes!", "Wait... what happened?", "Nobody knows."],
        ),
        ('She said "Stop." Then she left.', ['She said "Stop."', "Then she left."]),
        ("One sentence without a period", ["One sentence without a period"]),
        ("Paris.", ["Paris."]),
        ("", []),
        ("  ...  ", []),
    ],
)
def test_sentences(text: str, expected: list[str]) -> None:
    assert sentences(text) == expected


def test_lists_and_headings_are_units_without_markers() -> None:
    text = (
        "# Setup\n"
        "Follow these steps:\n"
        "1. Install the package.\n"
        "2) Run it. Check the output.\n"
        "- a bullet that wraps\n"
        "  onto a second line\n"
        "* another bullet\n"
        "\n"
        "A new paragraph that\n"
        "wraps softly. Done."
    )
    assert sentences(text) == [
        "Setup",
        "Follow these steps:",
        "Install the package.",
        "Run it.",
        "Check the output.",
        "a bullet that wraps onto a second line",
        "another bullet",
        "A new paragraph that wraps softly.",
        "Done.",
    ]


def test_offsets_index_the_original_text() -> None:
    text = "  First one.\n\n- Second item here.\n3. Third: 4.5 kg. Fourth!"
    spans = split_sentences(text)
    assert [s.text for s in spans] == [
        "First one.",
        "Second item here.",
        "Third: 4.5 kg.",
        "Fourth!",
    ]
    for s in spans:
        assert text[s.start : s.end] == s.text
