"""A request's own page names what binds its answer to the call, quietly, below the facts: the call's digest
(its start shown, whole when selected or focused, never wider than a phone), and once resolved the key that
signed the answer with who and when, and the call it runs as when an approval changed the arguments. An open
page shows them as another reviewer's answer arrives, without a reload, and the reloaded page says the same."""

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import SIDEWAYS_JS, call, start
from tests.support.console_page import EVENT_TIMEOUT_MS, assert_not_reloaded, mark_page

from .conftest import ARTIFACTS, LAPTOP, PHONE, signed_in_page


def waiting_request_of(page, console_server, args):
    """A refund run started from ``page``; the id of the request it waits on, once its run page lists it."""
    run_id = start(page, {"tool": "refund", "args": args})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    row = page.locator("#run-requests li.run-request")
    expect(row).to_have_count(1, timeout=10_000)
    return row.get_attribute("data-request-id")


def view_of(page, request_id):
    fetched = call(page, "GET", f"/api/v1/requests/{request_id}")
    assert fetched["status"] == 200, fetched
    return fetched["body"]


def within_the_viewport(page, selector):
    box = page.locator(selector).bounding_box()
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_page_shows_the_call_digest_then_the_signature_as_another_reviewer_approves_with_edits(
    browser, console_server, login_states, viewport
):
    name = "laptop" if viewport == LAPTOP else "phone"
    context, page, errors = signed_in_page(browser, login_states, viewport, "alice")
    bob_context, bob, _ = signed_in_page(browser, login_states, LAPTOP, "bob")
    try:
        page.goto(f"{console_server.base_url}/")
        request_id = waiting_request_of(page, console_server, {"order": f"SIG-{name}-" + "x" * 60, "amount": 70})
        digest = view_of(page, request_id)["call_digest"]
        assert digest.startswith("sha256:") and len(digest) == 71

        page.goto(f"{console_server.base_url}/requests/{request_id}/")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        mark_page(page)
        shown = page.locator("#request-call-digest")
        expect(shown).to_have_text(digest)  # the whole value is there to copy, shown by its start
        expect(shown).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / f"trail37-open-{name}.png"), full_page=True)
        assert within_the_viewport(page, "#request-call-digest")
        assert page.evaluate(SIDEWAYS_JS) <= 0
        expect(page.locator("#request-signature")).to_have_count(0)  # open: nothing signed yet

        bob.goto(f"{console_server.base_url}/")
        edited = call(
            bob, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": True, "data": {"args": {"amount": 40}}}
        )
        assert edited["status"] == 200, edited
        signature = view_of(bob, request_id)["answer"]["signature"]
        assert signature["call_digest"] == digest and signature["run_digest"] != digest

        expect(page.locator("#request-decision")).to_contain_text("Approved by bob", timeout=EVENT_TIMEOUT_MS)
        live = page.locator("#request-signature")
        expect(live).to_contain_text(f"Signed by key {signature['kid']} · bob · ")
        expect(live.locator("time")).to_have_attribute("datetime", signature["at"])
        expect(page.locator("#request-run-digest")).to_have_text(signature["run_digest"])
        expect(shown).to_have_text(digest)  # the live update left the call's digest as it was
        assert_not_reloaded(page)
        assert page.evaluate(SIDEWAYS_JS) <= 0
        assert within_the_viewport(page, "#request-run-digest")
        live_text = live.text_content()
        page.screenshot(path=str(ARTIFACTS / f"trail37-resolved-with-edits-{name}.png"), full_page=True)

        page.reload()  # the server draws the same facts
        expect(page.locator("#request-signature")).to_have_text(live_text)
        expect(page.locator("#request-call-digest")).to_have_text(digest)
        expect(page.locator("#request-run-digest")).to_have_text(signature["run_digest"])
        assert page.evaluate(SIDEWAYS_JS) <= 0
        assert errors == []
    finally:
        context.close()
        bob_context.close()


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_declined_request_is_signed_for_the_call_as_asked(browser, console_server, login_states, viewport):
    name = "laptop" if viewport == LAPTOP else "phone"
    context, page, errors = signed_in_page(browser, login_states, viewport, "alice")
    try:
        page.goto(f"{console_server.base_url}/")
        request_id = waiting_request_of(page, console_server, {"order": f"SIG-D-{name}", "amount": 9})
        declined = call(page, "POST", f"/api/v1/requests/{request_id}/answer", {"ok": False, "comment": "no"})
        assert declined["status"] == 200, declined
        page.goto(f"{console_server.base_url}/requests/{request_id}/")
        kid = view_of(page, request_id)["answer"]["signature"]["kid"]
        expect(page.locator("#request-signature")).to_contain_text(f"Signed by key {kid} · alice · ")
        expect(page.locator("#request-run-digest")).to_have_count(0)  # a refusal runs nothing else
        page.screenshot(path=str(ARTIFACTS / f"trail37-resolved-{name}.png"), full_page=True)
        assert errors == []
    finally:
        context.close()


def test_one_click_selects_the_whole_digest_to_copy(browser, console_server, login_states):
    context, page, _ = signed_in_page(browser, login_states, LAPTOP, "alice")
    try:
        page.goto(f"{console_server.base_url}/")
        request_id = waiting_request_of(page, console_server, {"order": "SIG-COPY", "amount": 3})
        page.goto(f"{console_server.base_url}/requests/{request_id}/")
        shown = page.locator("#request-call-digest")
        digest = view_of(page, request_id)["call_digest"]
        assert shown.inner_text().replace("\n", "") == digest  # shown whole, so a host can compare it with its own
        shown.click()
        assert page.evaluate("() => getSelection().toString()") == digest
        page.screenshot(path=str(ARTIFACTS / "trail37-digest-selected-laptop.png"), full_page=True)
    finally:
        context.close()
