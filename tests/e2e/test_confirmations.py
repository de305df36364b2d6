"""Asking once more before what cannot be undone, and saying what was done, in Chromium against a real daphne.

Cancel run (a dashboard row, a run's page) asks inline and then says what it did in a toast;
toasts sit where they cover no button the reviewer works with; a toast after edited arguments
names the edit; a key that does nothing says why; A on an input form with errors goes to the
first field to fix.
"""

import pytest
from playwright.sync_api import expect

from tests.support.console_page import (
    EVENT_TIMEOUT_MS,
    armed,
    decline,
    expect_result,
    field_error,
    open_card,
    overlaps,
    pick,
    request_row,
    start_run,
)

from .conftest import LAPTOP, PHONE

CANCEL_QUESTION = "Cancel run #{id} ({tool})? The tool is stopped and its open requests withdrawn."


def active_row(page, run_id):
    return page.locator(f'#runs tr[data-run-id="{run_id}"]')


def last_toast(page):
    return page.locator("#toasts .toast").last


def test_cancel_run_on_the_dashboard_asks_inline_then_says_what_it_did(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "crunch", {"steps": 200, "pause": 0.1})
    row = active_row(page, run_id)
    expect(row.locator(".status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)

    row.get_by_role("button", name="Cancel run").click()
    panel = row.locator(".cancel-panel")
    expect(panel.locator(".confirm-question")).to_have_text(CANCEL_QUESTION.format(id=run_id, tool="crunch"))
    expect(panel.get_by_role("button", name="Cancel run")).to_be_focused()
    page.keyboard.press("Escape")  # keep it running: the question goes, focus goes back to the button
    expect(panel).to_have_count(0)
    expect(row.get_by_role("button", name="Cancel run")).to_be_focused()
    expect(row.locator(".status")).to_have_text("running")

    page.keyboard.press("Enter")  # asks again
    expect(panel.get_by_role("button", name="Keep running")).to_be_visible()
    armed(row)
    page.keyboard.press("Enter")  # the second yes
    expect(last_toast(page)).to_have_text(f"Cancelled run #{run_id} (crunch)×", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator(f'#recent-runs tr[data-run-id="{run_id}"] .status')).to_have_text(
        "cancelled", timeout=EVENT_TIMEOUT_MS
    )
    expect(row).to_have_count(0)
    expect(page.locator("#runs-title")).to_be_focused()  # no run left: the section, not <body>
    assert tab.dialogs == []


def test_cancel_run_on_its_page_asks_inline_and_keep_running_keeps_it(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "crunch", {"steps": 200, "pause": 0.1})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#run-status")).to_have_text("running", timeout=EVENT_TIMEOUT_MS)

    page.locator("#run-cancel").click()
    question = page.locator(".cancel-panel .confirm-question")
    expect(question).to_have_text(CANCEL_QUESTION.format(id=run_id, tool="crunch"))
    page.get_by_role("button", name="Keep running").click()
    expect(question).to_have_count(0)
    expect(page.locator("#run-cancel")).to_be_focused()
    expect(page.locator("#run-status")).to_have_text("running")

    page.locator("#run-cancel").click()
    page.locator(".cancel-panel").get_by_role("button", name="Cancel run").click()
    expect(last_toast(page)).to_have_text(f"Cancelled run #{run_id} (crunch)×", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=EVENT_TIMEOUT_MS)
    assert tab.dialogs == []


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_toast_covers_neither_the_picked_row_nor_the_next_cards_buttons(
    reviewer, console_server, host_requests, viewport
):
    tab = reviewer("alice")
    page = tab.page
    page.set_viewport_size(viewport)
    crunch = start_run(tab, console_server, "crunch", {"steps": 200, "pause": 0.1})  # a Cancel run button
    expect(active_row(page, crunch).get_by_role("button", name="Cancel run")).to_be_visible(timeout=EVENT_TIMEOUT_MS)
    rows = host_requests(tab, [f"cover-{viewport['width']}-{i}" for i in range(3)], tool="refund")
    card = pick(page, rows[0])
    card.get_by_role("button", name="Approve").click()
    toast = last_toast(page)
    expect(toast).to_contain_text("Approved", timeout=EVENT_TIMEOUT_MS)
    next_card = page.locator("#request-detail article.card")
    expect(next_card).to_have_attribute("data-request-id", f"cover-{viewport['width']}-1")
    # Wherever the reviewer has scrolled them: as far down the screen as they go (where A's scroll leaves them).
    controls = [rows[1], *next_card.locator(".actions button").all(), *page.locator("#runs button").all()]
    for control in controls:
        control.evaluate("(el) => el.scrollIntoView({ block: 'end' })")
        box, where = toast.bounding_box(), control.bounding_box()
        assert not overlaps(box, where), f"the toast {box} covers {control} at {where}"
    for control in page.locator("#focus-bar button:visible").all():  # the sticky bar's Claim, with the page scrolled
        box, where = toast.bounding_box(), control.bounding_box()
        assert not overlaps(box, where), f"the toast {box} covers {control} at {where}"
    active_row(page, crunch).get_by_role("button", name="Cancel run").click()
    active_row(page, crunch).locator(".cancel-panel").get_by_role("button", name="Cancel run").click()
    expect(active_row(page, crunch)).to_have_count(0, timeout=EVENT_TIMEOUT_MS)


def test_the_toast_after_edited_arguments_names_the_edit(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-EDIT-TOAST", "amount": 25})
    card = pick(page, request_row(page, run_id, kind="approval"))
    card.locator('input[name="amount"]').fill("5")
    card.get_by_role("button", name="Approve").click()
    card.get_by_role("button", name="Approve with this change").click()
    expect(last_toast(page)).to_contain_text(
        "Approved with amount 5 · Refund 25 EUR on order E2E-EDIT-TOAST?", timeout=EVENT_TIMEOUT_MS
    )
    told = " (a reviewer changed amount 25 → 5 before approving; the call ran with the changed values)"
    expect_result(page, run_id, "refunded 5 EUR on order E2E-EDIT-TOAST" + told, status="succeeded")


def test_a_on_a_request_that_cannot_be_approved_says_why_in_a_toast(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id, card = open_card(tab, console_server, "ask_secret", {"service": "E2E-KEYS"}, kind="input")
    card.focus()
    page.keyboard.press("a")
    expect(last_toast(page)).to_contain_text("Nothing was sent: This request can only be declined or cancelled.")
    decline(card)


def test_a_on_an_input_form_with_errors_moves_focus_to_the_first_field_to_fix(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "signup", {"company": "E2E Focus"})
    row = request_row(page, run_id, kind="input")
    card = pick(page, row)
    expect(row).to_be_focused()
    page.keyboard.press("a")
    expect(field_error(card, "email")).to_have_text("This field is required.", timeout=EVENT_TIMEOUT_MS)
    expect(card.locator(".has-error input, .has-error select, .has-error textarea").first).to_be_focused()
    decline(card)
