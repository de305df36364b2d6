"""Drafts in Chromium: what a reviewer typed into a card and has not sent comes back after a reload and
stays through a reconnect, marked "Restored what you typed at …"; it is kept in the tab's sessionStorage
only, per user and request, and goes once the console takes the answer, when the request closes (live or
while the page was away), and at logout; a request whose schema marks a field secret keeps only the
comment; one reviewer's drafts stay under 64 KiB, the oldest dropped first."""

import json
import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import call, start
from tests.support.console_page import DROP_SOCKET_JS, EVENT_TIMEOUT_MS, host_row, pick, request_row
from tests.support.socket_gate import ConsoleSocketGate

from .conftest import ARTIFACTS, LAPTOP, PHONE, login

MOST_BYTES = 64 * 1024
DRAFTS_JS = """(user) => JSON.parse(sessionStorage.getItem("toolnexus.drafts." + user) || "{}")"""
STORED_BYTES_JS = (
    """(user) => new TextEncoder().encode(sessionStorage.getItem("toolnexus.drafts." + user) || "").length"""
)
ISO_INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")  # as <time datetime> holds it
DRAFT_KEYS_JS = """() => Object.keys(sessionStorage).filter((key) => key.startsWith("toolnexus.drafts."))"""


@pytest.fixture
def signed_in(browser, console_server, login_states):
    """``signed_in(LAPTOP)``: a fresh context of that size signed in as alice, on a live dashboard."""
    contexts, errors = [], []

    def open_at(viewport, username="alice"):
        touch = viewport == PHONE
        context = browser.new_context(
            viewport=viewport, is_mobile=touch, has_touch=touch, storage_state=login_states[username]
        )
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"{console_server.base_url}/")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        return page

    yield open_at
    for context in contexts:
        context.close()
    assert not errors, f"uncaught script errors: {errors}"


def open_host_request(page, request_id, **fields):
    body = {"id": request_id, "kind": "approval", "prompt": f"Approve {request_id}?", **fields}
    opened = call(page, "POST", "/api/v1/requests", body)
    assert opened["status"] == 201, opened
    return pick(page, host_row(page, request_id))


def live(page):
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live", timeout=EVENT_TIMEOUT_MS)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_half_typed_form_and_comment_come_back_after_a_reload_and_stay_through_a_reconnect(signed_in, viewport):
    page = signed_in(viewport)
    run_id = start(page, {"tool": "signup", "args": {"company": "Draft Co"}})
    card = pick(page, request_row(page, run_id, "input"))
    request_id = card.get_attribute("data-request-id")
    card.locator('input[name="name"]').fill("Ada Lovelace")
    card.locator('input[name="seats"]').fill("12")
    card.get_by_label("apac", exact=True).check()
    card.locator('select[name="plan"]').select_option(label="Enterprise")
    card.get_by_label("Comment").fill("Checking the seats with sales first")

    page.reload()  # the picked request comes back from the URL, and with it what was typed
    live(page)
    card = page.locator(f'#request-detail article.card[data-request-id="{request_id}"]')
    expect(card.locator('input[name="name"]')).to_have_value("Ada Lovelace")
    expect(card.locator('input[name="seats"]')).to_have_value("12")
    expect(card.get_by_label("apac", exact=True)).to_be_checked()
    expect(card.locator('select[name="plan"] option:checked')).to_have_text("Enterprise")
    expect(card.get_by_label("Comment")).to_have_value("Checking the seats with sales first")
    note = card.locator(".draft-note")
    expect(note).to_contain_text("Restored what you typed at ")
    expect(note.locator("time")).to_have_attribute("datetime", ISO_INSTANT)
    expect(note.get_by_role("button", name="Discard")).to_be_visible()
    name = "laptop" if viewport == LAPTOP else "phone"
    card.scroll_into_view_if_needed()
    note.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"drafts-restored-{name}.png"))

    page.evaluate(DROP_SOCKET_JS)
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "offline")
    live(page)
    expect(card.locator('input[name="name"]')).to_have_value("Ada Lovelace")
    expect(card.get_by_label("Comment")).to_have_value("Checking the seats with sales first")
    stored = page.evaluate(DRAFTS_JS, "alice")[request_id]
    assert stored["values"]["comment"] == "Checking the seats with sales first"
    assert stored["values"]["f:name"] == "Ada Lovelace"

    # Discard puts back what the request asked for and forgets the draft.
    note.get_by_role("button", name="Discard").click()
    expect(card.locator('input[name="name"]')).to_have_value("")
    expect(card.locator('input[name="seats"]')).to_have_value("5")
    expect(card.get_by_label("Comment")).to_have_value("")
    expect(note).to_have_count(0)
    assert page.evaluate(DRAFTS_JS, "alice") == {}
    card.get_by_role("button", name="Withdraw request").click()
    card.get_by_role("button", name="Withdraw request").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)


def test_sending_the_answer_clears_its_draft(signed_in):
    page = signed_in(LAPTOP)
    card = open_host_request(page, "draft-sent-1", tool="rotate")
    card.get_by_label("Comment").fill("rotating now")
    request_id = "draft-sent-1"
    assert page.evaluate(DRAFTS_JS, "alice")[request_id]["values"] == {"comment": "rotating now"}

    page.reload()
    live(page)
    card = page.locator(f'#request-detail article.card[data-request-id="{request_id}"]')
    expect(card.get_by_label("Comment")).to_have_value("rotating now")
    card.get_by_role("button", name="Approve").click()
    expect(host_row(page, request_id)).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert page.evaluate(DRAFTS_JS, "alice") == {}
    page.reload()
    live(page)
    assert page.evaluate(DRAFTS_JS, "alice") == {}
    expect(page.locator(".draft-note")).to_have_count(0)


def test_a_request_someone_else_closes_clears_the_draft_live_and_while_away(signed_in):
    page = signed_in(LAPTOP)
    bob = signed_in(LAPTOP, "bob")
    card = open_host_request(page, "draft-closed-1", tool="rotate")
    card.get_by_label("Comment").fill("about to say no")
    assert "draft-closed-1" in page.evaluate(DRAFTS_JS, "alice")

    # Live: bob approves it; alice's card becomes a tombstone that keeps the text, and the draft is gone.
    answered = call(bob, "POST", "/api/v1/requests/draft-closed-1/answer", {"ok": True})
    assert answered["status"] == 200, answered
    expect(card.locator(".tombstone")).to_contain_text("Approved by bob", timeout=EVENT_TIMEOUT_MS)
    expect(card.get_by_label("Comment")).to_have_value("about to say no")
    assert "draft-closed-1" not in page.evaluate(DRAFTS_JS, "alice")

    # While away: a draft of a request that closes while the socket is down goes with the next snapshot,
    # and one of a request merely not shown in this view (a search that leaves it out) stays.
    kept = open_host_request(page, "draft-kept-1", tool="rotate")
    kept.get_by_label("Comment").fill("still open, only filtered out")
    card = open_host_request(page, "draft-closed-2", tool="rotate")
    card.get_by_label("Comment").fill("typed before the socket dropped")
    assert set(page.evaluate(DRAFTS_JS, "alice")) == {"draft-kept-1", "draft-closed-2"}
    gate = ConsoleSocketGate(page)
    page.goto(page.url.split("?")[0] + "?q=draft-closed-2")
    live(page)
    gate.shut()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "offline")
    call(bob, "POST", "/api/v1/requests/draft-closed-2/answer", {"ok": False, "reason": "declined"})
    gate.open()
    live(page)
    page.wait_for_function("() => !sessionStorage.getItem('toolnexus.drafts.alice')?.includes('draft-closed-2')")
    assert set(page.evaluate(DRAFTS_JS, "alice")) == {"draft-kept-1"}
    call(page, "POST", "/api/v1/requests/draft-kept-1/cancel", {})


def test_a_field_a_schema_marks_secret_is_never_stored(signed_in):
    page = signed_in(LAPTOP)
    secret_schema = {"type": "object", "properties": {"pin": {"type": "string", "writeOnly": True}}}
    card = open_host_request(
        page, "draft-secret-1", kind="confirmation", prompt="Confirm with your PIN?", data={"schema": secret_schema}
    )
    card.locator("textarea.json-reply").fill('{"pin": "4711"}')
    card.get_by_label("Comment").fill("asked them for the PIN")
    stored = json.dumps(page.evaluate("() => ({...sessionStorage})"))
    assert "4711" not in stored
    assert page.evaluate(DRAFTS_JS, "alice")["draft-secret-1"]["values"] == {"comment": "asked them for the PIN"}
    page.reload()
    live(page)
    card = page.locator('#request-detail article.card[data-request-id="draft-secret-1"]')
    expect(card.get_by_label("Comment")).to_have_value("asked them for the PIN")
    expect(card.locator("textarea.json-reply")).to_have_value("{}")
    call(page, "POST", "/api/v1/requests/draft-secret-1/cancel", {})


def test_logging_out_clears_the_drafts(browser, console_server):
    context = browser.new_context(viewport=LAPTOP)  # its own login: logging out ends only this session
    try:
        page = context.new_page()
        login(page, console_server, "alice")
        live(page)
        card = open_host_request(page, "draft-logout-1", tool="rotate")
        card.get_by_label("Comment").fill("not for the next person at this desk")
        card.get_by_role("button", name="Decline").click()
        card.get_by_label("Reason for declining").fill("a reason typed too")
        assert page.evaluate(DRAFTS_JS, "alice")["draft-logout-1"]["reason"] == "a reason typed too"
        page.get_by_role("button", name="Log out").click()
        expect(page).to_have_url(f"{console_server.base_url}/accounts/login/")
        assert page.evaluate(DRAFT_KEYS_JS) == []
        login(page, console_server, "alice")
        expect(host_row(page, "draft-logout-1")).to_have_count(1)
        call(page, "POST", "/api/v1/requests/draft-logout-1/cancel", {})
    finally:
        context.close()


def test_one_reviewers_drafts_stay_under_64_kib_the_oldest_dropped_first(signed_in):
    page = signed_in(LAPTOP)
    ids = [f"draft-cap-{n}" for n in range(3)]
    for request_id in ids:
        card = open_host_request(page, request_id, tool="rotate")
        card.get_by_label("Comment").fill(f"{request_id}: " + "x" * 30_000)
    # Three drafts of ~30 KB do not fit in 64 KiB: the first one typed went.
    assert sorted(page.evaluate(DRAFTS_JS, "alice")) == ids[1:]
    assert page.evaluate(STORED_BYTES_JS, "alice") <= MOST_BYTES

    # One draft alone over the limit is not kept at all (the others stay), and the card says so.
    card.get_by_label("Comment").fill("y" * 70_000)
    expect(card.locator(".draft-too-long")).to_contain_text("Too long to keep over a reload (more than 64 KiB)")
    assert sorted(page.evaluate(DRAFTS_JS, "alice")) == [ids[1]]
    card.get_by_label("Comment").fill("short again")
    expect(card.locator(".draft-too-long")).to_have_count(0)

    page.reload()
    live(page)
    for request_id, comment in zip(ids, ["", f"{ids[1]}: " + "x" * 30_000, "short again"], strict=True):
        card = pick(page, host_row(page, request_id))
        expect(card.get_by_label("Comment")).to_have_value(comment)
    for request_id in ids:
        call(page, "POST", f"/api/v1/requests/{request_id}/cancel", {})


def test_a_restored_edit_of_an_approval_still_asks_with_the_diff(signed_in):
    page = signed_in(LAPTOP)
    run_id = start(page, {"tool": "refund", "args": {"order": "DRAFT-EDIT", "amount": 40.5}})
    card = pick(page, request_row(page, run_id, "approval"))
    request_id = card.get_attribute("data-request-id")
    card.locator('input[name="amount"]').fill("15.5")
    page.reload()
    live(page)
    card = page.locator(f'#request-detail article.card[data-request-id="{request_id}"]')
    expect(card.locator('input[name="amount"]')).to_have_value("15.5")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator("ul.diff li")).to_have_text(["amount 40.5 → 15.5"])  # never sent on the first yes
    assert request_id in page.evaluate(DRAFTS_JS, "alice")
    card.get_by_role("button", name="Approve with this change").click()
    expect(host_row(page, request_id)).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert page.evaluate(DRAFTS_JS, "alice") == {}


def test_a_draft_typed_on_a_runs_page_comes_back_after_a_reload(signed_in, console_server):
    page = signed_in(PHONE)
    questions = [{"question": "Which size?", "options": ["S", "M"]}, {"question": "Anything else?", "options": []}]
    run_id = start(page, {"tool": "question", "args": {"questions": questions}})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    card = page.locator("#requests article.card")
    card.get_by_label("M", exact=True).check()
    card.get_by_label("Other answer to question 2").fill("gift wrap, please")
    page.reload()
    live(page)
    expect(card.get_by_label("M", exact=True)).to_be_checked()
    expect(card.get_by_label("Other answer to question 2")).to_have_value("gift wrap, please")
    expect(card.locator(".draft-note")).to_contain_text("Restored what you typed at ")
    card.get_by_role("button", name="Submit").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert page.evaluate(DRAFTS_JS, "alice") == {}
