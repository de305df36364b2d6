"""Nothing is approved that the reviewer did not see, in Chromium against a real daphne at 1440x900 and 390x844.

Every card (the inbox's detail, a run's page, a request's own page) opens with the tool call: the tool
and every argument that will run, labelled, in the tool's order, never folded away; a long value is
clamped with its whole one click away, and characters that hide or reorder text are shown as marks.
"""

import pytest
from playwright.sync_api import expect

from tests.support.console_page import EVENT_TIMEOUT_MS, pick, start_run

from .conftest import LAPTOP, PHONE

SCREENS = pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
LONG = ("lorem ipsum dolor sit amet " * 800)[:19_992] + " the end"  # 20,000 characters, the end far off screen


def arg(card, name):
    """The value shown for argument ``name`` in the card's tool call."""
    return card.locator(f'.tool-call .arg[data-arg="{name}"] .arg-value')


@SCREENS
def test_a_remote_deploy_card_shows_every_argument_without_a_click(reviewer, host_requests, viewport):
    tab = reviewer("alice")
    tab.page.set_viewport_size(viewport)
    request_id = f"call-deploy-{viewport['width']}"
    [row] = host_requests(
        tab,
        [request_id],
        prompt="Deploy web to production?",
        host="ci.example",
        tool="deploy",
        args={"service": "web", "env": "production"},
        data={"service": "web"},
    )
    card = pick(tab.page, row)
    call = card.locator(".tool-call")
    expect(call.locator(".tool-name")).to_have_text("deploy")
    expect(call.get_by_role("heading", name="Arguments as sent by ci.example")).to_be_visible()
    expect(arg(card, "env")).to_be_visible()
    expect(arg(card, "env")).to_have_text('"production"')
    expect(call.locator(".arg-name")).to_have_text(["service", "env"])  # in the order the host sent them
    expect(card.locator("details .tool-call, details .arg-value")).to_have_count(0)
    # The call comes first: straight after the card's header, before the prompt.
    assert card.evaluate("c => c.querySelector('header').nextElementSibling.matches('.tool-call')")
    # The data that only repeats an argument is not listed again.
    expect(card.locator(".tool-data")).to_have_count(0)


@SCREENS
def test_a_20000_character_argument_is_clamped_with_submit_on_the_first_phone_screen(reviewer, host_requests, viewport):
    tab = reviewer("alice")
    page = tab.page
    page.set_viewport_size(viewport)
    request_id = f"call-long-{viewport['width']}"
    [row] = host_requests(
        tab,
        [request_id],
        kind="input",
        prompt="Publish this note?",
        host="notes-bot",
        tool="publish",
        args={"title": "Release notes", "body": LONG},
        data={"schema": {"type": "object", "properties": {"channel": {"type": "string", "title": "Channel"}}}},
    )
    assert len(LONG) == 20_000
    card = pick(page, row)
    body = arg(card, "body")
    expect(body).to_have_class("arg-value clamped")
    expect(card.locator(".tool-call .clamp-mark")).to_have_text("clamped: 20,000 characters in all")
    assert len(body.text_content()) <= 310
    submit = card.get_by_role("button", name="Submit")
    # With the card's top at the top of the screen, Submit is on that first screen.
    card.evaluate("c => window.scrollBy(0, c.getBoundingClientRect().top)")
    top, button = card.bounding_box()["y"], submit.bounding_box()
    assert button["y"] + button["height"] - top <= viewport["height"], (top, button)
    # The whole value is one click away, and then nothing in the call is clamped.
    card.get_by_role("button", name="Show all").click()
    expect(card.locator(".tool-call .clamped")).to_have_count(0)
    expect(body).to_contain_text("the end")
    assert LONG in body.text_content()
    expect(submit).to_be_visible()


@SCREENS
def test_a_bidi_override_argument_is_shown_visibly(reviewer, host_requests, viewport):
    tab = reviewer("alice")
    tab.page.set_viewport_size(viewport)
    request_id = f"call-bidi-{viewport['width']}"
    [row] = host_requests(
        tab,
        [request_id],
        prompt="Send the attachment?",
        tool="mail",
        args={
            "file": "invoice\u202egpj.exe",
            "to": " ops@example.com ",
            "copies": 5,
            "label": "5",
            "tag": "a\u200bb",
            "force\u2066": True,  # a name can hide a character too
        },
    )
    card = pick(tab.page, row)
    override = arg(card, "file").locator(".hidden-char")
    expect(override).to_be_visible()
    expect(override).to_have_text("U+202E")
    expect(override).to_have_attribute("title", "U+202E RIGHT-TO-LEFT OVERRIDE")
    assert "\u202e" not in arg(card, "file").text_content()  # drawn as a mark, never applied
    expect(arg(card, "tag").locator(".hidden-char")).to_have_text("U+200B")
    expect(arg(card, "to").locator(".edge-space")).to_have_count(2)  # the leading and the trailing space
    # The number 5 and the string "5" look different.
    expect(arg(card, "copies")).to_have_text("5")
    expect(arg(card, "label")).to_have_text('"5"')
    assert arg(card, "copies").get_attribute("data-type") == "number"
    expect(card.locator('.tool-call .arg[data-arg="force\u2066"] .arg-name .hidden-char')).to_have_text("U+2066")


def test_the_request_page_shows_the_same_card_and_answers_through_it(reviewer, console_server, host_requests):
    tab = reviewer("alice")
    page = tab.page
    host_requests(
        tab,
        ["call-page-1"],
        prompt="Deploy web to production?",
        host="ci.example",
        tool="deploy",
        args={"service": "web", "env": "production"},
        data={"service": "web", "ticket": "OPS-12"},
    )
    page.goto(f"{console_server.base_url}/requests/call-page-1/")
    card = page.locator('#requests article.card[data-request-id="call-page-1"]')
    expect(arg(card, "env")).to_have_text('"production"')
    expect(card.locator(".tool-data")).to_contain_text("Other data the tool sent")
    expect(card.locator('.tool-data .arg[data-arg="ticket"] .arg-value')).to_have_text('"OPS-12"')
    card.get_by_role("button", name="Approve").click()
    expect(page.locator("#request-decision")).to_have_text("Approved by alice", timeout=EVENT_TIMEOUT_MS)
    # Resolved: the same call, read-only, above the decision.
    call = page.locator("#request-call .tool-call")
    expect(call.locator(".arg-name")).to_have_text(["service", "env"])
    expect(page.locator("#request-call button")).to_have_count(0)
    expect(page.locator("#conn-status")).to_have_count(0)  # no socket, so no "connecting…" that never connects


def test_the_run_page_card_lists_the_arguments_in_the_tools_order(reviewer, console_server):
    tab = reviewer("alice")
    page = tab.page
    run_id = start_run(tab, console_server, "refund", {"currency": "USD", "amount": 12, "order": "E2E-ORDER"})
    page.goto(f"{console_server.base_url}/runs/{run_id}/")
    card = page.locator("#requests article.card")
    expect(card.locator(".tool-call .arg-name")).to_have_text(["order", "amount", "currency"], timeout=EVENT_TIMEOUT_MS)
    expect(arg(card, "amount")).to_have_text("12")
    card.get_by_role("button", name="Withdraw request").click()  # asks first
    card.get_by_role("alertdialog").get_by_role("button", name="Withdraw request").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
