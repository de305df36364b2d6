"""The dashboard in a real browser against a real daphne: login, live requests, cancel, two tabs, escaping, the socket's doors.

Every wait is on an event (Playwright's auto-waiting ``expect``, a response, a
socket frame); nothing sleeps. Each test finds its own run by id, so the tests do
not depend on each other's leftovers, and each leaves no open request behind.
"""

import base64
import os
import re
import socket
import time

from playwright.sync_api import expect

from tests.support.console_page import (
    EVENT_TIMEOUT_MS,
    assert_not_reloaded,
    decline,
    finished_row,
    mark_page,
    request_card,
    request_row,
    start_run_from_the_form,
)

from .conftest import ARTIFACTS, REPO, copy_artifact, free_port, login

# -- helpers ----------------------------------------------------------------------


def active_row(page, run_id):
    return page.locator(f'#runs tr[data-run-id="{run_id}"]')


def ws_handshake(server, *, origin, cookie=None):
    """A raw RFC 6455 opening handshake on /ws/console/; returns the HTTP status code of the answer."""
    key = base64.b64encode(os.urandom(16)).decode()
    lines = [
        "GET /ws/console/ HTTP/1.1",
        f"Host: {server.host}:{server.port}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        f"Origin: {origin}",
    ]
    if cookie:
        lines.append(f"Cookie: {cookie}")
    with socket.create_connection((server.host, server.port), timeout=5) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        received = b""
        while b"\r\n\r\n" not in received:
            chunk = conn.recv(4096)
            if not chunk:
                break
            received += chunk
    status_line = received.split(b"\r\n", 1)[0].decode("latin1")
    match = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
    assert match, f"not an HTTP answer to the handshake: {received[:200]!r}"
    return int(match.group(1))


OPEN_SOCKET_JS = """
() => new Promise((resolve) => {
  const ws = new WebSocket(`ws://${location.host}/ws/console/`);
  const done = (outcome) => { resolve(outcome); try { ws.close(); } catch (e) {} };
  ws.onmessage = (m) => done("message:" + JSON.parse(m.data).type);
  ws.onclose = (e) => done("closed:" + e.code);
})
"""


# -- tests ------------------------------------------------------------------------


def test_login_lands_on_the_dashboard_and_the_socket_goes_live(browser, console_server):
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{console_server.base_url}/")
        expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
        login(page, console_server, "alice")
        expect(page).to_have_title(re.compile("toolnexus console"))
        expect(page.locator(".topbar .who")).to_have_text("alice")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        expect(page.locator("#conn-status")).to_have_text("live")
    finally:
        context.close()


def test_deploy_request_appears_live_and_its_answer_finishes_the_run(open_dashboard, console_server):
    page, _ = open_dashboard("alice")
    mark_page(page)
    run_id = start_run_from_the_form(page, "deploy")

    card = request_card(page, run_id, kind="input")
    expect(card).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(card.locator(".prompt")).to_have_text("Which environment should web be deployed to?")
    expect(active_row(page, run_id).locator(".status")).to_have_text("waiting")

    card.locator("select").select_option(label="staging")
    card.locator("button[type=submit]").click()

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    row = finished_row(page, run_id)
    expect(row.locator(".status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".result")).to_have_text("deployed to staging")
    expect(active_row(page, run_id)).to_have_count(0)
    assert_not_reloaded(page)

    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#run-result")).to_have_text("deployed to staging")
    expect(page.locator("#run-status")).to_have_attribute("data-status", "succeeded")


def test_cancel_run_stops_a_crunch_within_moments(open_dashboard):
    page, _ = open_dashboard("alice")
    mark_page(page)
    run_id = start_run_from_the_form(page, "crunch", {"steps": 200, "pause": 0.1})  # 20 s if nobody cancels

    row = active_row(page, run_id)
    expect(row.locator(".status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator("td").nth(1)).to_have_text("crunch")

    pressed = time.monotonic()
    row.get_by_role("button", name="Cancel run").click()
    row.locator(".cancel-panel").get_by_role("button", name="Cancel run").click()  # the inline second yes
    finished = finished_row(page, run_id)
    expect(finished.locator(".status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    took = time.monotonic() - pressed
    print(f"cancel of run {run_id}: shown cancelled {took:.2f}s after the click")
    expect(finished.locator(".result")).to_have_text(re.compile(r"^cancelled after \d+ of 200 steps$"))
    steps_done = int(re.search(r"after (\d+) of", finished.locator(".result").inner_text()).group(1))
    assert steps_done < 200
    expect(active_row(page, run_id)).to_have_count(0)
    assert_not_reloaded(page)
    assert took < EVENT_TIMEOUT_MS / 1000, f"cancel took {took:.2f}s"


def test_an_approval_answered_in_one_tab_leaves_the_other_tab_live(open_dashboard):
    first, _ = open_dashboard("alice")
    second, _ = open_dashboard("bob")
    mark_page(second)
    run_id = start_run_from_the_form(first, "refund", {"order": "E2E-TWO-TABS", "amount": 12.5})

    prompt = "Refund 12.5 EUR on order E2E-TWO-TABS?"
    first_card = request_card(first, run_id, kind="approval")
    second_card = request_card(second, run_id, kind="approval")
    expect(first_card.locator(".prompt")).to_have_text(prompt, timeout=EVENT_TIMEOUT_MS)
    expect(second_card.locator(".prompt")).to_have_text(prompt, timeout=EVENT_TIMEOUT_MS)

    first_card.get_by_role("button", name="Approve").click()

    # The other tab's card stays, as a tombstone that says who answered it.
    expect(second_card).to_have_class(re.compile(r"\bclosed\b"), timeout=EVENT_TIMEOUT_MS)
    expect(second_card.locator(".tombstone .card-error")).to_have_text(
        re.compile(r"^No longer open: Approved by alice")
    )
    expect(request_row(second, run_id).locator(".row-state")).to_have_text(re.compile(r"^Approved by alice"))
    expect(finished_row(second, run_id).locator(".result")).to_have_text(
        "refunded 12.5 EUR on order E2E-TWO-TABS", timeout=EVENT_TIMEOUT_MS
    )
    expect(first_card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert_not_reloaded(second)


def test_a_prompt_with_markup_is_shown_as_text(open_dashboard, console_server):
    payload = "<img src=x onerror=alert(1)>"
    page, tab = open_dashboard("alice")
    run_id = start_run_from_the_form(page, "refund", {"order": payload})

    def check_escaped():
        card = request_card(page, run_id, kind="approval")
        expect(card.locator(".prompt")).to_have_text(f"Refund 25.0 EUR on order {payload}?", timeout=EVENT_TIMEOUT_MS)
        # The run's args (the request's data only repeats them, so it is not listed twice).
        expect(card.locator('.tool-call .arg[data-arg="order"] .arg-value')).to_have_text(f'"{payload}"')
        expect(active_row(page, run_id).locator(".args")).to_contain_text(payload)
        expect(page.locator("#requests img")).to_have_count(0)
        expect(page.locator("#runs img")).to_have_count(0)
        return card

    check_escaped()  # arrived as a live socket event
    page.reload()  # and again from the server-rendered snapshot plus the socket's snapshot
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    check_escaped()

    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#run-detail pre.json")).to_contain_text(payload)
    expect(page.locator("main img")).to_have_count(0)
    page.goto(f"{console_server.base_url}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    decline(request_card(page, run_id))
    # The finished table says what became of the run in words, as text.
    finished = finished_row(page, run_id)
    expect(finished.locator(".result")).to_have_text("Declined by alice", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#recent-runs img")).to_have_count(0)
    assert tab.dialogs == [], f"the markup ran: {tab.dialogs}"


def test_the_socket_refuses_strangers_and_foreign_origins(browser, console_server, open_dashboard):
    own_origin = console_server.base_url
    foreign_origin = f"http://127.0.0.1:{free_port()}"

    # A signed-in page on the console's origin gets its snapshot: the control case.
    page, _ = open_dashboard("alice")
    assert page.evaluate(OPEN_SOCKET_JS) == "message:snapshot"

    # Without a login the browser's socket is closed during the handshake.
    stranger = browser.new_context()
    try:
        anonymous = stranger.new_page()
        anonymous.goto(f"{console_server.base_url}/accounts/login/")
        outcome = anonymous.evaluate(OPEN_SOCKET_JS)
        assert outcome.startswith("closed:"), outcome
    finally:
        stranger.close()
    assert ws_handshake(console_server, origin=own_origin) == 403

    # With a valid session, the console's own origin is upgraded and any other port's is refused.
    session = next(c for c in page.context.cookies() if c["name"] == "sessionid")
    cookie = f"sessionid={session['value']}"
    assert ws_handshake(console_server, origin=own_origin, cookie=cookie) == 101
    assert ws_handshake(console_server, origin=foreign_origin, cookie=cookie) == 403
    assert ws_handshake(console_server, origin="null", cookie=cookie) == 403


def test_dashboard_screenshot_with_open_requests_and_an_active_run(open_dashboard):
    page, _ = open_dashboard("alice")
    deploy_id = start_run_from_the_form(page, "deploy", {"service": "billing-api"})
    refund_id = start_run_from_the_form(page, "refund", {"order": "A-2048", "amount": 49.9, "currency": "EUR"})
    crunch_id = start_run_from_the_form(page, "crunch", {"steps": 600, "pause": 0.1})

    expect(request_row(page, deploy_id, kind="input")).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    refund_card = request_card(page, refund_id, kind="approval")  # picked: the detail pane shows it
    expect(refund_card.locator(".prompt")).to_have_text("Refund 49.9 EUR on order A-2048?")
    expect(active_row(page, crunch_id).locator(".status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#request-count")).to_have_text(re.compile(r"^[1-9]\d*$"))

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("UPDATE_README_SCREENSHOT") == "1":  # `make screenshot` refreshes the README's picture
        copy_artifact(shot, REPO / "docs" / "dashboard.png")

    # Leave nothing running or waiting for the next test.
    active_row(page, crunch_id).get_by_role("button", name="Cancel run").click()
    active_row(page, crunch_id).locator(".cancel-panel").get_by_role("button", name="Cancel run").click()
    expect(finished_row(page, crunch_id).locator(".status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    decline(refund_card)
    decline(request_card(page, deploy_id))
