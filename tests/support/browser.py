"""A real headless Chromium for tests and benchmarks: Debian's ``chromium-headless-shell``.

playwright (PyPI) drives it through ``executable_path``: playwright's own browser download cannot
work offline, so ``scripts/test.sh`` installs the Debian package. :data:`BROWSER_ARGS` keep the
browser from reaching out on its own (component updates, sync, background networking), so every
request a page makes is the page's own.

Example::

    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=BROWSER_ARGS)
"""

from __future__ import annotations

import shutil
from typing import Any

BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
INSTALL_HINT = (
    "chromium-headless-shell is not installed: run scripts/test.sh (it installs the Debian "
    "package) or apt-get install --no-install-recommends chromium-headless-shell"
)


def chromium_path() -> str | None:
    """The headless shell's path, or None when the Debian package is not installed."""
    return shutil.which("chromium-headless-shell")


def only(url: str, blocked: list[str] | None = None) -> Any:
    """A playwright route handler that serves ``url`` and aborts (and records) anything else."""

    def handle(route: Any) -> None:
        if route.request.url == url:
            route.continue_()
        else:
            if blocked is not None:
                blocked.append(route.request.url)
            route.abort()

    return handle
