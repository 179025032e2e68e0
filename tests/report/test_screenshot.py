"""A PNG of the report's first screen, for a person to open (``build/test-artifacts/``)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.report.conftest import Opener, Runs

pytestmark = pytest.mark.integration

#: where the screenshots go (``build/`` is ignored by git)
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_first_screen_png(runs: Runs, open_report: Opener) -> None:
    opened = open_report(runs.new / "report.html", viewport=(1280, 900))
    page = opened.page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "report_first_screen.png"
    page.screenshot(path=str(shot))
    assert _png_size(shot) == (1280, 900)
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    # what the first screen shows: the title, the summary cards and the metrics table
    for selector in ("h1", "#n-cases", "#n-bad", "#cost", "#metrics-table"):
        box = page.locator(selector).bounding_box()
        assert box is not None and box["y"] < 900, selector
    # the cases section (and its first case) one jump away
    page.click("nav a[href='#cases']")
    page.screenshot(path=str(ARTIFACTS / "report_cases.png"))
    assert page.locator("details.case").first.is_visible()
    assert opened.errors == [] and opened.foreign_requests == []
