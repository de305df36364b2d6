"""A request's permalink in Chromium: the inbox's card on its own page; decline with a reason from it, then
the page says who and why; readable at 390x844 without sideways scrolling."""

from playwright.sync_api import expect

from tests.support.browser_api import SIDEWAYS_JS, start

from .conftest import PHONE


def open_request(page, server, run_id):
    """The id of the request run ``run_id`` waits on, once its run page lists it (drawn or added live)."""
    page.goto(f"{server.base_url}/runs/{run_id}/")
    row = page.locator("#run-requests li.run-request")
    expect(row).to_have_count(1, timeout=10_000)
    return row.get_attribute("data-request-id")


def test_declining_from_the_permalink_with_a_reason_then_shows_the_decision(open_dashboard, console_server):
    page, _ = open_dashboard("alice")
    run_id = start(page, {"tool": "refund", "args": {"order": "E2E-P1", "amount": 70}})
    request_id = open_request(page, console_server, run_id)
    page.goto(f"{console_server.base_url}/requests/{request_id}/")
    # The inbox's card, on its own page: the call first, then what was asked.
    card = page.locator(f'#requests article.card[data-request-id="{request_id}"]')
    expect(card.locator(".prompt")).to_have_text("Refund 70 EUR on order E2E-P1?")
    expect(card.locator('.tool-call .arg[data-arg="order"] .arg-value')).to_have_text('"E2E-P1"')
    card.get_by_role("button", name="Decline").click()
    card.get_by_label("Reason for declining").fill("order was cancelled")
    card.locator(".decline-panel").get_by_role("button", name="Decline").click()
    expect(page.locator("#request-decision")).to_have_text("Declined by alice: order was cancelled")
    expect(page.locator("#request-detail > .prompt")).to_have_text("Refund 70 EUR on order E2E-P1?")
    expect(page.locator("#request-run")).to_have_attribute("href", f"/runs/{run_id}/")


def test_the_permalink_fits_a_phone_and_approves_with_a_tap(browser, console_server, login_states):
    context = browser.new_context(viewport=PHONE, storage_state=login_states["alice"], has_touch=True, is_mobile=True)
    try:
        page = context.new_page()
        page.goto(f"{console_server.base_url}/")
        run_id = start(page, {"tool": "refund", "args": {"order": "E2E-P2-" + "x" * 80, "amount": 5}})
        request_id = open_request(page, console_server, run_id)
        page.goto(f"{console_server.base_url}/requests/{request_id}/")
        expect(page.get_by_role("button", name="Approve")).to_be_visible()
        assert page.evaluate(SIDEWAYS_JS) <= 0
        box = page.get_by_role("button", name="Approve").bounding_box()
        assert box["height"] >= 44 and box["width"] >= 44
        page.get_by_role("button", name="Approve").tap()
        expect(page.locator("#request-decision")).to_have_text("Approved by alice")
        assert page.evaluate(SIDEWAYS_JS) <= 0
    finally:
        context.close()
