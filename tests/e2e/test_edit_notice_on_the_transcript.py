"""An edit the model is told of, on the run page (issue 36, parts 3 and 6), in Chromium against a real daphne.

alice starts an agent run whose script branches on the reviewer's edit, lowers the refund on the run's own
page and approves: the transcript shows the result as the model read it (the refund made with the edited
amount, then what changed), and the model's next turn takes the branch. At 1440x900 and 390x844.
"""

from pathlib import Path

from playwright.sync_api import expect

from tests.support.browser_api import SIDEWAYS_JS
from tests.support.console_page import EVENT_TIMEOUT_MS

SHOTS = Path("/work/shots/edits")
TOLD = " (a reviewer changed amount 33 → 4 before approving; the call ran with the changed values)"


def start_agent(page, prompt):
    page.select_option("#agent-model", "scripted")
    page.fill("#agent-prompt", prompt)
    with page.expect_response(lambda r: r.url.endswith("/api/v1/runs") and r.request.method == "POST") as answer:
        page.click("#start-agent button[type=submit]")
    assert answer.value.status == 201, answer.value.text()
    return answer.value.json()["id"]


def test_the_transcript_shows_the_edit_notice_the_model_read_and_the_branch_it_took(alice_at, console_server):
    tab, viewport = alice_at
    page = tab.page
    name = "laptop" if viewport["width"] > 800 else "phone"
    order = f"E2E-NOTICE-{name}"
    expect(page.locator("#agent-prompt-help")).to_contain_text('if "declined" then call <tool>')
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#start-agent").screenshot(path=SHOTS / f"start-agent-help-{name}.png")
    run_id = start_agent(
        page,
        f'call refund with {{"order": "{order}", "amount": 33}} '
        'then if "a reviewer changed amount" then call crunch with {"steps": 1, "pause": 0} else call deploy',
    )
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")

    card = page.locator('#requests article.card[data-kind="approval"]')
    card.locator('input[name="amount"]').fill("4", timeout=EVENT_TIMEOUT_MS)
    card.get_by_role("button", name="Approve", exact=True).click()
    card.get_by_role("button", name="Approve with this change").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)

    transcript = page.locator("#transcript")
    results = transcript.locator('[data-kind="tool_result"] pre')
    told = f"refunded 4 EUR on order {order}{TOLD}"
    expect(results).to_have_text([told, "crunched 1 of 1 steps"], timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#run-status")).to_have_text("succeeded", timeout=EVENT_TIMEOUT_MS)

    # Drawn again by the server: the same words.
    page.reload()
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    expect(results).to_have_text([told, "crunched 1 of 1 steps"])
    assert page.evaluate(SIDEWAYS_JS) == 0
    page.screenshot(path=SHOTS / f"transcript-{name}.png", full_page=True)
