"""The console's own 404 and 500 pages in Chromium, served as ``make run`` serves it: no DJANGO_DEBUG, so DEBUG is
off and nobody sees Django's debug pages; the 500 page needs neither the database nor a request context."""

import sqlite3

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, CREATE_USERS, LAPTOP, PASSWORD, PHONE, USERS, serve_console

DJANGOS_DEBUG_PAGES = ("URLconf", "Traceback", "DEBUG = True", "Request Method")


def assert_no_debug_page(page):
    content = page.content()
    for words in DJANGOS_DEBUG_PAGES:
        assert words not in content


def styled(page):
    """The console's stylesheet applied: its top bar is not the browser's default transparent block."""
    return page.locator("header.topbar").evaluate("(bar) => getComputedStyle(bar).backgroundColor")


@pytest.mark.parametrize(("size", "viewport"), [("laptop", LAPTOP), ("phone", PHONE)])
@pytest.mark.parametrize("signed_in", [False, True], ids=["anonymous", "signed-in"])
def test_an_unknown_address_is_the_consoles_404_page(browser, console_server, login_states, size, viewport, signed_in):
    context = browser.new_context(viewport=viewport, storage_state=login_states["alice"] if signed_in else None)
    try:
        page = context.new_page()
        response = page.goto(f"{console_server.base_url}/no-such-page/")
        assert response.status == 404
        expect(page.locator("#not-found-title")).to_have_text("Not found")
        expect(page.locator("#not-found-message")).to_have_text("There is no page at this address.")
        expect(page.locator("#not-found-inbox")).to_have_attribute("href", "/")
        expect(page.locator("#topnav .who")).to_have_count(1 if signed_in else 0)
        assert styled(page) != "rgba(0, 0, 0, 0)"  # the stylesheet is served with DEBUG off
        assert_no_debug_page(page)
        assert page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
        if signed_in:
            page.screenshot(path=str(ARTIFACTS / f"error-404-{size}.png"))
    finally:
        context.close()


@pytest.fixture(scope="module")
def console_without_sessions(tmp_path_factory):
    """A console whose session table is gone while it runs: any signed-in page then fails on the server."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-500"),
        "e2e-500",
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    ) as server:
        with sqlite3.connect(server.db_path) as database:
            database.execute("DROP TABLE django_session")
        yield server


@pytest.mark.parametrize(("size", "viewport"), [("laptop", LAPTOP), ("phone", PHONE)])
def test_a_server_error_is_the_consoles_500_page_and_its_log_has_the_traceback(
    browser, console_without_sessions, size, viewport
):
    server = console_without_sessions
    context = browser.new_context(viewport=viewport)
    context.add_cookies([{"name": "sessionid", "value": "a" * 32, "url": server.base_url}])
    try:
        page = context.new_page()
        response = page.goto(f"{server.base_url}/")
        assert response.status == 500
        expect(page).to_have_title("Server error · toolnexus console")
        expect(page.locator("#server-error-title")).to_have_text("Something went wrong")
        expect(page.locator("#server-error-inbox")).to_have_attribute("href", "/")
        assert styled(page) != "rgba(0, 0, 0, 0)"
        assert_no_debug_page(page)
        assert page.evaluate("document.scrollingElement.scrollWidth") <= viewport["width"]
        page.screenshot(path=str(ARTIFACTS / f"error-500-{size}.png"))
    finally:
        context.close()
    # Whoever runs the console finds what went wrong in daphne's log, not on the page.
    log = server.log_path.read_text()
    assert "Internal Server Error: /" in log and "no such table: django_session" in log
