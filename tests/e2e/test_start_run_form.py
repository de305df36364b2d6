"""The dashboard's Start-a-run form in a real browser against a real daphne.

It opens with the defaults each tool's input schema declares; the server checks the args
against that schema before anything starts and the form shows each refusal beside its
field; a list or object argument (and the whole args, in JSON mode) is a JSON editor that
refuses text that is not JSON before anything is sent; once the new run asks, its request
is highlighted and scrolled into view, and the keyboard stays where the reviewer left it.
On a 390x844 phone the form fits the width with 44 px targets.
"""

import json
import os
import re
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, decline, pick, record_focus, request_row

from .conftest import ARTIFACTS, CREATE_USERS, LAPTOP, PASSWORD, PHONE, USERS, login, serve_console

RUNS_URL = "/api/v1/runs"
SHOTS = Path(os.environ.get("E2E_SHOTS", ARTIFACTS / "shots"))


def arg(page, name):
    return page.locator(f'#start-args-form [name="{name}"]')


def arg_error(page, name):
    return page.locator(f'#start-args-form .field-error[data-field="{name}"]')


def posts_of_runs(page):
    """From now on, every POST the page sends to /api/v1/runs, in a list."""
    sent = []
    page.on("request", lambda r: sent.append(r) if r.method == "POST" and r.url.endswith(RUNS_URL) else None)
    return sent


def submit(page, status):
    """Press Start run; returns the API's answer, which must have ``status``."""
    with page.expect_response(lambda r: r.url.endswith(RUNS_URL) and r.request.method == "POST") as answer:
        page.click("#start-run button[type=submit]")
    assert answer.value.status == status, answer.value.text()
    return answer.value.json()


def decline_run_request(page, run_id):
    decline(pick(page, request_row(page, run_id)))


def test_the_form_opens_with_the_defaults_the_tools_declare(reviewer):
    page = reviewer("alice").page
    page.select_option("#start-tool", "refund")
    expect(arg(page, "order")).to_have_value("A-1001")
    expect(arg(page, "amount")).to_have_value("25")
    expect(arg(page, "currency").locator("option:checked")).to_have_text("EUR")
    page.select_option("#start-tool", "crunch")
    expect(arg(page, "steps")).to_have_value("50")
    expect(arg(page, "pause")).to_have_value("0.1")
    # JSON mode starts from the same values.
    page.select_option("#start-tool", "refund")
    page.check("input[name='args-mode'][value='json']")
    assert json.loads(page.input_value("#start-args-json")) == {"order": "A-1001", "amount": 25, "currency": "EUR"}


def test_args_the_tool_refuses_are_shown_beside_each_field_and_nothing_starts(reviewer):
    page = reviewer("alice").page
    posts = posts_of_runs(page)
    page.select_option("#start-tool", "refund")
    arg(page, "amount").fill("-5")
    body = submit(page, 400)
    assert body["field_errors"] == {"amount": ["Enter a number greater than 0."]}
    expect(arg_error(page, "amount")).to_have_text("Enter a number greater than 0.")
    expect(page.locator("#start-error")).to_have_text(
        "Nothing was started: refund does not take these arguments. Fix amount, marked above."
    )
    expect(arg(page, "amount")).to_have_value("-5")  # nothing typed is lost
    expect(arg(page, "amount")).to_be_focused()  # the reviewer pressed Start: on to the field at fault
    expect(page.locator("#start-result")).to_have_text("")

    # In JSON mode the refusals are listed under the editor, each naming its argument.
    page.check("input[name='args-mode'][value='json']")
    page.fill("#start-args-json", '{"amount": "lots", "currency": "XXX"}')
    submit(page, 400)
    expect(page.locator("#start-args-json-error div")).to_have_text(
        ["amount: Enter a number.", "currency: Choose one of: EUR, USD, GBP."]
    )
    page.fill("#start-args-json", '{"order": "E2E-FIXED", "amount": 5}')
    run_id = submit(page, 201)["id"]
    expect(page.locator("#start-args-json-error")).to_be_empty()
    expect(page.locator("#start-error")).to_be_hidden()
    assert len(posts) == 3
    decline_run_request(page, run_id)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["1440x900", "390x844"])
def test_a_blank_service_is_refused_and_the_message_says_where_the_marked_field_is(reviewer, viewport):
    """Before: deploy took "  " and asked "Which environment should    be deployed to?"; and the message
    under the fields said "Fix what is marked below" about a field above it."""
    tab = reviewer("alice")
    page = tab.page
    page.set_viewport_size(viewport)
    posts = posts_of_runs(page)
    page.select_option("#start-tool", "deploy")
    arg(page, "service").fill("   ")
    body = submit(page, 400)
    assert body["field_errors"] == {"service": ["Enter some text (not only spaces)."]}
    expect(arg_error(page, "service")).to_have_text("Enter some text (not only spaces).")
    message = page.locator("#start-error")
    expect(message).to_have_text(
        "Nothing was started: deploy does not take these arguments. Fix service, marked above."
    )
    marked, said = arg_error(page, "service").bounding_box(), message.bounding_box()
    assert marked["y"] + marked["height"] <= said["y"], (marked, said)  # "above" is where the marked field is
    page.screenshot(path=str(ARTIFACTS / f"start-blank-service-{viewport['width']}.png"), full_page=True)
    assert len(posts) == 1


def test_the_json_editor_refuses_bad_json_inline_and_sends_nothing(reviewer):
    page = reviewer("alice").page
    posts = posts_of_runs(page)
    page.select_option("#start-tool", "confirm")
    details = arg(page, "details")
    expect(details).to_have_value('{\n  "risk": "low"\n}')  # the default, pretty-printed

    details.fill('{"risk": ')
    details.press("Tab")
    error = arg_error(page, "details")
    expect(error).to_contain_text("This is not valid JSON")
    expect(details).to_have_attribute("aria-invalid", "true")
    page.click("#start-run button[type=submit]")
    expect(page.locator("#start-error")).to_have_text("Nothing was started: fix what is marked above.")

    details.fill('["high"]')
    details.press("Tab")
    expect(error).to_have_text('Enter a JSON object, like {"key": "value"}.')
    page.click("input[name='args-mode'][value='json']")  # refused too: the field is not JSON of its shape
    expect(page.locator("input[name='args-mode'][value='form']")).to_be_checked()
    assert posts == []

    details.fill('{"risk":"high","ticket":"OPS-1"}')
    details.press("Tab")
    expect(error).to_be_empty()
    expect(details).to_have_value('{\n  "risk": "high",\n  "ticket": "OPS-1"\n}')
    run_id = submit(page, 201)["id"]
    card = pick(page, request_row(page, run_id, kind="confirmation"))
    expect(card).to_contain_text("OPS-1")
    decline(card)

    # The whole args as JSON: the same editor, the same refusal.
    page.check("input[name='args-mode'][value='json']")
    page.fill("#start-args-json", "{oops")
    page.click("#start-run button[type=submit]")
    expect(page.locator("#start-args-json-error")).to_contain_text("This is not valid JSON")
    page.fill("#start-args-json", "[1, 2]")
    page.click("#start-run button[type=submit]")
    expect(page.locator("#start-args-json-error")).to_have_text('Enter a JSON object, like {"key": "value"}.')
    assert len(posts) == 1


def test_the_new_runs_request_is_scrolled_to_and_highlighted_without_taking_focus(reviewer, host_requests):
    tab = reviewer("alice")
    page = tab.page
    host_requests(tab, [f"start-crowd-{i}" for i in range(14)])
    page.select_option("#start-tool", "deploy")
    # Pressing Enter in the timeout field sends the form from the bottom of the page, the list out of view.
    page.evaluate("document.getElementById('start-timeout').focus(); window.scrollTo(0, document.body.scrollHeight)")
    record_focus(page)
    bottom = page.evaluate("window.scrollY")
    with page.expect_response(lambda r: r.url.endswith(RUNS_URL) and r.request.method == "POST") as answer:
        page.keyboard.press("Enter")
    run_id = answer.value.json()["id"]

    row = request_row(page, run_id, kind="input")
    expect(row).to_have_class(re.compile(r"\bjust-started\b"), timeout=EVENT_TIMEOUT_MS)
    expect(row).to_be_in_viewport()
    assert page.evaluate("window.scrollY") < bottom
    expect(page.locator("#start-timeout")).to_be_focused()  # the keyboard stays where the reviewer left it
    assert page.evaluate("window.__focused") == []
    expect(row).not_to_have_attribute("aria-selected", "true")  # highlighted, not picked
    expect(page.locator("#start-result")).to_have_text(f"Started run #{run_id}. It asks: show its request.")

    page.get_by_role("button", name="show its request").click()  # the reviewer's own pick
    expect(row).to_be_focused()
    expect(row).to_have_attribute("aria-selected", "true")
    decline(page.locator(f'#request-detail article.card[data-request-id="{row.get_attribute("data-request-id")}"]'))


HOLD_THE_START_JS = """() => {
    // The run is started on the server at once; the page hears the API's answer only on __releaseStart().
    const real = window.fetch;
    let release;
    const gate = new Promise((resolve) => { release = resolve; });
    window.__releaseStart = release;
    window.fetch = async (url, options) => {
        const response = await real(url, options);
        if (String(url).endsWith("/api/v1/runs")) await gate;
        return response;
    };
}"""


def test_a_row_the_reviewer_picked_meanwhile_keeps_focus_and_the_list_stays_put(reviewer, host_requests):
    tab = reviewer("alice")
    page = tab.page
    crowd = host_requests(tab, [f"start-picked-{i}" for i in range(14)])
    page.evaluate(HOLD_THE_START_JS)
    page.select_option("#start-tool", "deploy")
    with page.expect_response(lambda r: r.url.endswith(RUNS_URL) and r.request.method == "POST") as answer:
        page.click("#start-run button[type=submit]")
    run_id = answer.value.json()["id"]
    row = request_row(page, run_id, kind="input")
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)  # it asked before the page heard the answer

    # While the run was starting the reviewer went back to the list and picked a request.
    crowd[2].scroll_into_view_if_needed()
    crowd[2].click()
    expect(crowd[2]).to_be_focused()
    record_focus(page)
    where = page.evaluate("window.scrollY")
    page.evaluate("window.__releaseStart()")

    expect(row).to_have_class(re.compile(r"\bjust-started\b"))
    expect(page.locator("#start-result")).to_have_text(f"Started run #{run_id}. It asks: show its request.")
    expect(crowd[2]).to_be_focused()
    expect(crowd[2]).to_have_attribute("aria-selected", "true")
    expect(crowd[2]).to_be_in_viewport()
    assert page.evaluate("window.scrollY") == where
    assert page.evaluate("window.__focused") == []
    decline_run_request(page, run_id)


def test_the_start_form_on_a_phone_fits_the_width_with_touch_sized_controls(phone):
    page = phone.page
    page.select_option("#start-tool", "confirm")
    form = page.locator("#start-run")
    form.scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    controls = form.locator(
        "select:visible, input:not([type=radio]):visible, textarea:visible, button:visible, .args-modes label"
    )
    assert controls.count() >= 7
    for i in range(controls.count()):
        box = controls.nth(i).bounding_box()
        assert box["height"] >= 44, controls.nth(i).evaluate("e => e.outerHTML.slice(0, 80)")
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]

    details = arg(page, "details")
    details.fill("{nope")
    details.press("Tab")
    expect(arg_error(page, "details")).to_be_in_viewport()
    details.fill('{"risk": "low", "from": "phone"}')
    run_id = submit(page, 201)["id"]
    row = request_row(page, run_id, kind="confirmation")
    expect(row).to_have_class(re.compile(r"\bjust-started\b"), timeout=EVENT_TIMEOUT_MS)
    expect(row).to_be_in_viewport()
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    card = pick(page, row)
    card.get_by_role("button", name="Decline").tap()
    card.get_by_role("button", name="Decline").tap()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)


@pytest.fixture
def stopping_console(tmp_path):
    """A console of its own, that will be sent SIGTERM: it keeps serving a minute with readiness false."""
    with serve_console(
        tmp_path,
        "e2e-stopping",
        CREATE_USERS,
        USERS,
        PASSWORD,
        DJANGO_SUPERUSER_PASSWORD=PASSWORD,
        CONSOLE_SHUTDOWN_DRAIN_SECONDS="60",
    ) as server:
        yield server


def send_sigterm(server):
    """SIGTERM to the daphne serving ``server``: its pid is in its heartbeat row."""
    with sqlite3.connect(server.db_path) as db:
        [(pid,)] = db.execute("SELECT pid FROM approvals_consoleprocess").fetchall()
    os.kill(pid, signal.SIGTERM)


def not_ready(page, server, deadline_seconds=10):
    """Once the console's /readyz says 503: the signal reaches daphne's loop a moment after ``os.kill``."""
    give_up = time.monotonic() + deadline_seconds
    while page.request.get(f"{server.base_url}/readyz").status != 503:
        assert time.monotonic() < give_up, "/readyz did not turn 503 after SIGTERM"
        page.wait_for_timeout(50)  # a bounded poll of another process, as tests/support's poll does


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_start_on_a_console_that_is_shutting_down_says_so_and_starts_nothing(browser, stopping_console, viewport):
    context = browser.new_context(viewport=viewport)
    try:
        page = context.new_page()
        login(page, stopping_console, "alice")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
        send_sigterm(stopping_console)
        not_ready(page, stopping_console)

        page.select_option("#start-tool", "deploy")
        body = submit(page, 503)

        assert body["error"] == "shutting_down"
        message = page.locator("#start-error")
        expect(message).to_have_text(body["message"])
        expect(message).to_contain_text("shutting down and starts no new runs")
        expect(page.locator("#start-result")).to_have_text("")
        expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")  # still served meanwhile
        shot = SHOTS / f"start-while-stopping-{viewport['width']}.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        page.locator("#start-run").scroll_into_view_if_needed()
        page.screenshot(path=str(shot))
    finally:
        context.close()
