"""Static files as deployed (DEBUG off): a cold dashboard in Chromium, every request it makes listed.

Each ES module arrives once, under its hashed name, whether the page preloaded it or a module imported
it; every static file is compressed and cached for a year as immutable; the page still draws itself
from them, on a laptop and on a phone (screenshots in test-artifacts/).
"""

import re
from collections import Counter
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from playwright.sync_api import expect

from approvals.web.module_graph import imported_modules
from tests.support.static_files import source_name

from .conftest import ARTIFACTS, CREATE_USERS, LAPTOP, PASSWORD, PHONE, USERS, login, serve_console

HASHED = re.compile(r"\.[0-9a-f]{12}\.(js|css|svg)$")
# The modules the dashboard's <script> tags load (base.html's top bar, the page's own two).
ENTRIES = ["approvals/topbar.js", "approvals/dashboard.js", "approvals/agent_form.js"]
YEAR = 365 * 24 * 60 * 60


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """A console with DEBUG off, as deployed: pages link the collected, hashed names."""
    with serve_console(
        tmp_path_factory.mktemp("static-console"),
        "static",
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        DJANGO_DEBUG="0",
    ) as server:
        yield server


@pytest.fixture(scope="module")
def signed_in(browser, deployed):
    """alice's cookies after a real login: a context made from them starts with an empty cache."""
    context = browser.new_context()
    try:
        login(context.new_page(), deployed, "alice")
        return context.storage_state()
    finally:
        context.close()


def cold_dashboard(browser, deployed, signed_in, **context_options):
    """A fresh context (nothing cached) on the live dashboard; returns the page, its responses and script errors."""
    context = browser.new_context(storage_state=signed_in, **context_options)
    page = context.new_page()
    responses, errors = [], []
    page.on("response", lambda response: responses.append(response))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{deployed.base_url}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    return page, responses, errors


def static_path(url):
    return urlsplit(url).path


def test_a_cold_dashboard_fetches_each_module_once_under_its_hashed_name(browser, deployed, signed_in):
    page, responses, errors = cold_dashboard(browser, deployed, signed_in, viewport=LAPTOP)
    static = [r for r in responses if static_path(r.url).startswith(settings.STATIC_URL)]
    paths = [static_path(r.url) for r in static]
    try:
        assert errors == []
        unhashed = [path for path in paths if not HASHED.search(path)]
        assert unhashed == [], "the page fetched static files by their unhashed names"
        repeated = {path: n for path, n in Counter(paths).items() if n > 1}
        assert repeated == {}, "the page fetched these twice"
        sources = Counter(source_name(path) for path in paths)
        assert max(sources.values()) == 1, "a module arrived under two names (a preload and an import disagreed)"

        modules = {name for name in sources if name.endswith(".js")}
        every_module = set(ENTRIES).union(*(imported_modules(entry) for entry in ENTRIES))
        assert modules == every_module
        assert "approvals/console.css" in sources

        for response in static:
            headers = response.all_headers()
            assert response.status == 200, response.url
            assert headers["cache-control"] == f"max-age={YEAR}, public, immutable", response.url
            if response.url.endswith((".js", ".css")):
                # Chromium asks for gzip (and brotli only over https): each file arrives compressed.
                assert headers.get("content-encoding") in ("gzip", "br"), response.url

        page.reload()  # from the cache now: the page is whole and live again
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        assert errors == []
    finally:
        page.context.close()


@pytest.mark.parametrize("size", ["laptop", "phone"])
def test_the_dashboard_draws_itself_from_the_hashed_files(browser, deployed, signed_in, size):
    options = {"viewport": LAPTOP} if size == "laptop" else {"viewport": PHONE, "is_mobile": True, "has_touch": True}
    page, _, errors = cold_dashboard(browser, deployed, signed_in, **options)
    try:
        styled = page.evaluate(
            """() => [...document.styleSheets].filter((sheet) => sheet.href).map((sheet) => [sheet.href, sheet.cssRules.length])"""
        )
        console_css = [rules for href, rules in styled if re.search(r"/console\.[0-9a-f]{12}\.css$", href)]
        assert console_css and console_css[0] > 100, styled
        expect(page.locator("#requests-title")).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / f"static-files-dashboard-{size}.png"), full_page=False)
        assert errors == []
    finally:
        page.context.close()
