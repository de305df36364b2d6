"""Every policy branch in a real browser against a real daphne, with three reviewers.

alice starts a refund, which a policy makes four-eyes: her own card is read-only, says
why, who may approve it and how to unblock it, shows no inputs and keeps Decline and
Cancel; bob approves it (and on another refund alice declines her own). Then alice starts
a payout, which a policy makes need two approvals, neither hers: bob's approval shows
"1 of 2 approvals" everywhere, carol sees who else is looking at it ("also here: alice,
bob"), and carol's approval completes the quorum; on another payout, carol's decline
after bob's approval declines it at once. A wire only bob may approve is read-only for
carol, with no inputs and no buttons, and the server refuses her answer anyway.
"""

import json
import re

import pytest
from playwright.sync_api import expect

from .conftest import VIEWPORT, Watched, login, serve_console

EVENT_TIMEOUT_MS = 5000
PASSWORD = "e2e-Team-pass-9052"
TEAM = ("alice", "bob", "carol")
POLICIES = [
    {"name": "refunds are four-eyes", "tool": "refund", "starter_may_answer": False},
    {"name": "payouts need two", "tool": "payout", "quorum": 2, "starter_may_answer": False},
    {"name": "wires are bob's", "tool": "wire", "users": ["bob"]},
]
CREATE_TEAM = f"""
import os
from django.contrib.auth import get_user_model
for name in {TEAM!r}:
    get_user_model().objects.create_user(name, password=os.environ["TEAM_PASSWORD"])
"""
AMOUNT_FIELD = '.editable [data-field-name="amount"] input'
UNBLOCK = (
    "To unblock it, ask another reviewer to approve (a new one: manage.py add_reviewer NAME), "
    'or set starter_may_answer on the policy (in TOOLNEXUS["POLICIES"] or CONSOLE_POLICIES).'
)


def four_eyes(policy):
    return (
        f'You started this run, and policy "{policy}" is four-eyes: anyone but you may approve it. '
        f"You may still decline or cancel it. {UNBLOCK}"
    )


ONLY_BOB = (
    'Only bob may answer this (policy "wires are bob\'s"). To answer it yourself, ask an admin: '
    """add carol to the policy's users (in TOOLNEXUS["POLICIES"] or CONSOLE_POLICIES)."""
)
ANY_INPUT = "input:visible, select:visible, textarea:visible"


@pytest.fixture(scope="module")
def team_server(tmp_path_factory):
    """A console with the default policies plus POLICIES, and three reviewers."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-team"),
        "e2e-team",
        CREATE_TEAM,
        TEAM,
        PASSWORD,
        TEAM_PASSWORD=PASSWORD,
        CONSOLE_POLICIES=json.dumps(POLICIES),
        TOOLNEXUS_TOOL_MODULES="tests.e2e.team_tools",
    ) as server:
        yield server


@pytest.fixture
def dashboards(browser, team_server):
    """``dashboards("alice", "bob")``: a live dashboard per reviewer, each in its own browser context."""
    contexts, tabs = [], []

    def open_for(*usernames):
        pages = []
        for username in usernames:
            context = browser.new_context(viewport=VIEWPORT)
            contexts.append(context)
            page = context.new_page()
            tabs.append(Watched(page))
            login(page, team_server, username)
            expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
            pages.append(page)
        return pages

    yield open_for
    for context in contexts:
        context.close()
    errors = [error for tab in tabs for error in tab.errors]
    assert not errors, f"uncaught script errors: {errors}"


def start_run(page, tool, args):
    page.select_option("#start-tool", tool)
    page.check("input[name='args-mode'][value='json']")
    page.fill("#start-args-json", json.dumps(args))
    with page.expect_response(lambda r: r.url.endswith("/api/v1/runs") and r.request.method == "POST") as answer:
        page.click("#start-run button[type=submit]")
    assert answer.value.status == 201, answer.value.text()
    return answer.value.json()["id"]


def row_for(page, run_id):
    return page.locator(f'#requests > .row[data-run="{run_id}"]')


def card_for(page, run_id):
    """The run's request picked on this reviewer's dashboard: its row clicked, its card (the inbox's detail) returned."""
    row = row_for(page, run_id)
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    row.click()
    return page.locator(f'#request-detail article.card[data-request-id="{row.get_attribute("data-request-id")}"]')


def expect_tombstone(card, words):
    """Someone else answered it: the card stays, closed, saying who."""
    expect(card).to_have_class(re.compile(r"\bclosed\b"), timeout=EVENT_TIMEOUT_MS)
    expect(card.locator(".tombstone .card-error")).to_have_text(re.compile(rf"^No longer open: {re.escape(words)}"))


def decline(card):
    """Decline, then confirm: the card asks for a reason inline, and its Decline sends it."""
    card.get_by_role("button", name="Decline").click()
    card.get_by_role("button", name="Decline").click()


def finished(page, run_id, output):
    expect(page.locator(f'#recent-runs tr[data-run-id="{run_id}"] td.result')).to_have_text(
        output, timeout=EVENT_TIMEOUT_MS
    )


def audit_rows(page, server, run_id, action):
    """The run's audit events of one action, as the /audit/ page lists them to this page's reviewer (new tab)."""
    tab = page.context.new_page()
    tab.goto(f"{server.base_url}/audit/?action={action}&run={run_id}")
    return tab.locator("#audit-events tbody tr")


def test_four_eyes_and_a_quorum_of_two_in_the_browser(dashboards):
    alice, bob, carol = dashboards(*TEAM)

    # Four-eyes: alice may not approve the refund she started; bob may.
    refund = start_run(alice, "refund", {"order": "E2E-TEAM", "amount": 30})
    mine = card_for(alice, refund)
    expect(mine).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(mine).to_have_class(re.compile(r"\bread-only\b"))
    expect(mine.locator(".why-not")).to_have_text(four_eyes("refunds are four-eyes"))
    expect(mine.locator(".policy-line")).to_have_text("four-eyes")
    expect(mine.get_by_role("button", name="Approve")).to_be_hidden()
    expect(alice.locator("#request-count")).to_have_text("0")
    theirs = card_for(bob, refund)
    expect(theirs.get_by_role("button", name="Approve")).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    expect(theirs.locator(".why-not")).to_have_count(0)
    expect(bob.locator("#request-count")).to_have_text("1")
    theirs.get_by_role("button", name="Approve").click()
    finished(alice, refund, "refunded 30 EUR on order E2E-TEAM")
    expect_tombstone(mine, "Approved by bob")

    # Quorum: the payout needs two approvals, neither of them alice's.
    payout = start_run(alice, "payout", {"amount": 70})
    bobs, carols, alices = card_for(bob, payout), card_for(carol, payout), card_for(alice, payout)
    expect(bobs.locator(".policy-line")).to_have_text("0 of 2 approvals · four-eyes", timeout=EVENT_TIMEOUT_MS)
    expect(alices.locator(".why-not")).to_have_text(four_eyes("payouts need two"))
    # Everyone has the payout on screen: carol is told about the other two, never about herself.
    expect(carols.locator(".presence")).to_have_text("also here: alice, bob", timeout=EVENT_TIMEOUT_MS)
    # bob lowers the amount before approving; the second approver must approve the same values,
    # so carol's open card takes bob's amount.
    bobs.locator(AMOUNT_FIELD).fill("65")
    bobs.get_by_role("button", name="Approve").click()
    expect(bobs.locator("ul.diff li")).to_have_text(["amount 70 → 65"])
    bobs.get_by_role("button", name="Approve").click()  # the second yes sends the change
    for card in (bobs, carols, alices):
        expect(card.locator(".policy-line")).to_have_text(
            "1 of 2 approvals · approved by bob · four-eyes", timeout=EVENT_TIMEOUT_MS
        )
    expect(carols.locator(AMOUNT_FIELD)).to_have_value("65")
    expect(bobs.locator(".why-not")).to_have_text(
        "You already approved this; it needs 1 more approval from someone else."
    )
    expect(carols.get_by_role("button", name="Approve")).to_be_visible()
    expect(carols.locator(".why-not")).to_have_count(0)
    carols.get_by_role("button", name="Approve").click()
    # The run's result says what ran, and that a reviewer changed it (issue 36's edit notice, which the model reads).
    finished(
        alice,
        payout,
        "paid out 65 EUR (a reviewer changed amount 70 → 65 before approving; the call ran with the changed values)",
    )
    expect(carols).to_have_count(0, timeout=EVENT_TIMEOUT_MS)  # her own answer: the row goes
    for card in (bobs, alices):
        expect_tombstone(card, "Approved by bob and carol")  # a quorum names every approver


def test_the_starters_read_only_card_shows_no_inputs_and_lets_them_decline_their_own(dashboards):
    alice, bob = dashboards("alice", "bob")
    refund = start_run(alice, "refund", {"order": "E2E-OWN", "amount": 45})
    mine, theirs = card_for(alice, refund), card_for(bob, refund)
    expect(mine.locator(".why-not")).to_have_text(four_eyes("refunds are four-eyes"), timeout=EVENT_TIMEOUT_MS)
    # What is asked stays readable; nothing to fill in, no comment box, no Approve.
    expect(mine.locator(".tool-call")).to_contain_text("E2E-OWN")
    expect(mine.locator(ANY_INPUT)).to_have_count(0)
    expect(mine.get_by_role("button", name="Approve")).to_be_hidden()
    expect(theirs.locator(AMOUNT_FIELD)).to_be_visible(timeout=EVENT_TIMEOUT_MS)  # bob's card keeps its form

    expect(mine.get_by_role("button", name="Withdraw request")).to_be_visible()
    decline(mine)
    finished(alice, refund, "Declined by alice")
    expect_tombstone(theirs, "Declined by alice")


def test_on_a_card_the_starter_may_only_decline_a_says_why_and_d_declines(dashboards):
    (alice,) = dashboards("alice")
    refund = start_run(alice, "refund", {"order": "E2E-OWN-KEY", "amount": 46})
    mine = card_for(alice, refund)
    expect(mine.locator(".why-not")).to_have_text(four_eyes("refunds are four-eyes"), timeout=EVENT_TIMEOUT_MS)
    mine.focus()
    alice.keyboard.press("a")
    expect(mine.locator(".card-error")).to_have_text(four_eyes("refunds are four-eyes"))
    # ...and in the toast area, where the eye goes after a key.
    expect(alice.locator("#toasts .toast").last).to_contain_text(
        "Nothing was sent: " + four_eyes("refunds are four-eyes")
    )
    expect(mine).to_have_count(1)
    alice.keyboard.press("d")  # asks why, in the card; Enter declines
    expect(mine.locator(".decline-reason")).to_be_focused()
    expect(mine.locator("[role=alertdialog]:not([data-arming])")).to_have_count(1)  # armed after half a second
    alice.keyboard.press("Enter")
    finished(alice, refund, "Declined by alice")


def test_when_someone_else_answers_the_picked_request_it_stays_a_tombstone_and_a_answers_nothing(dashboards):
    alice, bob, carol = dashboards(*TEAM)
    first = start_run(alice, "refund", {"order": "E2E-FOCUS-1", "amount": 5})
    second = start_run(alice, "refund", {"order": "E2E-FOCUS-2", "amount": 6})
    expect(row_for(bob, second)).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    bobs_first = card_for(bob, first)
    bobs_first.get_by_label("Comment").fill("checking the order first")
    row_for(bob, first).focus()
    card_for(carol, first).get_by_role("button", name="Approve").click()
    # bob's pick stays where it was, closed, saying who answered; what he typed is kept.
    expect_tombstone(bobs_first, "Approved by carol")
    expect(row_for(bob, first).locator(".row-state")).to_have_text(re.compile("^Approved by carol"))
    expect(bobs_first.get_by_label("Comment")).to_have_value("checking the order first")
    expect(row_for(bob, first)).to_be_focused()  # not the row that follows it
    bob.keyboard.press("a")
    expect(bob.locator("#toasts .toast").last).to_have_text(
        re.compile("^Nothing was sent: this request is no longer open")
    )
    card_for(bob, second)  # answered only once bob picks it
    expect(row_for(bob, second)).to_be_focused()
    expect(card_for(alice, second)).to_have_count(1)
    bob.keyboard.press("a")
    finished(alice, second, "refunded 6 EUR on order E2E-FOCUS-2")


def test_a_reviewer_the_policy_does_not_name_sees_why_and_is_refused(dashboards, team_server):
    alice, bob, carol = dashboards(*TEAM)
    with carol.expect_websocket() as opened:  # a fresh load, to read the frames carol's socket receives
        carol.reload()
    carols_socket = opened.value

    wire = start_run(alice, "wire", {"amount": 40})
    carols, bobs = card_for(carol, wire), card_for(bob, wire)
    expect(carols).to_have_class(re.compile(r"\bread-only\b"), timeout=EVENT_TIMEOUT_MS)
    expect(carols.locator(".policy-line")).to_have_text("answered by bob")
    expect(carols.locator(".why-not")).to_have_text(ONLY_BOB)
    for label in ("Approve", "Decline", "Withdraw request"):
        expect(carols.get_by_role("button", name=label)).to_be_hidden()
    expect(carols.locator(ANY_INPUT)).to_have_count(0)
    expect(carol.locator("#request-count")).to_have_text("0")

    # carol forces the hidden form open and approves: the card sends it, and the server says no.
    carols.evaluate("card => { card.classList.remove('read-only'); card.querySelector('.card-body').inert = false; }")
    with carols_socket.expect_event(
        "framereceived", lambda frame: json.loads(frame)["type"] == "error", timeout=EVENT_TIMEOUT_MS
    ) as reply:
        carols.get_by_role("button", name="Approve").click()
    assert json.loads(reply.value)["error"] == "forbidden"
    expect(carols.locator(".card-error")).to_have_text(ONLY_BOB)
    refused = audit_rows(carol, team_server, wire, "request.answer_refused")
    expect(refused).to_have_count(1)
    expect(refused.locator("td").nth(2)).to_have_text("carol")
    expect(refused.locator("summary")).to_have_text(re.compile("^" + re.escape(ONLY_BOB[:60])))  # shortened there

    expect(bobs.get_by_role("button", name="Approve")).to_be_visible()
    expect(bobs.locator(".why-not")).to_have_count(0)
    bobs.get_by_role("button", name="Approve").click()
    finished(alice, wire, "wired 40 EUR")
    expect_tombstone(carols, "Approved by bob")


def test_the_cancel_run_button_is_shown_only_to_who_may_cancel_the_run(dashboards, team_server):
    alice, bob, carol = dashboards(*TEAM)
    wire = start_run(alice, "wire", {"amount": 25})
    expect(card_for(carol, wire)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)  # the run waits on its request

    def cancel_button(page):
        return page.locator(f'#runs tr[data-run-id="{wire}"]').get_by_role("button", name="Cancel run")

    # alice started it and bob may answer its request; carol, whom the wire policy leaves out, may not.
    expect(cancel_button(alice)).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    expect(cancel_button(bob)).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    expect(carol.locator(f'#runs tr[data-run-id="{wire}"]')).to_have_count(1)
    expect(cancel_button(carol)).to_have_count(0)
    carol.goto(f"{team_server.base_url}/runs/{wire}/")
    expect(carol.locator("#run-status")).to_have_text(re.compile("waiting", re.IGNORECASE))
    expect(carol.locator("#run-cancel")).to_be_hidden()

    cancel_button(bob).click()
    cancel_button(bob).click()  # the inline second yes stands where the button was
    expect(alice.locator(f'#recent-runs tr[data-run-id="{wire}"] .status')).to_have_text(
        "cancelled", timeout=EVENT_TIMEOUT_MS
    )


def test_one_decline_breaks_a_quorum_of_two_in_the_browser(dashboards, team_server):
    pages = alice, bob, carol = dashboards(*TEAM)
    payout = start_run(alice, "payout", {"amount": 80})
    cards = [card_for(page, payout) for page in pages]
    _, bobs, carols = cards
    bobs.get_by_role("button", name="Approve").click()
    for card in cards:
        expect(card.locator(".policy-line")).to_have_text(
            "1 of 2 approvals · approved by bob · four-eyes", timeout=EVENT_TIMEOUT_MS
        )
    decline(carols)
    for page in pages:
        finished(page, payout, "Declined by carol")
    expect(carols).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    for card in cards[:2]:
        expect_tombstone(card, "Declined by carol")
    declined = audit_rows(alice, team_server, payout, "request.declined")
    expect(declined).to_have_count(1)
    expect(declined.locator("td").nth(2)).to_have_text("carol")


def test_a_requests_own_page_shows_a_quorums_progress_live(dashboards, team_server):
    alice, bob, carol = dashboards(*TEAM)
    payout = start_run(alice, "payout", {"amount": 80})
    request_id = row_for(carol, payout).get_attribute("data-request-id")
    carol.goto(f"{team_server.base_url}/requests/{request_id}/")
    expect(carol.locator("#conn-status")).to_have_attribute("data-state", "live")
    carol.evaluate("window.__e2eSamePage = true")
    card = carol.locator(f'#requests article.card[data-request-id="{request_id}"]')
    expect(card.locator(".policy-line")).to_have_text("0 of 2 approvals · four-eyes")
    expect(carol.locator("#request-policy")).to_have_text("payouts need two · 0 of 2 approvals")

    card_for(bob, payout).get_by_role("button", name="Approve").click()
    expect(card.locator(".policy-line")).to_have_text(
        "1 of 2 approvals · approved by bob · four-eyes", timeout=EVENT_TIMEOUT_MS
    )
    expect(carol.locator("#request-policy")).to_have_text("payouts need two · 1 of 2 approvals")
    assert carol.evaluate("window.__e2eSamePage === true"), "the page reloaded"
    card.get_by_role("button", name="Approve").click()
    expect(carol.locator("#request-decision")).to_have_text("Approved by bob and carol", timeout=EVENT_TIMEOUT_MS)
    finished(alice, payout, "paid out 80 EUR")
