"""The inbox's keyboard queue, its one detail, toasts and tombstones, in a real browser against a real daphne.

J/K and the arrows move the pick and the sticky bar names it; A, D, E and C act on the
picked request; ? lists the keys; edited arguments are approved only after a diff and
a second yes; after an answer a toast says what was done and the pick moves on; when
someone else answers, the request stays as a tombstone that says who and keeps what
was typed. And the same inbox on a 390x844 phone.
"""

import os
import re

from playwright.sync_api import expect

from tests.support.console_page import (
    DROP_SOCKET_JS,
    EVENT_TIMEOUT_MS,
    armed,
    expect_result,
    pick,
    request_in,
    request_row,
    start_run,
)

from .conftest import ARTIFACTS, LAPTOP, PHONE, REPO, copy_artifact


def picked_card(page):
    return page.locator("#request-detail article.card")


def sent(tab):
    return [(f["request"], f["ok"], f.get("reason"), f.get("comment")) for f in tab.answers_sent()]


def test_j_k_and_the_arrows_move_the_pick_and_the_sticky_bar_names_it(reviewer, host_requests):
    tab = reviewer("alice")
    page = tab.page
    hosts = ["ci-runner-1", "ci-runner-2", "ci-runner-3"]
    rows = host_requests(
        tab, ["keys-jk-0"], prompt="Deploy web to production?", host=hosts[0], tool="deploy", args={"service": "web"}
    )
    rows += host_requests(tab, ["keys-jk-1"], prompt="Rotate the API keys?", host=hosts[1], tool="rotate")
    rows += host_requests(tab, ["keys-jk-2"], prompt="Delete the old backups?", host=hosts[2], tool="cleanup")
    bar = page.locator("#focus-bar")
    expect(bar.locator(".focus-what")).to_have_text("No request picked: click one, or press J.")

    pick(page, rows[0])
    expect(bar.locator(".focus-prompt")).to_have_text("Deploy web to production?")
    for key, index in (("j", 1), ("ArrowDown", 2), ("k", 1), ("ArrowUp", 0), ("J", 1)):
        page.keyboard.press(key)
        expect(rows[index]).to_be_focused()
        expect(rows[index]).to_have_attribute("aria-selected", "true")
        expect(picked_card(page)).to_have_attribute("data-request-id", f"keys-jk-{index}")
    # The bar names what the keys act on: kind, tool, origin, prompt; the URL remembers the pick.
    expect(bar.locator(".kind")).to_have_text("approval")
    expect(bar.locator(".tool")).to_have_text("rotate")
    expect(bar.locator(".origin")).to_have_text("from ci-runner-2")
    expect(bar.locator(".focus-prompt")).to_have_text("Rotate the API keys?")
    expect(page).to_have_url(re.compile(r"[?&]request=keys-jk-1\b"))
    # It stays on screen while the page scrolls through the list.
    page.evaluate("window.scrollBy(0, 400)")
    expect(bar).to_be_in_viewport(ratio=1)
    assert sent(tab) == []


def test_e_edits_the_arguments_and_a_approves_them_only_after_a_diff_and_a_second_yes(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-DIFF", "amount": 49.9})
    card = pick(page, request_row(page, run_id, kind="approval"))
    amount = card.locator('input[name="amount"]')

    page.keyboard.press("e")  # to the fields the reviewer may change
    expect(amount).to_be_focused()
    amount.fill("5")
    page.keyboard.press("Escape")  # out of the field, back to the card, where keys work again
    expect(card).to_be_focused()
    page.keyboard.press("c")
    expect(card.get_by_label("Comment")).to_be_focused()
    page.keyboard.type("lowered: a partial refund")
    page.keyboard.press("Escape")

    page.keyboard.press("a")
    expect(card.locator("ul.diff li")).to_have_text(["amount 49.9 → 5"])
    expect(card.locator(".actions")).to_have_attribute("inert", "")  # the buttons stay, out of reach, above it
    assert sent(tab) == []
    armed(card)
    page.keyboard.press("a")  # the second yes
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    told = " (a reviewer changed amount 49.9 → 5 before approving; the call ran with the changed values)"
    expect_result(
        page, run_id, "refunded 5 EUR on order E2E-DIFF (lowered: a partial refund)" + told, status="succeeded"
    )
    [frame] = tab.answers_sent()
    assert frame["form"]["amount"] == "5" and frame["comment"] == "lowered: a partial refund"

    # Back to editing: changing a value after the diff was shown asks again, with the new value.
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-DIFF-2", "amount": 30})
    card = pick(page, request_row(page, run_id, kind="approval"))
    card.locator('input[name="amount"]').fill("20")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator("ul.diff li")).to_have_text(["amount 30 → 20"])
    card.get_by_role("button", name="Back to editing").click()
    expect(card.locator("ul.diff")).to_have_count(0)
    card.locator('input[name="amount"]').fill("10")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator("ul.diff li")).to_have_text(["amount 30 → 10"])
    card.get_by_role("button", name="Approve").click()
    told = " (a reviewer changed amount 30 → 10 before approving; the call ran with the changed values)"
    expect_result(page, run_id, "refunded 10 EUR on order E2E-DIFF-2" + told, status="succeeded")
    assert len(tab.answers_sent()) == 2 and tab.dialogs == []


def test_question_mark_lists_the_keys_and_no_key_acts_behind_the_list(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-HELP"})
    card = pick(page, request_row(page, run_id))
    dialog = page.locator("#key-help")
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    for key in ("J", "K", "A", "D", "E", "C", "X", "?"):
        expect(dialog.locator("kbd", has_text=re.compile(rf"^{re.escape(key)}$")).first).to_be_visible()
    page.keyboard.press("a")  # the list is open: nothing is answered
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.get_by_role("button", name="Keys").click()  # the same list, for the mouse
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    assert tab.answers_sent() == []
    card.focus()
    page.keyboard.press("d")
    armed(page.locator("#request-detail"))
    page.keyboard.press("Enter")
    expect_result(page, run_id, "Declined by alice", status="declined")


def test_after_an_answer_a_toast_says_what_was_done_and_the_pick_moves_to_the_next(reviewer, host_requests):
    tab = reviewer("alice")
    page = tab.page
    long_prompt = "Refund 40 EUR to Ada Lovelace for the order that arrived damaged, as the customer asked twice?"
    rows = host_requests(tab, ["toast-0"], prompt=long_prompt, tool="refund")
    rows += host_requests(tab, ["toast-1", "toast-2"], tool="refund")
    pick(page, rows[0])
    page.keyboard.press("a")
    toast = page.locator("#toasts .toast").last
    expect(toast).to_contain_text("Approved · Refund 40 EUR to Ada Lovelace for the order that arrived…")
    expect(rows[0]).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(rows[1]).to_be_focused()
    expect(picked_card(page)).to_have_attribute("data-request-id", "toast-1")
    page.keyboard.press("d")
    armed(page.locator("#request-detail"))
    page.keyboard.press("Enter")
    expect(page.locator("#toasts .toast").last).to_contain_text("Declined · Approve toast-1?")
    expect(rows[2]).to_be_focused()
    assert sent(tab) == [("toast-0", True, None, None), ("toast-1", False, "declined", None)]


def test_a_request_someone_else_answers_stays_as_a_tombstone_that_keeps_what_was_typed(reviewer, console_server):
    alice = reviewer("alice")
    bob = reviewer("bob")
    run_id = start_run(alice, console_server, "refund", {"order": "E2E-TOMB", "amount": 80})
    alice.page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    mine = pick(alice.page, request_row(alice.page, run_id))
    mine.locator('input[name="amount"]').fill("60")
    mine.get_by_label("Comment").fill("I was about to lower this: the parcel was only half damaged")

    theirs = pick(bob.page, request_row(bob.page, run_id))
    theirs.get_by_role("button", name="Decline").click()
    theirs.locator(".decline-reason").fill("too large")
    theirs.get_by_role("button", name="Decline").click()

    expect(mine).to_have_class(re.compile(r"\bclosed\b"), timeout=EVENT_TIMEOUT_MS)
    expect(mine.locator(".tombstone .card-error")).to_have_text(
        re.compile(r"^No longer open: Declined by bob: too large · \d\d:\d\d")
    )
    row = request_row(alice.page, run_id)
    expect(row.locator(".row-state")).to_have_text(re.compile(r"^Declined by bob: too large · \d\d:\d\d"))
    expect(alice.page.locator("#focus-bar .focus-closed")).to_contain_text("Declined by bob")
    # What alice typed is still there, read-only, and can be copied; nothing of it was sent.
    comment = mine.get_by_label("Comment")
    expect(comment).to_have_value("I was about to lower this: the parcel was only half damaged")
    expect(comment).to_have_attribute("readonly", "")
    expect(mine.locator('input[name="amount"]')).to_have_value("60")
    expect(mine.get_by_role("button", name="Approve")).to_have_count(0)
    mine.get_by_role("button", name="Copy what you typed").click()
    expect(mine.get_by_role("button", name="Copied")).to_be_visible()
    copied = alice.page.evaluate("navigator.clipboard.readText()")
    assert "the parcel was only half damaged" in copied and "60" in copied, copied
    mine.focus()
    alice.page.keyboard.press("a")
    expect(alice.page.locator("#toasts .toast").last).to_contain_text("Nothing was sent")
    assert alice.answers_sent() == []
    assert request_in(alice.page.context, console_server, mine.get_attribute("data-request-id"), "declined")

    mine.get_by_role("button", name="Dismiss").click()
    expect(row).to_have_count(0)
    expect(mine).to_have_count(0)


def test_the_picked_request_survives_a_reload_through_the_url(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-URL"})
    card = pick(page, request_row(page, run_id))
    request_id = card.get_attribute("data-request-id")
    expect(page).to_have_url(re.compile(rf"\?request={re.escape(request_id)}$"))
    page.reload()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(picked_card(page)).to_have_attribute("data-request-id", request_id)
    expect(request_row(page, run_id)).to_have_attribute("aria-selected", "true")
    expect(page.locator("#focus-bar .focus-prompt")).to_have_text("Refund 25.0 EUR on order E2E-URL?")
    expect(request_row(page, run_id).locator("a.permalink")).to_have_attribute("href", f"/requests/{request_id}/")
    request_row(page, run_id).focus()
    page.keyboard.press("d")
    armed(page.locator("#request-detail"))
    page.keyboard.press("Enter")
    expect_result(page, run_id, "Declined by alice", status="declined")


# The focus bar's prompt element: the text it holds, and whether any of it is cut (ellipsis or line clamp).
PROMPT_SHOWN_JS = """(prompt) => ({
  text: prompt.textContent,
  cutSideways: prompt.scrollWidth > prompt.clientWidth,
  cutBelow: prompt.scrollHeight > prompt.clientHeight,
})"""
LONG_PROMPT = (
    "Refund 49.9 EUR on order A-2048 to Jane Doe, card ending 4242, for the winter jacket "
    "that arrived torn and two weeks late?"
)


def test_the_sticky_bar_shows_a_long_prompt_whole_beside_the_claim_controls(reviewer, host_requests):
    assert 110 <= len(LONG_PROMPT) <= 130
    tab = reviewer("alice")
    page = tab.page
    page.set_viewport_size(LAPTOP)
    [row] = host_requests(tab, ["bar-long-1"], prompt=LONG_PROMPT, host="ci-runner-7", tool="refund")
    pick(page, row)
    bar = page.locator("#focus-bar")
    expect(bar.get_by_role("button", name="Claim")).to_be_visible()
    prompt = bar.locator(".focus-prompt")
    expect(prompt).to_have_text(LONG_PROMPT)
    assert prompt.evaluate(PROMPT_SHOWN_JS) == {"text": LONG_PROMPT, "cutSideways": False, "cutBelow": False}
    expect(prompt).to_be_in_viewport(ratio=1)

    # On a phone-sized window the bar wraps instead of pushing the page sideways, and its buttons are 44 px.
    page.set_viewport_size(PHONE)
    expect(bar.locator(".key-hint")).to_be_hidden()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    for name in ("Claim", "Hand over…"):
        box = bar.get_by_role("button", name=name).bounding_box()
        assert box["height"] >= 44 and box["x"] + box["width"] <= PHONE["width"], (name, box)


def test_the_inbox_on_a_phone_expands_one_row_with_touch_sized_buttons_and_no_sideways_scroll_screenshot(
    phone, console_server
):
    page = phone.page
    refund = start_run(phone, console_server, "refund", {"order": "A-2048", "amount": 49.9})
    deploy = start_run(phone, console_server, "deploy", {"service": "billing-api"})
    row = request_row(page, refund)
    expect(request_row(page, deploy)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(row).to_have_count(1)
    row.locator(".row-prompt").tap()
    card = page.locator(f'#request-detail article.card[data-request-id="{row.get_attribute("data-request-id")}"]')
    expect(card).to_be_visible()
    # The detail is the expanded part of its own row, right under it.
    assert page.evaluate("document.querySelector('#request-detail').previousElementSibling.classList.contains('row')")
    assert page.evaluate(
        "document.querySelector('#request-detail').previousElementSibling.classList.contains('selected')"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    for name in ("Approve", "Decline", "Withdraw request"):
        assert card.get_by_role("button", name=name).bounding_box()["height"] >= 44, name
    assert row.locator(".row-check").bounding_box()["height"] >= 44
    assert row.locator(".row-check").bounding_box()["width"] >= 44
    expect(page.locator("#focus-bar .key-hint")).to_be_hidden()  # no keys to press on a touch screen
    expect(page.locator("#show-keys")).to_be_hidden()

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "dashboard-phone.png"
    page.screenshot(path=str(shot))
    if os.environ.get("UPDATE_README_SCREENSHOT") == "1":  # `make screenshot` refreshes the README's pictures
        copy_artifact(shot, REPO / "docs" / "dashboard-phone.png")

    # Every other control a reviewer taps here is a 44 px target too (padding, not bigger text).
    page.locator("#filter-more summary").tap()
    targets = {
        "filter checkbox labels": page.locator("#filter-more label.check"),
        "Select shown": page.locator("label.select-shown"),
        "the card's run link": card.locator("header a"),
        "the request's own page": page.locator("#request-detail .detail-links a"),
    }
    for name, controls in targets.items():
        for box in controls.evaluate_all("els => els.map((e) => e.getBoundingClientRect().toJSON())"):
            assert box["height"] >= 44, (name, box)
    page.locator("#filter-more summary").tap()
    card.get_by_role("button", name="Decline").tap()
    card.get_by_role("button", name="Decline").tap()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(request_row(page, deploy)).to_have_attribute("aria-selected", "true")  # the pick moved on
    picked_card(page).get_by_role("button", name="Decline").tap()
    picked_card(page).get_by_role("button", name="Decline").tap()
    expect(request_row(page, deploy)).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    assert [f["ok"] for f in phone.answers_sent()] == [False, False]


LONG_HOST = "billing-worker-01.prod.internal.example.com"


def test_on_a_phone_a_long_host_name_stays_on_one_line_and_the_prompt_keeps_its_words(phone, host_requests):
    page = phone.page
    prompt = "Refund 40 EUR on order A-2048 for the damaged parcel?"
    [row] = host_requests(phone, ["long-host-1"], prompt=prompt, host=LONG_HOST, tool="refund")
    origin = row.locator(".row-meta .origin")
    expect(origin).to_have_attribute("title", f"host: {LONG_HOST}")  # the whole name, when it is cut short
    line = page.evaluate("parseFloat(getComputedStyle(document.querySelector('.row-meta')).lineHeight) || 16")
    assert origin.bounding_box()["height"] <= 1.5 * line, origin.bounding_box()
    # The prompt wraps to a second line on a phone instead of ending at "A-2…".
    shown = row.locator(".row-prompt").evaluate(
        "(el) => ({ cut: el.scrollHeight > el.clientHeight + 1 || el.scrollWidth > el.clientWidth + 1 })"
    )
    assert shown == {"cut": False}
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_a_card_scrolled_to_is_never_under_the_sticky_bar(reviewer, host_requests):
    tab = reviewer("alice")
    page = tab.page
    rows = host_requests(tab, [f"under-bar-{i}" for i in range(30)], prompt=LONG_PROMPT, tool="refund")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    rows[-1].locator(".row-prompt").click()
    card = page.locator('#request-detail article.card[data-request-id="under-bar-29"]')
    expect(card).to_be_visible()
    bar = page.locator("#focus-bar").bounding_box()
    header = card.locator("header").bounding_box()
    assert header["y"] >= bar["y"] + bar["height"], (header, bar)  # the detail pane starts below the bar
    # The keys move the pick and scroll its row into view below the bar, not under it.
    page.keyboard.press("k")
    page.keyboard.press("k")
    expect(rows[-3]).to_have_attribute("aria-selected", "true")
    for _ in range(20):
        page.keyboard.press("k")
    expect(rows[-23]).to_have_attribute("aria-selected", "true")
    bar = page.locator("#focus-bar").bounding_box()
    picked = rows[-23].bounding_box()
    assert picked["y"] >= bar["y"] + bar["height"] - 1, (picked, bar)


def test_a_reconnect_leaves_the_keyboard_in_the_reason_being_typed(reviewer, console_server):
    # A snapshot (every reconnect brings one) redraws the picked request's pane: the decline reason being
    # typed keeps the focus, so the rest of it and Enter still go there.
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-REFOCUS"})
    pick(page, request_row(page, run_id))
    page.keyboard.press("d")
    armed(page.locator("#request-detail"))
    reason = page.locator("#request-detail .decline-reason")
    page.keyboard.type("not this")
    page.evaluate(DROP_SOCKET_JS)
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "offline")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live", timeout=EVENT_TIMEOUT_MS)
    expect(reason).to_be_focused()
    page.keyboard.type(" week")
    page.keyboard.press("Enter")
    expect_result(page, run_id, "Declined by alice: not this week", status="declined")
