"""A new user's first walk through the console in Chromium, on a console of its own (so the first test
finds nothing waiting): the laptop inbox says nothing is waiting and how to start a run, the Start-a-run
form opens on the console's own first tool with placeholders from each schema, a run's page says what
its buttons do and shows what became of the run in words, times read one short way, a phone says "tap",
and the audit page keeps each time and each "tool:<name>" on one line at 1440x900."""

import re

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, Tab, decline, finished_row, pick, request_row, start_run

from .conftest import CREATE_USERS, PASSWORD, USERS, serve_console

LAPTOP = {"width": 1440, "height": 900}
CLOCK = re.compile(r"^\d\d:\d\d UTC$")
RUNS_URL = "/api/v1/runs"


@pytest.fixture(scope="module")
def console_server(tmp_path_factory):
    """This module's own console: nothing is waiting on it until its tests ask."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-first-walk"),
        "e2e-first-walk",
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
    ) as server:
        yield server


def test_with_nothing_waiting_the_inbox_says_so_and_how_to_start_a_run(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    empty = page.locator("#requests-empty")
    expect(empty).to_contain_text("Nothing is waiting for you.")
    expect(empty.get_by_role("link", name="start a run")).to_have_attribute("href", "#start-title")
    expect(page.locator("#request-detail")).to_be_hidden()  # said once, by the list
    # Once something asks, the pane says how to pick it instead.
    run_id = start_run(tab, console_server, "deploy")
    expect(request_row(page, run_id)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#request-detail")).to_have_text("Pick a request from the list: click one, or press J.")
    decline(pick(page, request_row(page, run_id)))


def test_the_start_form_opens_on_deploy_and_shows_each_lists_shape(reviewer):
    page = reviewer("alice").page
    expect(page.locator("#start-tool")).to_have_value("deploy")
    page.select_option("#start-tool", "question")
    questions = page.locator('#start-args-form textarea[name="questions"]')
    expect(questions).to_have_attribute("placeholder", '[{"question": "text", "header": "text", "options": ["text"]}]')
    questions.fill('["a", "b"]')
    with page.expect_response(lambda r: r.url.endswith(RUNS_URL) and r.request.method == "POST") as answer:
        page.click("#start-run button[type=submit]")
    assert answer.value.status == 400
    expect(page.locator('#start-args-form .field-error[data-field="questions"]')).to_contain_text(
        "Item 1 is not an object: each item is a JSON object with question (text)"
    )


def test_a_runs_page_says_what_its_buttons_do_and_what_became_of_the_run(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"order": "E2E-WALK"})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    card = page.locator("#requests article.card")
    expect(card).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(card.get_by_role("button", name="Withdraw request")).to_be_visible()
    expect(page.locator(f'#requests a[href="/runs/{run_id}/"]')).to_have_count(0)  # no link to this very page
    hint = page.locator("#requests-keys-hint")
    expect(hint).to_be_visible()

    card.get_by_label("Comment").fill("too risky")
    decline(card)
    # The run finished: no "Open request" panel is left to say it waits for nobody.
    expect(page.locator("#open-request-panel")).to_be_hidden(timeout=EVENT_TIMEOUT_MS)
    expect(hint).to_be_hidden()
    expect(page.locator("#run-status")).to_have_text("declined", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#run-result")).to_have_text("Declined by alice: too risky")
    # Every time on the page reads one way, the live ones included; the exact moment stays in datetime.
    times = page.locator("#timeline time, #run-requests time")
    expect(page.locator('#timeline li[data-action="request.declined"]')).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    for text in times.all_inner_texts():
        assert CLOCK.match(text), text
    for moment in page.locator("#timeline time").evaluate_all("ts => ts.map((t) => t.getAttribute('datetime'))"):
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", moment), moment

    page.goto(f"{console_server.base_url}/")
    row = finished_row(page, run_id)
    expect(row.locator(".status")).to_have_text("declined", timeout=EVENT_TIMEOUT_MS)
    expect(row.locator(".result")).to_have_text("Declined by alice: too risky")
    expect(row.locator(".finished time")).to_have_text(CLOCK)


def test_a_phone_says_tap_to_pick_a_request(phone, console_server):
    run_id = start_run(phone, console_server, "deploy")  # with nothing listed, the bar is not shown at all
    expect(request_row(phone.page, run_id)).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    expect(phone.page.locator("#focus-bar .focus-what")).to_have_text("No request picked: tap one.")
    decline(pick(phone.page, request_row(phone.page, run_id)))


def test_the_audit_page_keeps_times_and_tool_names_on_one_line_on_a_laptop(browser, console_server, login_states):
    context = browser.new_context(viewport=LAPTOP, storage_state=login_states["alice"])
    try:
        page = context.new_page()
        page.goto(f"{console_server.base_url}/")
        run_id = start_run(Tab(page), console_server, "crunch", {"steps": 0})
        # The audit page is not live: open it once the run has finished, so the tool's own event is on it.
        expect(finished_row(page, run_id)).to_be_visible(timeout=EVENT_TIMEOUT_MS)
        page.goto(f"{console_server.base_url}/audit/")
        expect(page.locator("#audit-events td.who", has_text="tool:crunch").first).to_be_visible()
        lines = page.evaluate(
            """() => {
              const lines = (node) => { const r = document.createRange(); r.selectNodeContents(node);
                return new Set([...r.getClientRects()].map((rect) => Math.round(rect.top))).size; };
              return {
                when: [...document.querySelectorAll("#audit-events td.when")].map(lines),
                who: [...document.querySelectorAll("#audit-events td.who")].filter((td) => td.textContent.includes("tool:")).map(lines),
                sideways: document.documentElement.scrollWidth > document.documentElement.clientWidth,
              };
            }"""
        )
        assert lines["when"] and set(lines["when"]) == {1}, lines
        assert lines["who"] and set(lines["who"]) == {1}, lines
        assert not lines["sideways"]
    finally:
        context.close()
