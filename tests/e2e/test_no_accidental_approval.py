"""Nothing is approved that the reviewer did not see (issue 26, points 2 and 3), in Chromium at 1440x900 and 390x844.

Every question asked once more (an edited or plain approval, Decline, Withdraw, Cancel run, a bulk answer) is an
alertdialog below the control that opened it, whose buttons arm for half a second and which a double-click, a held
key or a press begun before it appeared never passes. A approves at once only when the whole call is on screen and
unclamped, nothing was edited and the request's policy does not ask first; otherwise it asks the button's question.
This module runs its own console, with a policy that asks for a confirmation for ``deploy-prod`` requests.
"""

import json

import pytest
from playwright.sync_api import expect

from tests.support.console_page import (
    EVENT_TIMEOUT_MS,
    api_post,
    expect_result,
    overlaps,
    pick,
    request_in,
    request_row,
    start_run,
)

from .conftest import CREATE_USERS, LAPTOP, PASSWORD, PHONE, USERS, serve_console

SIZES = pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
# The run's output after the approved edit ends with what changed (outcomes.edit_notice).
TOLD = " (a reviewer changed amount 33 → 4 before approving; the call ran with the changed values)"
POLICIES = [{"name": "production deploys", "tool": "deploy-prod", "confirm_approval": True}]
WITHDRAW_QUESTION = "Withdraw this request? The tool is told it was cancelled, not declined."


@pytest.fixture(scope="module")
def console_server(tmp_path_factory):
    """This module's console: the shared one's two reviewers, plus a policy that asks before approving a deploy."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-confirm"),
        "e2e-confirm",
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        CONSOLE_POLICIES=json.dumps(POLICIES),
    ) as server:
        yield server


def centre(box):
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def question(scope):
    return scope.get_by_role("alertdialog")


def expect_armed(dialog):
    """The question's buttons arm half a second after it appears."""
    expect(dialog).not_to_have_attribute("data-arming", "")
    for button in dialog.get_by_role("button").all():
        expect(button).to_be_enabled()


def assert_clear_of(dialog, opener_box):
    """No button of the question lies where the control that opened it is."""
    for button in dialog.get_by_role("button").all():
        box = button.bounding_box()
        assert not overlaps(box, opener_box), f"{button.text_content()!r} at {box} covers its opener at {opener_box}"


def still_open(tab, server, request_id):
    return request_in(tab.page.context, server, request_id, "open") is not None


def open_refund(tab, server, viewport, order, amount=33):
    tab.page.set_viewport_size(viewport)
    run_id = start_run(tab, server, "refund", {"order": order, "amount": amount})
    card = pick(tab.page, request_row(tab.page, run_id, kind="approval"))
    expect(card).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    return run_id, card


def open_host_request(tab, server, viewport, request_id, **fields):
    tab.page.set_viewport_size(viewport)
    body = {"id": request_id, "kind": "approval", "prompt": f"Approve {request_id}?", **fields}
    response = api_post(tab.page.context, server, "requests", body)
    assert response.status == 201, response.text()
    row = tab.page.locator(f'#requests > .row[data-request-id="{request_id}"]')
    card = pick(tab.page, row)
    expect(card).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    return card


# -- point 2: no approval by accident -------------------------------------------------------------------------


@SIZES
def test_a_double_click_on_approve_after_an_edit_sends_nothing(reviewer, console_server, viewport):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_refund(tab, console_server, viewport, f"E2E-DBL-{viewport['width']}")
    card.locator('input[name="amount"]').fill("4")
    approve = card.locator(".actions").get_by_role("button", name="Approve")
    approve.scroll_into_view_if_needed()
    opener = approve.bounding_box()
    page.mouse.dblclick(*centre(opener))

    dialog = question(card)
    expect(dialog).to_have_accessible_name("You changed what the tool asked for. Send these values?")
    expect(card.locator("ul.diff li")).to_have_text(["amount 33 → 4"])
    expect_armed(dialog)
    assert_clear_of(dialog, opener)
    assert tab.answers_sent() == []
    assert still_open(tab, console_server, card.get_attribute("data-request-id"))

    dialog.get_by_role("button", name="Approve with this change").click()
    expect_result(page, run_id, f"refunded 4 EUR on order E2E-DBL-{viewport['width']}{TOLD}", status="succeeded")
    assert len(tab.answers_sent()) == 1


@SIZES
def test_a_held_enter_passes_no_confirmation(reviewer, console_server, viewport):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_refund(tab, console_server, viewport, f"E2E-HELD-{viewport['width']}")
    card.locator('input[name="amount"]').fill("4")
    card.locator(".actions").get_by_role("button", name="Approve").focus()
    page.keyboard.down("Enter")  # on Approve: the question opens, its yes takes the focus
    dialog = question(card)
    send = dialog.get_by_role("button", name="Approve with this change")
    expect(send).to_be_focused()
    page.keyboard.down("Enter")  # the key is still held: event.repeat, during the arming
    expect_armed(dialog)
    for _ in range(3):
        page.keyboard.down("Enter")  # and after it
    page.keyboard.up("Enter")
    # A synthetic repeat of the A key, the question's second yes, passes it no more.
    page.evaluate("""() => document.activeElement.dispatchEvent(
        new KeyboardEvent("keydown", { key: "a", repeat: true, bubbles: true, cancelable: true }))""")
    expect(dialog).to_be_visible()
    assert tab.answers_sent() == []
    assert still_open(tab, console_server, card.get_attribute("data-request-id"))

    page.keyboard.press("Enter")  # a fresh press, once armed, is a yes
    expect_result(page, run_id, f"refunded 4 EUR on order E2E-HELD-{viewport['width']}{TOLD}", status="succeeded")


@SIZES
def test_one_click_on_withdraw_leaves_the_request_open(reviewer, console_server, viewport):
    tab = reviewer("alice")
    page = tab.page
    request_id = f"withdraw-{viewport['width']}"
    card = open_host_request(tab, console_server, viewport, request_id, tool="refund")
    withdraw = card.locator(".actions").get_by_role("button", name="Withdraw request")
    withdraw.scroll_into_view_if_needed()
    opener = withdraw.bounding_box()
    page.mouse.dblclick(*centre(opener))

    dialog = question(card)
    expect(dialog).to_have_accessible_name(WITHDRAW_QUESTION)
    expect_armed(dialog)
    assert_clear_of(dialog, opener)
    assert tab.answers_sent() == []
    assert still_open(tab, console_server, request_id)
    dialog.get_by_role("button", name="Keep it").click()
    expect(dialog).to_have_count(0)
    expect(card).to_be_focused()

    withdraw.click()
    dialog.get_by_role("button", name="Withdraw request").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    withdrawn = request_in(page.context, console_server, request_id, "cancelled")
    assert withdrawn and withdrawn["answer"]["reason"] == "cancelled"


@SIZES
def test_every_question_is_an_armed_alertdialog_clear_of_its_opener(reviewer, console_server, viewport):
    tab = reviewer("alice")
    page = tab.page
    card = open_host_request(tab, console_server, viewport, f"every-{viewport['width']}", tool="deploy-prod")
    for opener_name, asked in (
        ("Approve", "Approve deploy-prod with these arguments?"),
        ("Decline", "Why decline?"),
        ("Withdraw request", WITHDRAW_QUESTION),
    ):
        opener = card.locator(".actions").get_by_role("button", name=opener_name)
        opener.scroll_into_view_if_needed()
        opener_box = opener.bounding_box()
        opener.click()
        dialog = question(card)
        expect(dialog).to_have_accessible_name(asked)
        expect(dialog).to_have_attribute("data-arming", "")  # at first: shown arming, not yet answerable
        expect_armed(dialog)
        assert_clear_of(dialog, opener_box)
        page.keyboard.press("Escape")
        expect(dialog).to_have_count(0)
        expect(card).to_be_focused()

    run_id = start_run(tab, console_server, "crunch", {"steps": 200, "pause": 0.1})
    row = page.locator(f'#runs tr[data-run-id="{run_id}"]')
    cancel = row.get_by_role("button", name="Cancel run")
    cancel.scroll_into_view_if_needed()
    cancel_box = cancel.bounding_box()
    page.mouse.dblclick(*centre(cancel_box))
    dialog = question(row)
    expect(dialog).to_have_accessible_name(
        f"Cancel run #{run_id} (crunch)? The tool is stopped and its open requests withdrawn."
    )
    expect_armed(dialog)
    assert_clear_of(dialog, cancel_box)
    expect(row.locator(".status")).to_have_text("running")
    dialog.get_by_role("button", name="Cancel run").click()
    expect(row).to_have_count(0, timeout=EVENT_TIMEOUT_MS)

    checkbox = page.locator(f'#requests > .row[data-request-id="every-{viewport["width"]}"] .row-select')
    checkbox.check()
    bulk = page.locator("#bulk-approve")
    bulk_box = bulk.bounding_box()
    bulk.click()
    dialog = page.locator("#bulk-confirm")
    expect(dialog).to_have_attribute("role", "alertdialog")
    expect(dialog.get_by_role("button", name="Approve 1")).to_be_visible()
    expect_armed(dialog)
    assert_clear_of(dialog, bulk_box)
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(bulk).to_be_focused()
    assert tab.answers_sent() == []


# -- point 3: what A does ------------------------------------------------------------------------------------------


@SIZES
def test_a_policy_that_asks_makes_both_the_button_and_a_ask_first(reviewer, console_server, viewport):
    tab = reviewer("alice")
    page = tab.page
    request_id = f"deploy-{viewport['width']}"
    args = {"service": "payments", "version": "2.4.1", "region": "eu-west-1"}
    card = open_host_request(tab, console_server, viewport, request_id, tool="deploy-prod", args=args)

    card.locator(".actions").get_by_role("button", name="Approve").click()
    dialog = question(card)
    expect(dialog).to_have_accessible_name("Approve deploy-prod with these arguments?")
    expect(dialog.locator(".confirm-why")).to_have_text(
        'Policy "production deploys" asks for a confirmation before approving.'
    )
    expect(dialog.locator(".confirm-args dt")).to_have_text(list(args))
    expect(dialog.locator(".confirm-args dd")).to_have_text([f'"{value}"' for value in args.values()])
    dialog.get_by_role("button", name="Back").click()
    expect(card).to_be_focused()

    # Keys act only on a card whose prompt is in view; where Back left the page scrolled depends on the
    # question's height, so bring the call back into view first.
    card.locator(".tool-call").scroll_into_view_if_needed()
    page.keyboard.press("a")  # the same question, not an approval
    expect(dialog).to_have_accessible_name("Approve deploy-prod with these arguments?")
    # A second A while the question is still arming is nothing (checked and pressed in one go, however slow
    # the machine).
    page.evaluate("""() => {
        const arming = document.querySelector("[role=alertdialog]").hasAttribute("data-arming");
        if (arming) document.activeElement.dispatchEvent(new KeyboardEvent("keydown", { key: "a", bubbles: true }));
    }""")
    expect_armed(dialog)
    assert tab.answers_sent() == []
    assert still_open(tab, console_server, request_id)
    page.keyboard.press("a")  # once armed, the second yes
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert len(tab.answers_sent()) == 1


@SIZES
def test_the_approval_question_draws_the_arguments_as_the_card_does(reviewer, console_server, viewport):
    # What the question asks a yes to is what the card showed: a hidden character marked, "3" unlike 3.
    tab = reviewer("alice")
    args = {"image": "web:2.4.1\u202e1.4.2", "replicas": 3, "count": "3"}
    card = open_host_request(tab, console_server, viewport, f"marks-{viewport['width']}", tool="deploy-prod", args=args)
    expect(card.locator(".tool-call .hidden-char")).to_have_text(["U+202E"])
    card.locator(".actions").get_by_role("button", name="Approve").click()
    dialog = question(card)
    expect(dialog.locator(".confirm-args .hidden-char")).to_have_text(["U+202E"])
    expect(dialog.locator('.confirm-args [data-arg="replicas"] .arg-value')).to_have_text("3")
    expect(dialog.locator('.confirm-args [data-arg="replicas"] .arg-value')).to_have_attribute("data-type", "number")
    expect(dialog.locator('.confirm-args [data-arg="count"] .arg-value')).to_have_text('"3"')
    assert tab.answers_sent() == []


@SIZES
def test_a_with_only_the_sticky_bar_in_view_asks_first(reviewer, console_server, viewport):
    tab = reviewer("alice")
    page = tab.page
    request_id = f"scrolled-{viewport['width']}"
    data = {f"line {n:02}": f"order A-7, item {n}" for n in range(60)}  # a card taller than the window
    card = open_host_request(tab, console_server, viewport, request_id, tool="refund", args={"order": "A-7"}, data=data)
    card.focus()
    # The card's prompt is scrolled away under the sticky bar, which still names the request.
    card.locator(".actions").evaluate("(node) => node.scrollIntoView({ block: 'end' })")
    expect(page.locator("#focus-bar")).to_be_in_viewport()
    expect(card.locator(".prompt")).not_to_be_in_viewport()
    page.keyboard.press("a")
    dialog = question(card)
    expect(dialog).to_have_accessible_name("Approve refund with these arguments?")
    assert tab.answers_sent() == []
    page.keyboard.press("Escape")
    expect(card).to_be_focused()


@SIZES
def test_a_on_a_twenty_thousand_character_argument_opens_the_confirmation(reviewer, console_server, viewport):
    # A value the card shows clamped: A and the Approve button both ask, with the whole value in the question.
    tab = reviewer("alice")
    page = tab.page
    huge = "y" * 20_000
    card = open_host_request(
        tab, console_server, viewport, f"huge-{viewport['width']}", tool="refund", args={"note": huge}
    )
    expect(card.locator(".tool-call .clamped")).to_have_count(1)
    card.focus()
    page.keyboard.press("a")
    dialog = question(card)
    expect(dialog).to_have_accessible_name("Approve refund with these arguments?")
    expect(dialog.locator(".confirm-args dd")).to_have_text([f'"{huge}"'])  # whole, as the card draws it
    assert tab.answers_sent() == []
    page.keyboard.press("Escape")
    card.locator(".actions").get_by_role("button", name="Approve").click()
    expect(dialog).to_have_accessible_name("Approve refund with these arguments?")
    assert tab.answers_sent() == []
