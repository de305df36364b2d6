"""A request's own page in Chromium against a real daphne: readable on a laptop (1440x900) and a phone
(390x844), open and resolved, and its plain form answers through the one door."""

from playwright.sync_api import expect

from .conftest import ARTIFACTS
from .test_decisions_visible import PHONE, SIDEWAYS_JS, open_run_page, start, the_request

LAPTOP = {"width": 1440, "height": 900}


def request_of_new_refund(page, server, order):
    """Start a refund from ``page`` and return its request's id, read off the run page."""
    run_id = start(page, {"tool": "refund", "args": {"order": order, "amount": 900}})
    open_run_page(page, server, run_id)
    _, request_id = the_request(page)
    return run_id, request_id


def assert_fits(page, width, what):
    assert page.evaluate(SIDEWAYS_JS) <= 0, f"{what} scrolls sideways at {width} px"


def signed_in(open_dashboard, username, viewport):
    page, _ = open_dashboard(username)
    page.set_viewport_size(viewport)
    return page


def test_on_a_laptop_the_page_shows_the_request_and_its_form_approves_it(open_dashboard, console_server):
    alice = signed_in(open_dashboard, "alice", LAPTOP)
    run_id, request_id = request_of_new_refund(alice, console_server, "E2E-RP1")
    alice.goto(f"{console_server.base_url}/requests/{request_id}/")
    expect(alice.locator("#request-prompt")).to_have_text("Refund 900 EUR on order E2E-RP1?")
    expect(alice.locator("#request-decision")).to_have_text("Open: waiting for an answer.")
    expect(alice.locator("#request-run")).to_contain_text(f"run {run_id}, started by alice")
    expect(alice.locator("#request-args")).to_contain_text('"order": "E2E-RP1"')
    expect(alice.locator("#answer-approve")).to_be_in_viewport()
    assert_fits(alice, LAPTOP["width"], "the open request's page")
    alice.screenshot(path=str(ARTIFACTS / "request-page-open-desktop.png"), full_page=True)

    alice.fill("#answer-comment", "fine by me")
    alice.click("#answer-approve")
    expect(alice.locator("#request-decision")).to_have_text("Approved by alice")
    expect(alice.locator("#request-comment")).to_have_text("fine by me")
    expect(alice).to_have_url(f"{console_server.base_url}/requests/{request_id}/")  # redirected: a reload is a GET
    expect(alice.locator("#answer-form")).to_have_count(0)
    assert_fits(alice, LAPTOP["width"], "the resolved request's page")

    alice.locator("#request-run a").click()  # the permalink links to its run, whose page agrees
    expect(alice.locator("#run-decision")).to_have_text("Approved by alice")


def test_on_a_phone_the_page_fits_open_and_resolved_and_declines_with_a_reason(open_dashboard, console_server):
    bob, alice = signed_in(open_dashboard, "bob", LAPTOP), signed_in(open_dashboard, "alice", PHONE)
    _, request_id = request_of_new_refund(bob, console_server, "E2E-RP2-" + "long" * 20)
    alice.goto(f"{console_server.base_url}/requests/{request_id}/")
    expect(alice.locator("#request-prompt")).to_contain_text("Refund 900 EUR on order E2E-RP2-")
    assert_fits(alice, PHONE["width"], "the open request's page")
    decline = alice.locator("#answer-decline")
    decline.scroll_into_view_if_needed()
    box = decline.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"] and box["height"] >= 44
    alice.screenshot(path=str(ARTIFACTS / "request-page-open-phone.png"), full_page=True)

    alice.fill("#answer-comment", "too large")
    decline.click()
    expect(alice.locator("#request-decision")).to_have_text("Declined by alice: too large")
    expect(alice.locator("#request-decided-by")).to_have_text("alice")
    assert_fits(alice, PHONE["width"], "the resolved request's page")
    alice.screenshot(path=str(ARTIFACTS / "request-page-declined-phone.png"), full_page=True)
