"""Every kind of request on the dashboard, in a real browser against a real daphne.

input forms (server-described fields, raw values, per-field errors), editable
approvals, the builtin question tool, authorization links, credential refusals,
unknown kinds with a JSON reply, expiry (with and without a page open), the
countdown, the keyboard and notifications.

Waits are Playwright's auto-waiting ``expect`` with explicit timeouts. The one
exception is the expiry test with no page open: with nothing to wait on but the
API, it polls ``GET /api/v1/runs/<id>`` in a loop bounded at 15 s.
"""

import json
import re
import time
from datetime import UTC, datetime, timedelta

from playwright.sync_api import expect

from tests.support.console_page import (
    EVENT_TIMEOUT_MS,
    api_get,
    api_post,
    armed,
    decline,
    expect_result,
    field_error,
    finished_row,
    open_card,
    pick,
    record_focus,
    request_in,
    request_row,
    start_run,
)

PAYLOAD = "<img src=x onerror=alert(1)>"


# -- page helpers -------------------------------------------------------------------------


def blur_and_scroll_to_top(page):
    page.evaluate("document.activeElement.blur(); window.scrollTo(0, 0)")
    assert page.evaluate("window.scrollY === 0 && document.activeElement === document.body")


def answered(tab):
    return [(f["request"], f["ok"], f.get("reason")) for f in tab.answers_sent()]


# -- tests --------------------------------------------------------------------------------


def test_input_form_shows_each_field_error_keeps_the_values_then_succeeds(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_card(tab, console_server, "signup", {"company": "E2E Co"}, kind="input")
    request_id = card.get_attribute("data-request-id")

    # The form the server described, prefilled with the schema's defaults.
    expect(card.locator('input[name="name"]')).to_have_attribute("type", "text")
    expect(card.locator('input[name="email"]')).to_have_attribute("type", "email")
    expect(card.locator('input[name="seats"]')).to_have_value("5")
    expect(card.locator('input[name="start"]')).to_have_attribute("type", "date")
    expect(card.locator('select[name="plan"] option:checked')).to_have_text("Team")
    expect(card.locator('input[name="regions"]')).to_have_count(3)
    expect(card.locator('input[name="invoice"]')).to_be_checked()

    card.locator('input[name="name"]').fill("A")
    card.locator('input[name="email"]').fill("not-an-email")
    card.locator('input[name="seats"]').fill("0")
    card.get_by_role("button", name="Submit").click()

    expect(field_error(card, "name")).to_have_text("Enter at least 2 characters.", timeout=EVENT_TIMEOUT_MS)
    expect(field_error(card, "email")).to_have_text("Enter a valid email address.")
    expect(field_error(card, "seats")).to_have_text("Enter a number greater than or equal to 1.")
    expect(field_error(card, "regions")).to_have_text("This field is required.")
    expect(field_error(card, "plan")).to_have_text("")
    # Each message sits in its own field, and nothing typed was lost.
    expect(card.locator('.field[data-field-name="email"] .field-error')).to_have_text("Enter a valid email address.")
    expect(card.locator('input[name="name"]')).to_have_value("A")
    expect(card.locator('input[name="email"]')).to_have_value("not-an-email")
    expect(card.locator('input[name="seats"]')).to_have_value("0")
    expect(card.get_by_role("button", name="Submit")).to_be_enabled()
    assert request_in(page.context, console_server, request_id, "open") is not None

    card.locator('input[name="name"]').fill("Ada Lovelace")
    card.locator('input[name="email"]').fill("ada@example.com")
    card.locator('input[name="seats"]').fill("7")
    card.locator('input[name="start"]').fill("2030-01-31")
    card.locator('select[name="plan"]').select_option(label="Enterprise")
    card.get_by_label("eu", exact=True).check()
    card.get_by_label("apac", exact=True).check()
    card.get_by_role("button", name="Submit").click()

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect_result(
        page,
        run_id,
        "signed up E2E Co: Ada Lovelace <ada@example.com>, 7 seats on enterprise in eu/apac",
        status="succeeded",
    )
    answered = request_in(page.context, console_server, request_id, "answered")
    assert answered["answer"]["data"] == {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "seats": 7,
        "start": "2030-01-31",
        "plan": "enterprise",
        "regions": ["eu", "apac"],
        "invoice": True,
    }
    # The browser sent raw form values, never typed data.
    sent = [f for f in tab.answers_sent() if f["request"] == request_id]
    assert [("form" in f, "data" in f) for f in sent] == [(True, False), (True, False)]
    assert sent[-1]["form"]["seats"] == "7" and sent[-1]["form"]["invoice"] is True


def test_approval_with_an_edited_amount_then_a_decline_with_a_comment(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_card(tab, console_server, "refund", {"order": "E2E-EDIT", "amount": 40.0}, kind="approval")
    # The call is listed, labelled; the editable amount is a field holding the current value.
    expect(card.locator('.tool-call .arg[data-arg="order"]')).to_contain_text("E2E-EDIT")
    expect(card.locator('.tool-data .arg[data-arg="currency"]')).to_contain_text("EUR")  # a default: the tool's data
    amount = card.locator('input[name="amount"]')
    expect(amount).to_have_value("40.0")
    amount.fill("15.5")
    card.get_by_label("Comment").fill("partial refund")
    card.get_by_role("button", name="Approve").click()
    # The change is shown as a diff, and sent only on a second yes.
    expect(card.locator("ul.diff li")).to_have_text(["amount 40.0 → 15.5"])
    assert tab.answers_sent() == []
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    told = " (a reviewer changed amount 40 → 15.5 before approving; the call ran with the changed values)"
    expect_result(page, run_id, "refunded 15.5 EUR on order E2E-EDIT (partial refund)" + told, status="succeeded")

    run_id, card = open_card(tab, console_server, "refund", {"order": "E2E-DECLINE"}, kind="approval")
    request_id = card.get_attribute("data-request-id")
    card.get_by_label("Comment").fill("not eligible")
    decline(card)
    expect_result(page, run_id, "Declined by alice: not eligible", status="declined")
    declined = request_in(page.context, console_server, request_id, "declined")
    assert declined["comment"] == "not eligible"
    assert declined["answer"]["ok"] is False and declined["answer"]["reason"] == "declined"


def test_question_options_and_other_text_come_back_in_order(reviewer, console_server):
    tab = reviewer("alice")
    questions = [
        {"question": "Which colour?", "header": "Colour", "options": ["red", "green"]},
        {"question": "Which size?", "options": ["S", "M"]},
        {"question": "Toppings?", "options": ["ham", "olives", "basil"], "multiple": True},
    ]
    run_id, card = open_card(tab, console_server, "question", {"questions": questions}, kind="question")
    blocks = card.locator("fieldset.question")
    expect(blocks).to_have_count(3)
    first, second, third = blocks.nth(0), blocks.nth(1), blocks.nth(2)
    expect(first.locator(".q-header")).to_have_text("Colour")
    expect(first.locator(".q-text")).to_have_text("Which colour?")
    expect(first.locator('input[type="radio"]')).to_have_count(3)  # two options and Other
    expect(third.locator('input[type="checkbox"]')).to_have_count(4)
    for block in (first, second, third):
        expect(block.locator(".other-text")).to_have_count(1)

    # Nothing chosen: the server's errors land under each question.
    card.get_by_role("button", name="Submit").click()
    expect(field_error(first, "q0")).to_have_text("Answer this question.", timeout=EVENT_TIMEOUT_MS)
    expect(field_error(second, "q1")).to_have_text("Answer this question.")
    expect(field_error(third, "q2")).to_have_text("Choose at least one answer.")

    first.locator('input[value="green"]').check()
    second.locator('input[value="S"]').check()
    second.locator(".other-text").fill("XL, please")  # typing in Other chooses Other
    expect(second.locator(".other-choice")).to_be_checked()
    expect(second.locator('input[value="S"]')).not_to_be_checked()
    third.locator('input[value="ham"]').check()
    third.locator('input[value="basil"]').check()
    third.locator(".other-text").fill("chili")
    card.get_by_role("button", name="Submit").click()

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    result = finished_row(tab.page, run_id).locator(".result")
    expect(result).to_have_text(re.compile(r"^\{"), timeout=EVENT_TIMEOUT_MS)
    assert json.loads(result.inner_text()) == {"answers": [["green"], ["XL, please"], ["ham", "basil", "chili"]]}


def test_authorization_link_is_safe_and_a_javascript_url_is_only_text(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_card(tab, console_server, "balance", {"account": "globex"}, kind="authorization")
    expect(card.locator(".host")).to_have_text("bank.example.com")
    link = card.locator("a.auth-link")
    expect(link).to_have_attribute("href", "https://bank.example.com/oauth/authorize?account=globex")
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    card.get_by_role("button", name="Done").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect_result(page, run_id, "balance of globex: 87.00 EUR", status="succeeded")

    run_id, card = open_card(tab, console_server, "phish", kind="authorization")
    expect(card.locator("code.unsafe-url")).to_have_text("javascript:alert(document.cookie)")
    expect(card.locator(".host")).to_have_count(0)
    expect(card.locator("a.auth-link")).to_have_count(0)
    expect(page.locator('a[href^="javascript" i]')).to_have_count(0)
    hrefs = page.eval_on_selector_all("a", "links => links.map((a) => a.getAttribute('href') || '')")
    assert not [h for h in hrefs if "javascript" in h.lower()], hrefs
    decline(card)
    expect_result(page, run_id, "Declined by alice", status="declined")
    assert tab.dialogs == []


def test_a_request_for_a_credential_offers_no_inputs_and_can_only_be_declined(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_card(tab, console_server, "ask_secret", {"service": "billing-db"}, kind="input")
    request_id = card.get_attribute("data-request-id")
    expect(card.locator(".credentials")).to_contain_text("never collects credentials")
    expect(card.locator(".credentials")).to_contain_text('"password"')
    expect(card.locator(".prompt")).to_have_text("Enter the billing-db password")
    expect(card.locator("input, textarea, select")).to_have_count(0)
    expect(card.locator("button")).to_have_text(["Decline", "Withdraw request"])

    # The keyboard's A cannot answer it either; the server refuses an ok answer too.
    card.focus()
    page.keyboard.press("a")
    expect(card.locator(".card-error")).to_have_text("This request can only be declined or cancelled.")
    refused = api_post(
        page.context, console_server, f"requests/{request_id}/answer", {"ok": True, "data": {"password": "hunter2"}}
    )
    assert refused.status == 400, refused.text()
    assert "credentials" in refused.json()["message"]
    assert tab.answers_sent() == []

    decline(card)
    expect_result(page, run_id, "Declined by alice", status="declined")


def test_typed_values_survive_a_dropped_socket_and_the_fresh_snapshot(reviewer, console_server):
    routes = []

    def pass_through(ws):
        routes.append(ws.connect_to_server())  # forwards both ways

    tab = reviewer("alice", before_goto=lambda page: page.route_web_socket(re.compile(r"/ws/console/$"), pass_through))
    page = tab.page
    _, card = open_card(tab, console_server, "signup", {"company": "E2E Resync"}, kind="input")
    card.locator('input[name="name"]').fill("Grace Hopper")
    card.get_by_label("us", exact=True).check()
    card.get_by_label("Comment").fill("half typed")
    card.get_by_role("button", name="Submit").click()
    expect(field_error(card, "email")).to_have_text("This field is required.", timeout=EVENT_TIMEOUT_MS)

    routes[-1].close()  # the server side goes away; the page reconnects and gets a snapshot
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "offline")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live", timeout=EVENT_TIMEOUT_MS)
    assert len(routes) == 2
    expect(card).to_have_count(1)
    expect(card.locator('input[name="name"]')).to_have_value("Grace Hopper")
    expect(card.get_by_label("us", exact=True)).to_be_checked()
    expect(card.get_by_label("Comment")).to_have_value("half typed")
    expect(field_error(card, "email")).to_have_text("This field is required.")
    card.get_by_role("button", name="Withdraw request").click()  # asks first
    card.get_by_role("button", name="Withdraw request").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)


def test_an_unknown_kind_gets_a_json_reply_editor(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_card(tab, console_server, "confirm", {"action": "rotate the logs"}, kind="confirmation")
    request_id = card.get_attribute("data-request-id")
    expect(card.locator('.tool-call .arg[data-arg="action"]')).to_contain_text("rotate the logs")
    expect(card.locator('.tool-data .arg[data-arg="risk"]')).to_contain_text("low")  # what else the tool sent
    editor = card.locator("textarea.json-reply")
    expect(editor).to_have_value("{}")
    approve = card.get_by_role("button", name="Approve")

    editor.fill('{"confirmed": tru')
    approve.click()
    expect(card.locator(".json-error")).to_contain_text("not valid JSON")
    editor.fill("[1, 2]")
    approve.click()
    expect(card.locator(".json-error")).to_contain_text("must be a JSON object")
    expect(editor).to_have_value("[1, 2]")
    assert tab.answers_sent() == []  # nothing went to the console
    assert request_in(page.context, console_server, request_id, "open") is not None

    editor.fill('{"confirmed": true, "by": "e2e"}')
    approve.click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect_result(page, run_id, 'confirmed rotate the logs with {"by": "e2e", "confirmed": true}', status="succeeded")
    assert [f["data"] for f in tab.answers_sent()] == [{"confirmed": True, "by": "e2e"}]


def test_expiry_with_no_page_open_declines_the_run_and_refuses_a_late_answer(browser, console_server, login_states):
    # A browser context with cookies and no page at all: no dashboard is watching.
    context = browser.new_context(storage_state=login_states["alice"])
    try:
        assert context.pages == []
        created = api_post(context, console_server, "runs", {"tool": "expiring", "args": {"seconds": 2}})
        assert created.status == 201, created.text()
        run_id = created.json()["id"]

        deadline = time.monotonic() + 15
        run = api_get(context, console_server, f"runs/{run_id}").json()
        while run["status"] in ("queued", "running", "waiting") or run["request"] is None:
            assert time.monotonic() < deadline, f"run {run_id} still {run['status']} after 15 s: {run}"
            time.sleep(0.2)  # the poll interval: nothing but the API to wait on
            run = api_get(context, console_server, f"runs/{run_id}").json()

        request = run["request"]
        assert request["expiresAt"], request
        assert run["status"] == "failed", run
        # §10's exact prefix, then what happened: never worded as a person's refusal.
        assert run["result"]["is_error"] is True
        assert re.fullmatch(
            r"declined/expired: Approve within 2 seconds\? \(expired at \d\d:\d\d UTC, nobody answered\)",
            run["result"]["output"],
        ), run["result"]
        assert request["status"] == "expired"

        late = api_post(context, console_server, f"requests/{request['id']}/answer", {"ok": True})
        assert late.status == 409, late.text()
        assert "expired" in late.json()["message"]
    finally:
        context.close()


def test_an_answer_that_arrives_after_the_deadline_is_shown_as_expired_on_the_card(reviewer, console_server):
    held = []

    def hold_answers(ws):
        # Between page and server: forward everything, but hold back the answer frames.
        server = ws.connect_to_server()

        def from_page(message):
            if isinstance(message, str) and json.loads(message).get("type") == "answer":
                held.append((server, message))
            else:
                server.send(message)

        ws.on_message(from_page)

    tab = reviewer("alice", before_goto=lambda page: page.route_web_socket(re.compile(r"/ws/console/$"), hold_answers))
    page = tab.page
    run_id, card = open_card(tab, console_server, "expiring", {"seconds": 2}, kind="approval")
    card.get_by_role("button", name="Approve").click()
    expect(card).to_have_class(re.compile(r"\bbusy\b"))
    assert len(held) == 1

    # The server expires it at the deadline; the card waits for the console's word on our answer.
    expect_result(page, run_id, re.compile(r"^Expired at \d\d:\d\d UTC, nobody answered$"), status="expired")
    expect(card).to_have_count(1)
    server, message = held.pop()
    server.send(message)
    expect(card.locator(".card-error")).to_contain_text("expired", timeout=EVENT_TIMEOUT_MS)
    expect(card).to_have_class(re.compile(r"\bclosed\b"))
    expect(page.locator("#request-count")).to_have_text("0")
    card.get_by_role("button", name="Dismiss").click()
    expect(card).to_have_count(0)


def test_the_countdown_is_live_and_turns_urgent(reviewer, console_server):
    tab = reviewer("alice")
    _, long_card = open_card(tab, console_server, "expiring", {"seconds": 65}, kind="approval")
    expect(long_card.locator(".countdown")).to_have_text(re.compile(r"^expires in 1m 0[0-5]s$"))
    long_card.get_by_role("button", name="Withdraw request").click()  # asks first
    long_card.get_by_role("button", name="Withdraw request").click()
    expect(long_card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)

    _, card = open_card(tab, console_server, "expiring", {"seconds": 12}, kind="approval")
    clock = card.locator(".countdown")
    expect(clock).to_have_text(re.compile(r"^expires in \d+s$"))
    first = clock.inner_text()
    expect(clock).not_to_have_text(first, timeout=2500)
    assert int(re.search(r"\d+", clock.inner_text()).group()) < int(re.search(r"\d+", first).group())
    expect(clock).to_have_class(re.compile(r"\burgent\b"), timeout=5000)
    decline(card)


def test_keyboard_a_approves_and_d_asks_why_inline_then_declines(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_a = start_run(tab, console_server, "refund", {"order": "E2E-KEY-A"})
    row_a = request_row(page, run_a, kind="approval")
    expect(row_a).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(row_a).not_to_be_focused()  # an arriving request never takes focus: the reviewer picks one
    card_a = pick(page, row_a)
    expect(row_a).to_be_focused()
    page.keyboard.press("a")
    expect(card_a).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#toasts .toast").last).to_contain_text("Approved · Refund 25.0 EUR on order E2E-KEY-A?")
    expect(page.locator("#requests")).to_be_focused()  # no other request: the list, not <body>
    expect_result(page, run_a, "refunded 25.0 EUR on order E2E-KEY-A", status="succeeded")

    run_b = start_run(tab, console_server, "refund", {"order": "E2E-KEY-B"})
    card_b = pick(page, request_row(page, run_b, kind="approval"))
    # Typing in a text field is typing, not a shortcut.
    card_b.get_by_label("Comment").press_sequentially("ad")
    expect(card_b.get_by_label("Comment")).to_have_value("ad")
    expect(card_b).to_have_count(1)

    card_b.focus()
    page.keyboard.press("d")  # asks why, in the card; the comment so far is the reason so far
    reason = card_b.locator(".decline-reason")
    expect(reason).to_be_focused()
    expect(reason).to_have_value("ad")
    page.keyboard.press("Escape")  # kept open: nothing is sent
    expect(reason).to_have_count(0)
    expect(card_b).to_be_focused()
    page.keyboard.press("d")
    reason.fill("too large")
    armed(card_b)
    page.keyboard.press("Enter")
    expect(card_b).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect_result(page, run_b, "Declined by alice: too large", status="declined")
    assert tab.dialogs == []  # no window.confirm any more
    sent = [(f["ok"], f.get("reason"), f.get("comment")) for f in tab.answers_sent()]
    assert sent == [(True, None, None), (False, "declined", "too large")]

    # A new request does not pull focus out of a text field.
    page.locator("#start-timeout").click()
    run_c = start_run(tab, console_server, "refund", {"order": "E2E-KEY-C"})
    expect(request_row(page, run_c)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#start-timeout")).to_be_focused()
    decline(pick(page, request_row(page, run_c)))


def test_a_request_arriving_off_screen_takes_no_focus_and_a_approves_nothing(reviewer, console_server, host_requests):
    tab = reviewer("alice")
    page = tab.page
    crowd = host_requests(tab, [f"crowd-a-{i}" for i in range(26)])
    blur_and_scroll_to_top(page)
    record_focus(page)

    [arrival] = host_requests(tab, ["offscreen-1"], prompt="Drop the production database?")
    expect(arrival).not_to_be_in_viewport()
    page.keyboard.press("a")

    # The reviewer's own pick still works: click the first row, A approves it. Its answer, sent
    # after the first key press on the same socket, is also the proof that press sent nothing.
    pick(page, crowd[0])
    expect(crowd[0]).to_be_focused()
    expect(crowd[0]).to_be_in_viewport()
    page.keyboard.press("a")
    expect(crowd[0]).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert request_in(page.context, console_server, "crowd-a-0", "answered")["answer"]["ok"] is True
    assert request_in(page.context, console_server, "offscreen-1", "open") is not None, (
        "a key press answered the request that arrived off screen, which nobody had looked at"
    )
    assert answered(tab) == [("crowd-a-0", True, None)]
    assert "offscreen-1" not in page.evaluate("window.__focused")
    # After the answer, the next request is picked and focused, in view, ready for the next key.
    expect(crowd[1]).to_be_focused()
    expect(crowd[1]).to_be_in_viewport()
    expect(page.locator("#request-detail article.card")).to_have_attribute("data-request-id", "crowd-a-1")


def test_keys_act_only_on_a_picked_request_in_view_and_d_asks_first(reviewer, console_server, host_requests):
    tab = reviewer("alice")
    page = tab.page
    crowd = host_requests(tab, [f"crowd-d-{i}" for i in range(26)])
    blur_and_scroll_to_top(page)
    page.keyboard.press("d")  # nothing picked: nothing asked, nothing sent
    page.keyboard.press("a")
    expect(page.locator(".decline-reason")).to_have_count(0)

    card = pick(page, crowd[0])
    expect(crowd[0]).to_be_focused()
    for key in ("d", "a"):
        # Picked, then scrolled away: the key brings it back into view and sends nothing.
        page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
        expect(card.locator(".prompt")).not_to_be_in_viewport()
        expect(page.locator("#focus-bar")).not_to_be_in_viewport()
        page.keyboard.press(key)
        expect(card.locator(".prompt")).to_be_in_viewport()
        expect(card.locator(".card-error")).to_have_text(
            f"Nothing was sent: this request was out of view. Read it, then press {key.upper()} again."
        )
    assert tab.dialogs == []
    assert answered(tab) == []

    page.keyboard.press("d")
    expect(card.locator(".decline-reason")).to_be_focused()
    armed(card)
    page.keyboard.press("Enter")
    expect(crowd[0]).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert answered(tab) == [("crowd-d-0", False, "declined")]
    expect(crowd[1]).to_be_focused()
    # An answer by a button click moves the pick on the same way.
    page.locator("#request-detail article.card").get_by_role("button", name="Approve").click()
    expect(crowd[1]).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(crowd[2]).to_be_focused()


def test_a_card_a_remote_host_opened_names_the_host_and_who_opened_it(reviewer, console_server, host_requests):
    tab = reviewer("alice")
    [row] = host_requests(tab, ["remote-origin-1"], host="ci-runner-7", tool="deploy", args={"service": "web"})
    expect(row.locator(".origin")).to_have_text("ci-runner-7")  # the row names the host
    card = pick(tab.page, row)
    expect(card.locator(".origin")).to_have_text("from ci-runner-7 · opened by alice")
    expect(card.locator(".origin-host")).to_have_text("ci-runner-7")
    expect(card.locator(".opened-by")).to_have_text("alice")
    # A run's own request was opened by no host: no such line.
    _, run_card = open_card(tab, console_server, "refund", {"order": "E2E-ORIGIN"}, kind="approval")
    expect(run_card.locator(".origin")).to_have_count(0)
    decline(run_card)


def test_a_deadline_days_away_reads_as_a_date_and_one_within_a_day_counts_down(reviewer, console_server, host_requests):
    tab = reviewer("alice")
    now = datetime.now(UTC).replace(microsecond=0)

    def expiring_in(request_id, delta):
        [row] = host_requests(tab, [request_id], expiresAt=(now + delta).isoformat().replace("+00:00", "Z"))
        return row.locator(".countdown")

    far = expiring_in("deadline-3d", timedelta(days=3))
    within_a_day = expiring_in("deadline-20h", timedelta(hours=20))
    soon = expiring_in("deadline-90s", timedelta(seconds=90))

    due = now + timedelta(days=3)  # written in UTC, as every time (the year only when it is not this one)
    expect(far).to_have_text(re.compile(rf"^expires on {due.day} {due:%b}( {due.year})? {due:%H:%M} UTC$"))
    expect(far).not_to_have_text(re.compile(r"\d+h"))
    expect(within_a_day).to_have_text(re.compile(r"^expires in (19h 59m|20h 00m)$"))
    # A short deadline still ticks.
    expect(soon).to_have_text(re.compile(r"^expires in 1m \d\ds$"))
    first = soon.inner_text()
    expect(soon).not_to_have_text(first, timeout=2500)


def test_markup_in_a_question_and_an_unknown_kind_is_only_text(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    question = {"question": PAYLOAD, "header": PAYLOAD, "options": [PAYLOAD, "plain"]}
    _, q_card = open_card(tab, console_server, "question", {"questions": [question]}, kind="question")
    expect(q_card.locator(".q-text")).to_have_text(PAYLOAD)
    expect(q_card.locator(".q-header")).to_have_text(PAYLOAD)
    expect(q_card.locator("label.option").first).to_have_text(PAYLOAD)
    expect(q_card.locator(".prompt")).to_contain_text(PAYLOAD)
    expect(page.locator("#focus-bar .focus-prompt")).to_contain_text(PAYLOAD)

    # Withdraw request is not a decline: the request records which one it was.
    q_id = q_card.get_attribute("data-request-id")
    q_card.get_by_role("button", name="Withdraw request").click()  # asks first
    q_card.get_by_role("button", name="Withdraw request").click()
    expect(q_card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)

    _, c_card = open_card(tab, console_server, "confirm", {"action": PAYLOAD}, kind="confirmation")
    expect(c_card.locator(".prompt")).to_have_text(f"Confirm: {PAYLOAD}?")
    expect(c_card.locator(".tool-call .arg-value", has_text=PAYLOAD)).to_have_count(1)
    expect(page.locator("#requests .row-prompt", has_text=PAYLOAD)).to_have_count(1)
    expect(page.locator("#inbox img")).to_have_count(0)
    c_id = c_card.get_attribute("data-request-id")
    decline(c_card)
    assert request_in(page.context, console_server, q_id, "cancelled")["answer"]["reason"] == "cancelled"
    assert request_in(page.context, console_server, c_id, "declined")["answer"]["reason"] == "declined"
    assert tab.dialogs == [], f"the markup ran: {tab.dialogs}"


FAKE_NOTIFICATIONS = """
(() => {
  const shown = [];
  class FakeNotification {
    constructor(title, options) { shown.push({ title, body: options && options.body }); }
    close() {}
    static requestPermission() {
      sessionStorage.setItem("e2e-permission", "granted");
      FakeNotification.permission = "granted";
      return Promise.resolve("granted");
    }
  }
  FakeNotification.permission = sessionStorage.getItem("e2e-permission") || "default";
  window.Notification = FakeNotification;
  window.__notifications = shown;
})();
"""


def test_notifications_can_be_enabled_and_tell_of_each_new_request(reviewer, console_server):
    tab = reviewer("alice", init_script=FAKE_NOTIFICATIONS)
    page = tab.page
    button = page.get_by_role("button", name="Enable notifications")
    expect(button).to_be_visible()
    button.click()
    expect(button).to_be_hidden()

    _, card = open_card(tab, console_server, "refund", {"order": "E2E-NOTE"}, kind="approval")
    shown = page.evaluate("window.__notifications")
    assert shown == [{"title": "toolnexus: approval request from refund", "body": "Refund 25.0 EUR on order E2E-NOTE?"}]

    # A request already open when the page loads is not news.
    page.reload()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(card).to_have_count(1)
    expect(button).to_be_hidden()
    assert page.evaluate("window.__notifications") == []
    decline(card)
