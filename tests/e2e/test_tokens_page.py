"""The API tokens page in Chromium: a new token is shown once, a reload issues no second one, Copy copies it."""

import re
import sqlite3

from playwright.sync_api import expect

from .conftest import VIEWPORT


def tokens_in_database(server, name):
    with sqlite3.connect(server.db_path) as db:
        return db.execute("SELECT COUNT(*) FROM approvals_apitoken WHERE name = ?", (name,)).fetchone()[0]


def test_reloading_after_creating_a_token_issues_no_second_one_and_copy_copies_it(
    browser, console_server, login_states
):
    context = browser.new_context(
        viewport=VIEWPORT, storage_state=login_states["alice"], permissions=["clipboard-read", "clipboard-write"]
    )
    try:
        page = context.new_page()
        page.goto(f"{console_server.base_url}/tokens/")
        page.fill("#id_token_name", "e2e-reload")
        page.get_by_role("button", name="Create token").click()

        secret = page.locator("#new-token-secret")
        expect(secret).to_have_text(re.compile(r"^tnx_\S+$"))
        expect(page).to_have_url(f"{console_server.base_url}/tokens/")  # redirected: a reload is a GET
        shown = secret.text_content()
        assert tokens_in_database(console_server, "e2e-reload") == 1

        page.get_by_role("button", name="Copy token").click()
        expect(page.locator("#copy-token-status")).to_have_text("Copied to the clipboard.")
        assert page.evaluate("navigator.clipboard.readText()") == shown

        page.reload()
        expect(page.locator("#tokens tr", has_text="e2e-reload")).to_have_count(1)
        expect(page.locator("#new-token-secret")).to_have_count(0)  # shown once, never again
        assert shown not in page.content()
        assert tokens_in_database(console_server, "e2e-reload") == 1
    finally:
        context.close()


def revoked(server, name):
    with sqlite3.connect(server.db_path) as db:
        return db.execute("SELECT revoked_at IS NOT NULL FROM approvals_apitoken WHERE name = ?", (name,)).fetchone()[0]


def test_revoke_asks_inline_naming_the_token_and_works_without_script(browser, console_server, login_states):
    context = browser.new_context(viewport=VIEWPORT, storage_state=login_states["alice"], java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(f"{console_server.base_url}/tokens/")
        page.fill("#id_token_name", "walk-laptop")
        page.get_by_role("button", name="Create token").click()
        row = page.locator("#tokens tr", has_text="walk-laptop")

        row.locator("summary", has_text="Revoke").click()  # opens the question; nothing is sent yet
        expect(row.locator(".confirm-question")).to_have_text(
            "Revoke walk-laptop? Programs using it stop working at once."
        )
        assert not revoked(console_server, "walk-laptop")
        row.locator("summary", has_text="Keep it").click()
        expect(row.locator(".confirm-question")).to_be_hidden()

        row.locator("summary", has_text="Revoke").click()
        row.get_by_role("button", name="Revoke walk-laptop").click()
        expect(page.get_by_text("Token walk-laptop is revoked; it no longer works.")).to_be_visible()
        expect(row.locator("td.state")).to_contain_text("revoked")
        assert revoked(console_server, "walk-laptop")
    finally:
        context.close()
