"""Nothing is approved that the reviewer did not see, and every edit is on the record: alice lowers a
refund from 33 to 4 in the inbox, and the run page (live, and drawn again), the request's own page, the
audit page and its CSV and JSON Lines exports all say "Approved by alice with amount 33 → 4", in
Chromium against a real daphne, on a laptop (1440x900) and a phone (390x844).
"""

import csv
import io
import json

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import SIDEWAYS_JS
from tests.support.console_page import (
    EVENT_TIMEOUT_MS,
    assert_not_reloaded,
    mark_page,
    pick,
    request_row,
    start_run,
)

from .conftest import LAPTOP, PHONE

SHOTS = "/work/shots/record"
WORDS = "Approved by alice with amount 33 → 4"


def approve_with_an_edit(tab, run_id):
    """alice changes the amount in the inbox and approves it, through the diff panel's second yes."""
    card = pick(tab.page, request_row(tab.page, run_id, kind="approval"))
    card.locator('input[name="amount"]').fill("4")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".diff-panel li")).to_have_text("amount 33 → 4")  # what she saw before sending
    card.get_by_role("button", name="Approve with this change").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)


def read_the_run_page(page):
    row = page.locator("#run-requests li.run-request")
    expect(row.locator(".decision-text")).to_have_text(WORDS, timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".decision-changes li")).to_have_text("amount 33 → 4")
    expect(row.locator(".decision-changes del")).to_have_text("33")
    expect(row.locator(".decision-changes ins")).to_have_text("4")
    expect(row.locator(".decision-given")).to_have_count(0)  # the words, not the raw JSON of the edit
    expect(page.locator("#run-decision")).to_have_text(WORDS)
    return row.get_attribute("data-request-id")


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_an_edited_approval_reads_the_same_on_every_page_and_export(reviewer, console_server, viewport):
    name = "laptop" if viewport == LAPTOP else "phone"
    alice, bob = reviewer("alice"), reviewer("bob")
    for tab in (alice, bob):
        tab.page.set_viewport_size(viewport)
    run_id = start_run(alice, console_server, "refund", {"order": f"E2E-EDIT-{name}", "amount": 33})

    # bob watches the run's page while alice decides: the words arrive live.
    watcher = bob.page
    watcher.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(watcher.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(watcher.locator("#run-requests li.run-request .decision")).to_have_text("Waiting for an answer.")
    mark_page(watcher)
    approve_with_an_edit(alice, run_id)
    request_id = read_the_run_page(watcher)
    # The run's output ends with what the reviewer changed, as the tool's caller reads it.
    told = " (a reviewer changed amount 33 → 4 before approving; the call ran with the changed values)"
    expect(watcher.locator("#run-result")).to_have_text(f"refunded 4 EUR on order E2E-EDIT-{name}{told}")
    assert_not_reloaded(watcher)

    # Drawn by the server: the same words.
    watcher.reload()
    read_the_run_page(watcher)
    assert watcher.evaluate(SIDEWAYS_JS) == 0
    watcher.screenshot(path=f"{SHOTS}/run-page-{name}.png", full_page=True)

    watcher.goto(f"{console_server.base_url}/requests/{request_id}/")
    expect(watcher.locator("#request-decision")).to_have_text(WORDS)
    expect(watcher.locator("#request-changes li")).to_have_text("amount 33 → 4")
    assert watcher.evaluate(SIDEWAYS_JS) == 0
    watcher.screenshot(path=f"{SHOTS}/request-page-{name}.png", full_page=True)

    watcher.goto(f"{console_server.base_url}/audit/?request={request_id}")
    answered = watcher.locator('#audit-events tr[data-action="request.answered"]')
    expect(answered.locator("td.who")).to_have_text("alice")
    expect(answered.locator("td.decision")).to_have_text(WORDS)
    assert watcher.evaluate(SIDEWAYS_JS) == 0
    watcher.screenshot(path=f"{SHOTS}/audit-{name}.png", full_page=True)

    exports = watcher.context.request
    table = exports.get(f"{console_server.base_url}/audit/export.csv?request={request_id}")
    assert table.status == 200
    [row] = [r for r in csv.DictReader(io.StringIO(table.text())) if r["action"] == "request.answered"]
    assert row["decision"] == WORDS
    lines = exports.get(f"{console_server.base_url}/audit/export.jsonl?request={request_id}")
    assert lines.status == 200
    [line] = [e for e in map(json.loads, lines.text().splitlines()) if e["action"] == "request.answered"]
    assert line["decision"]["text"] == WORDS
    assert line["decision"]["changes"] == [{"field": "amount", "from": 33, "to": 4}]
