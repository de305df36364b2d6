"""A tab showing an old call never approves a new one under the same id, in Chromium against a real daphne at
1440x900 and 390x844: every answer a card sends names the ``call_digest`` of the view it drew, and the console
refuses it when the id now asks for another call (ids are used again after ``prune_runs`` deletes old requests).
The refusal is said on the card; a reload shows the call asked now, which the reviewer may then approve."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, Tab, api_get, api_post
from tests.support.live_console import console_env, manage

from .conftest import LAPTOP, PHONE, console_with_policies, login

SHOTS = Path("/work/shots/console37")
OLD_ARGS = {"service": "web", "env": "staging"}
NEW_ARGS = {"service": "billing", "env": "production"}
# What prune_runs does once archive_audit took a request's events, done straight on this console's own database.
PRUNED = """
from django.db import connection
from approvals.models import AuditEvent, Request
with connection.cursor() as cursor:
    cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table} WHERE request_id = %s", [REQUEST_ID])
    cursor.execute(f"DELETE FROM {Request._meta.db_table} WHERE id = %s", [REQUEST_ID])
"""


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    """A console of this module's own: its audit trail loses the pruned request's events."""
    with console_with_policies(tmp_path_factory, "stale-call", []) as server:
        yield server


def open_host_request(context, server, request_id, args):
    body = {"id": request_id, "kind": "approval", "prompt": f"Deploy {args['service']} to {args['env']}?"}
    response = api_post(context, server, "requests", {**body, "host": "ci.example", "tool": "deploy", "args": args})
    assert response.status == 201, response.text()
    return response.json()


def arg(card, name):
    return card.locator(f'.tool-call .arg[data-arg="{name}"] .arg-value')


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_approving_an_old_call_from_a_stale_tab_is_refused_and_a_reload_shows_the_new_one(browser, console, viewport):
    context = browser.new_context(viewport=viewport)
    try:
        tab = Tab(context.new_page())
        page = tab.page
        login(page, console, "alice")
        request_id = f"stale-call-{viewport['width']}"
        old = open_host_request(context, console, request_id, OLD_ARGS)
        page.goto(f"{console.base_url}/requests/{request_id}/")
        card = page.locator(f'#requests article.card[data-request-id="{request_id}"]')
        expect(arg(card, "service")).to_have_text('"web"')

        # The old request goes (as prune_runs takes it) and a new one comes under its id, with another call.
        manage(
            console_env(console.db_path), "shell", "--no-imports", "-c", PRUNED.replace("REQUEST_ID", repr(request_id))
        )
        new = open_host_request(context, console, request_id, NEW_ARGS)
        assert new["call_digest"] != old["call_digest"]

        expect(arg(card, "service")).to_have_text('"web"')  # the tab still shows the call it drew
        card.get_by_role("button", name="Approve").click()
        error = card.locator(".card-error")
        expect(error).to_contain_text("This answer was made for a different call", timeout=EVENT_TIMEOUT_MS)
        expect(error).to_contain_text("reload it and decide on what it asks now")
        [sent] = tab.answers_sent()
        assert sent["digest"] == old["call_digest"]
        still = api_get(context, console, f"requests/{request_id}").json()
        assert (still["status"], still["args"]) == ("open", NEW_ARGS)
        card.scroll_into_view_if_needed()
        page.screenshot(path=str(SHOTS / f"stale-approval-refused-{viewport['width']}x{viewport['height']}.png"))

        page.reload()
        card = page.locator(f'#requests article.card[data-request-id="{request_id}"]')
        expect(arg(card, "service")).to_have_text('"billing"')
        expect(arg(card, "env")).to_have_text('"production"')
        page.screenshot(path=str(SHOTS / f"stale-approval-reloaded-{viewport['width']}x{viewport['height']}.png"))
        card.get_by_role("button", name="Approve").click()
        expect(page.locator("#request-decision")).to_have_text("Approved by alice", timeout=EVENT_TIMEOUT_MS)
        assert tab.answers_sent()[-1]["digest"] == new["call_digest"]
        answered = api_get(context, console, f"requests/{request_id}").json()
        assert (answered["status"], answered["answer"]["signature"]["call_digest"]) == ("answered", new["call_digest"])
        assert tab.errors == []
    finally:
        context.close()
