"""An agent run in Chromium: started from the dashboard's agent form, followed and answered on its page.

The page's three modules meet here: agent_form.js starts the run, run.js shows its request
and its status live, transcript.js adds each step of the loop as it happens.
"""

import re

from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS


def test_an_agent_run_from_the_dashboard_is_answered_and_followed_live_on_its_page(open_dashboard, console_server):
    page, _ = open_dashboard("alice")
    page.select_option("#agent-model", "scripted")
    page.fill("#agent-prompt", 'call refund with {"order": "E2E-7", "amount": 12.5}')
    with page.expect_response(lambda r: r.url.endswith("/api/v1/runs") and r.request.method == "POST") as answer:
        page.click("#start-agent button[type=submit]")
    assert answer.value.status == 201, answer.value.text()
    run_id = answer.value.json()["id"]

    link = page.locator("#agent-result a")
    expect(link).to_have_text(f"agent run #{run_id}")
    link.click()
    expect(page).to_have_url(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")

    card = page.locator('#requests article.card[data-kind="approval"]')
    expect(card.locator(".prompt")).to_have_text("Refund 12.5 EUR on order E2E-7?", timeout=EVENT_TIMEOUT_MS)
    transcript = page.locator("#transcript")
    expect(transcript.locator('[data-kind="pending"]')).to_contain_text("refund")
    card.get_by_role("button", name="Approve", exact=True).click()

    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    expect(transcript.locator('[data-kind="tool_result"]')).to_contain_text(
        "refunded 12.5 EUR on order E2E-7", timeout=EVENT_TIMEOUT_MS
    )
    expect(transcript.locator('[data-kind="finished"]')).to_contain_text("Finished", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#transcript-progress")).to_be_hidden()


def test_an_agent_runs_expired_request_reads_on_its_page_as_the_model_read_it(open_dashboard, console_server):
    """Nobody answers: the transcript's result is §10's exact prefix and then what happened, as the model read it,
    beside the decision "Expired at 20:14 UTC, nobody answered"; the model's answer quotes the same words."""
    page, _ = open_dashboard("alice")
    page.select_option("#agent-model", "scripted")
    page.fill("#agent-prompt", 'call expiring with {"seconds": 2}')
    with page.expect_response(lambda r: r.url.endswith("/api/v1/runs") and r.request.method == "POST") as answer:
        page.click("#start-agent button[type=submit]")
    assert answer.value.status == 201, answer.value.text()
    run_id = answer.value.json()["id"]
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")

    told = r"declined/expired: Approve within 2 seconds\? \(expired at \d\d:\d\d UTC, nobody answered\)"
    transcript = page.locator("#transcript")
    result = transcript.locator('[data-kind="tool_result"]')
    expect(result.locator("pre")).to_have_text(re.compile(f"^{told}$"), timeout=10_000)
    expect(result.locator(".transcript-decision")).to_have_text(
        re.compile(r"^Expired at \d\d:\d\d UTC, nobody answered$")
    )
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#run-result")).to_contain_text(re.compile(f"- expiring: {told}"))
