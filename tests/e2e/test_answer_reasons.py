"""A decline's named reason, respond and request changes on the card, in Chromium against a real daphne (issue 36).

The request offers its own reject option and its policy's (this module's console has a settings policy for
``refund*`` with one); Decline shows them with the words the model will read, and a reason box. Respond and
Request changes open a small form whose message is required; a double-click answers once; the keyboard does it
all. Screenshots at 1440x900 and 390x844 go to /work/shots/reasons/.
"""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.console_page import (
    EVENT_TIMEOUT_MS,
    api_get,
    api_post,
    armed,
    host_row,
    pick,
    request_row,
    start_run,
)

from .conftest import console_with_policies

TOO_LARGE = {"key": "too_large", "label": "Too large", "text": "Refunds above 100 EUR need a manager."}
DUPLICATE = {"key": "duplicate", "label": "Duplicate", "text": "This order was refunded already."}
POLICIES = [{"name": "refunds", "tool": "refund*", "starter_may_answer": True, "reject_options": [DUPLICATE]}]
SHOTS = Path("/work/shots/reasons")


@pytest.fixture(scope="module")
def console_server(tmp_path_factory):
    """This module's console, with the refunds policy above and a tool that asks from inside its call."""
    with console_with_policies(
        tmp_path_factory, "e2e-reasons", POLICIES, TOOLNEXUS_TOOL_MODULES="tests.e2e.reasons_tools"
    ) as server:
        yield server


def ask_refund(tab, host_requests, request_id):
    host_requests(
        tab, [request_id], tool="refund", prompt="Refund 500 EUR on order A-7?", data={"reject_options": [TOO_LARGE]}
    )
    return pick(tab.page, host_row(tab.page, request_id))


def decision_of(tab, server, request_id):
    return api_get(tab.page.context, server, f"requests/{request_id}").json()["decision"]


def sent_for(tab, request_id):
    """The answer frames sent for the request, without their ref and the call digest every card sends (which
    tests/e2e/test_stale_call_refused.py checks)."""
    frames = [f for f in tab.answers_sent() if f.get("request") == request_id]
    assert all(f["digest"].startswith("sha256:") for f in frames), frames
    return [{k: v for k, v in f.items() if k not in ("ref", "digest")} for f in frames]


def shot(page, name, viewport, **kwargs):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{viewport['width']}x{viewport['height']}.png"), **kwargs)


def test_a_decline_picks_a_named_reason_and_shows_what_the_model_reads(alice_at, host_requests, console_server):
    tab, viewport = alice_at
    page = tab.page
    request_id = f"decline-{viewport['width']}"
    card = ask_refund(tab, host_requests, request_id)

    card.get_by_role("button", name="Decline", exact=True).click()
    panel = card.locator(".decline-panel")
    select = panel.locator("select.reject-option")
    expect(select).to_be_focused()
    # The policy's option first (the admin's words), then the request's own.
    expect(select.locator("option")).to_have_text(["No named reason", "Duplicate", "Too large"])
    # A host's request: the host receives the words; what its model reads is up to the host.
    expect(panel.locator(".option-text")).to_have_text("The host receives who declined, and anything you write.")
    expect(panel.locator(".decline-hint")).to_have_text(
        "(optional; sent to the host with the answer and shown to the team)"
    )
    select.select_option("too_large")
    expect(panel.locator(".option-text")).to_have_text("The host receives: Refunds above 100 EUR need a manager.")
    panel.locator(".decline-reason").fill("split it in two")
    armed(card)
    shot(page, "decline-panel", viewport)
    panel.get_by_role("button", name="Decline").dblclick()  # a careless double-click answers once

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert sent_for(tab, request_id) == [
        {
            "type": "answer",
            "request": request_id,
            "ok": False,
            "reason": "declined",
            "comment": "split it in two",
            "option": "too_large",
        }
    ]
    decision = decision_of(tab, console_server, request_id)
    assert (decision["text"], decision["option"]) == ("Declined by alice (Too large): split it in two", TOO_LARGE)

    page.goto(f"{console_server.base_url}/requests/{request_id}/")
    expect(page.locator("#request-decision")).to_have_text("Declined by alice (Too large): split it in two")
    expect(page.locator("#request-option")).to_have_text("Too large · Refunds above 100 EUR need a manager.")
    expect(page.locator("#request-comment")).to_have_text("split it in two")
    expect(page.locator("#request-data")).not_to_contain_text("reject_options")  # named by the Reason above
    shot(page, "decline-request-page", viewport, full_page=True)
    assert tab.dialogs == []


def test_respond_needs_a_message_and_a_double_click_sends_it_once(alice_at, host_requests, console_server):
    tab, viewport = alice_at
    page = tab.page
    request_id = f"respond-{viewport['width']}"
    card = ask_refund(tab, host_requests, request_id)

    card.get_by_role("button", name="Respond").click()
    panel = card.locator(".respond-panel")
    message = panel.locator("textarea.respond-message")
    expect(message).to_be_focused()
    expect(panel.locator("select.reject-option")).to_have_count(0)  # a reply names no reject option
    armed(card)
    panel.get_by_role("button", name="Send reply").click()  # nothing written: refused here, kept open
    expect(panel.locator(".respond-error")).to_have_text("Write the reply the host receives.")
    expect(panel.locator(".respond-hint")).to_have_text(
        "(required) The host is told not to run the tool and receives your reply; what its model reads is up to"
        " the host."
    )
    expect(message).to_be_focused()
    assert sent_for(tab, request_id) == []
    message.fill("Refund 50 EUR now;\nthe rest goes on a voucher.")
    expect(panel.locator(".respond-error")).to_have_text("")
    shot(page, "respond-panel", viewport)
    panel.get_by_role("button", name="Send reply").dblclick()

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#toasts .toast").last).to_contain_text("Responded")
    assert sent_for(tab, request_id) == [
        {
            "type": "answer",
            "request": request_id,
            "ok": False,
            "reason": "declined",
            "response": "respond",
            "message": "Refund 50 EUR now;\nthe rest goes on a voucher.",
        }
    ]
    decision = decision_of(tab, console_server, request_id)
    assert decision["text"] == "Responded by alice: Refund 50 EUR now; the rest goes on a voucher."

    page.goto(f"{console_server.base_url}/requests/{request_id}/")
    expect(page.locator("#request-decision")).to_have_text(
        "Responded by alice: Refund 50 EUR now; the rest goes on a voucher."
    )
    expect(page.locator("#request-message")).to_have_text("Refund 50 EUR now;\nthe rest goes on a voucher.")
    shot(page, "respond-request-page", viewport, full_page=True)


def test_request_changes_from_the_keyboard(reviewer, host_requests, console_server):
    tab = reviewer("alice")
    page = tab.page
    request_id = "changes-keyboard"
    card = ask_refund(tab, host_requests, request_id)

    card.get_by_role("button", name="Request changes").focus()
    page.keyboard.press("Enter")
    panel = card.locator(".request-changes-panel")
    expect(panel.locator("textarea.respond-message")).to_be_focused()
    page.keyboard.type("Refund at most 100 EUR.")
    page.keyboard.press("Tab")
    expect(panel.locator("select.reject-option")).to_be_focused()
    panel.locator("select.reject-option").select_option("duplicate")  # the policy's option
    expect(panel.locator(".option-text")).to_have_text("The host receives: This order was refunded already.")
    page.keyboard.press("Shift+Tab")
    armed(card)
    page.keyboard.press("Control+Enter")

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#toasts .toast").last).to_contain_text("Changes requested")
    assert sent_for(tab, request_id) == [
        {
            "type": "answer",
            "request": request_id,
            "ok": False,
            "reason": "declined",
            "response": "request_changes",
            "message": "Refund at most 100 EUR.",
            "option": "duplicate",
        }
    ]
    assert decision_of(tab, console_server, request_id)["text"] == (
        "Changes requested by alice (Duplicate): Refund at most 100 EUR."
    )


def test_a_comment_typed_after_the_decline_panel_opened_is_sent_with_the_decline(
    reviewer, host_requests, console_server
):
    """The panel opens with the card's comment in it; a comment written in the card's box after that, with the
    panel's box left empty, is not dropped: it goes with the decline."""
    tab = reviewer("alice")
    request_id = "decline-late-comment"
    card = ask_refund(tab, host_requests, request_id)

    card.get_by_role("button", name="Decline", exact=True).click()
    panel = card.locator(".decline-panel")
    expect(panel.locator(".decline-reason")).to_have_value("")
    card.locator("textarea.comment").fill("ask finance first")
    armed(card)
    panel.get_by_role("button", name="Decline").click()

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert sent_for(tab, request_id) == [
        {"type": "answer", "request": request_id, "ok": False, "reason": "declined", "comment": "ask finance first"}
    ]
    assert decision_of(tab, console_server, request_id)["comment"] == "ask finance first"


def test_escape_keeps_the_request_open_and_nothing_is_sent(reviewer, host_requests, console_server):
    tab = reviewer("alice")
    page = tab.page
    request_id = "changes-escape"
    card = ask_refund(tab, host_requests, request_id)

    card.get_by_role("button", name="Request changes").click()
    card.locator("textarea.respond-message").fill("x" * 5000)  # the box keeps at most 4000
    assert len(card.locator("textarea.respond-message").input_value()) == 4000
    page.keyboard.press("Escape")

    expect(card.locator(".respond-panel")).to_have_count(0)
    expect(card.get_by_role("button", name="Request changes")).to_be_visible()
    assert sent_for(tab, request_id) == []
    assert decision_of(tab, console_server, request_id) is None


def test_a_reply_typed_before_a_reload_comes_back(reviewer, host_requests, console_server):
    """Nothing typed is lost: the reply is kept as a draft, and Respond after a reload opens with it."""
    tab = reviewer("alice")
    page = tab.page
    request_id = "respond-reload"
    card = ask_refund(tab, host_requests, request_id)
    card.get_by_role("button", name="Respond").click()
    card.locator("textarea.respond-message").fill("Half now, half next week.")

    page.reload()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    card = pick(page, host_row(page, request_id))
    expect(card.locator(".draft-note")).to_contain_text("(and your message to the host)")  # a host's request
    card.get_by_role("button", name="Respond").click()
    expect(card.locator("textarea.respond-message")).to_have_value("Half now, half next week.")
    assert sent_for(tab, request_id) == []


def test_a_console_runs_card_says_the_model_reads_the_reply(reviewer, console_server):
    """A run's request: its model reads the reply and the changes asked for (the host's words are for hosts)."""
    tab = reviewer("alice")
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-REASONS-RUN", "amount": 25})
    card = pick(tab.page, request_row(tab.page, run_id))

    card.get_by_role("button", name="Respond").click()
    expect(card.locator(".respond-hint")).to_have_text(
        "(required) The tool does not run: the model reads your reply as its result."
    )
    tab.page.keyboard.press("Escape")
    card.get_by_role("button", name="Request changes").click()
    expect(card.locator(".respond-hint")).to_have_text(
        "(required) The call is declined: the model reads your instructions and may call again with them."
    )
    tab.page.keyboard.press("Escape")
    card.get_by_role("button", name="Decline", exact=True).click()
    expect(card.locator(".decline-hint")).to_have_text(
        "(optional; sent with the answer, shown to the team and read by the model)"
    )
    tab.page.keyboard.press("Escape")
    withdrawn = api_post(tab.page.context, console_server, f"runs/{run_id}/cancel", {})
    assert withdrawn.status == 202, withdrawn.text()


def test_a_request_that_takes_no_reply_offers_no_respond(reviewer, host_requests, console_server):
    """An authorization is answered or declined: the card offers neither Respond nor Request changes."""
    tab = reviewer("alice")
    host_requests(tab, ["sign-in"], kind="authorization", prompt="Sign in to the bank", url="https://example.com/")
    card = pick(tab.page, host_row(tab.page, "sign-in"))

    expect(card.get_by_role("button", name="Decline", exact=True)).to_be_visible()
    expect(card.get_by_role("button", name="Respond")).to_have_count(0)
    expect(card.get_by_role("button", name="Request changes")).to_have_count(0)


def test_a_request_asked_from_inside_a_running_call_offers_no_respond(reviewer, console_server):
    """The tool is already running: there is no call to answer instead of, or to change (the door refuses both)."""
    tab = reviewer("alice")
    run_id = start_run(tab, console_server, "cleanup")
    card = pick(tab.page, request_row(tab.page, run_id))

    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    expect(card.get_by_role("button", name="Decline", exact=True)).to_be_visible()
    expect(card.get_by_role("button", name="Respond")).to_have_count(0)
    expect(card.get_by_role("button", name="Request changes")).to_have_count(0)
    withdrawn = api_post(tab.page.context, console_server, f"runs/{run_id}/cancel", {})
    assert withdrawn.status == 202, withdrawn.text()


def test_a_comment_over_4000_characters_is_refused_and_kept(reviewer, host_requests, console_server):
    """The door holds a comment to 4000 characters: the card says so and keeps every character typed."""
    tab = reviewer("alice")
    card = ask_refund(tab, host_requests, "long-comment")
    comment = card.get_by_label("Comment")
    comment.fill("z" * 4001)
    card.get_by_role("button", name="Approve").click()  # as asked: sent at once

    expect(card).to_contain_text("The comment is 4001 characters long; at most 4000 are allowed.")
    expect(comment).to_have_value("z" * 4001)
    assert decision_of(tab, console_server, "long-comment") is None
