"""The dashboard in a real browser (Chromium, through Playwright): a page opened, its
errors collected."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Page

CHROMIUM = Path("/usr/bin/chromium")
# Chromium aborts the requests in flight when the machine's network interfaces change
# (net::ERR_NETWORK_CHANGED): in scripts/test the Docker tests' image build starts
# containers, each a new interface, beside these tests. Not the page's fault, and the
# page's next refresh loads again; the assertions on what it shows still hold it to that.
HOST_NETWORK_CHANGED = "net::ERR_NETWORK_CHANGED"


def open_page(browser, url: str):
    """A new page of ``browser`` at ``url``, once it refreshed, and the list of its errors."""
    page = browser.new_page(viewport={"width": 1400, "height": 1300})
    errors = page_errors(page)
    page.goto(url)
    # The page marks each completed refresh; wait for the first (a deadline, not a sleep).
    page.wait_for_function("Number(document.body.dataset.refreshes || 0) >= 1", timeout=30_000)
    return page, errors


def page_errors(page: Page) -> list[str]:
    """The list the page's uncaught errors and console errors (its own) will be added to."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if page_fault(m) else None)
    return errors


def page_fault(message: ConsoleMessage) -> bool:
    """Whether a console message is an error of the page's (not of the host's network)."""
    return message.type == "error" and HOST_NETWORK_CHANGED not in message.text
