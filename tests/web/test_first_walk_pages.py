"""What a new user reads on their first walk through the console's pages: the Start-a-run form opens on
the console's own first tool, a finished run says in words what became of it, every time reads the same
short way, an unknown request or run is the console's own 404 page (under DEBUG too), and every page
can get back to the inbox."""

import html
import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client
from toolnexus import Request as WireRequest

from approvals import frames, moments
from approvals.models import Request, RunStatus
from approvals.review import decisions
from approvals.review.forms import field_errors
from approvals.runs import services as runs
from tests.support.pages import json_script
from tests.support.static_files import source_name

pytestmark = pytest.mark.django_db(transaction=True)

PROMPT = "Refund 25.0 EUR on order A-1001?"


@pytest.fixture
def browser(alice):
    client = Client()
    client.force_login(alice)
    return client


def refused_run(user, reason="declined", comment="too risky"):
    """A refund run whose request ``user`` refused (declined or withdrew), finished as the runner finishes it."""
    run = runs.create_run(tool="refund", args={"order": "A-1001", "amount": 25}, timeout=None, user=user, owner="t")
    decisions.open_request(
        WireRequest(id=f"r-{run.pk}", kind="approval", prompt=PROMPT), run_id=run.pk, tool="refund", args=run.args
    )
    decisions.resolve_request(f"r-{run.pk}", ok=False, reason=reason, comment=comment, user=user)
    runs.finish_run(run.pk, RunStatus.FAILED, f"declined/expired: {PROMPT}", True)
    return run


# -- 1. Start a run ----------------------------------------------------------------------------------


def test_the_start_form_lists_the_consoles_own_tools_before_the_builtins(browser):
    catalog = json_script(browser.get("/").content.decode(), "tool-catalog")
    assert catalog[0]["name"] == "deploy"  # the README's first step: pick deploy
    sources = [tool["source"] for tool in catalog]
    assert "builtin" in sources
    assert sources == sorted(sources, key=lambda source: source == "builtin")


def test_a_list_item_of_the_wrong_shape_is_refused_saying_what_each_item_needs(browser):
    catalog = json_script(browser.get("/").content.decode(), "tool-catalog")
    schema = next(tool["input_schema"] for tool in catalog if tool["name"] == "question")
    errors = field_errors(schema, {"questions": ["a", "b"]})
    assert errors["questions"][0] == (
        "Item 1 is not an object: each item is a JSON object with question (text), "
        "and may have header (text), options (a list), multiple (true or false)."
    )
    assert field_errors(schema, {"questions": [{"options": ["yes"]}]}) == {"questions": ["Item 1 needs: question."]}


# -- 2. What became of a finished run ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "label", "text"),
    [("declined", "declined", "Declined by alice: too risky"), ("cancelled", "cancelled", "Cancelled by alice")],
)
def test_recently_finished_says_the_decision_in_words_and_keeps_the_status_and_result(
    browser, alice, reason, label, text
):
    run = refused_run(alice, reason, comment="too risky" if reason == "declined" else "")
    recent = json_script(browser.get("/").content.decode(), "initial-snapshot")["recent_runs"]
    view = next(r for r in recent if r["id"] == run.pk)
    assert (view["status_label"], view["outcome_text"]) == (label, text)
    # Programs and the model keep what they had: the stored status and §10's result.
    assert view["status"] == "failed"
    assert view["result"] == {"output": f"declined/expired: {PROMPT}", "is_error": True}
    api = browser.get(f"/api/v1/runs/{run.pk}").json()
    assert (api["status"], api["status_label"], api["outcome_text"]) == ("failed", label, text)


def test_a_run_page_shows_a_declined_run_as_declined(browser, alice):
    run = refused_run(alice)
    content = browser.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(r'id="run-status" data-status="failed">declined<', content)
    assert "Declined by alice: too risky" in content


def test_a_run_that_failed_on_its_own_still_reads_failed(browser, alice):
    run = runs.create_run(tool="deploy", args={}, timeout=None, user=alice, owner="t")
    runs.finish_run(run.pk, RunStatus.FAILED, "boom", True)
    view = frames.run_detail(run.pk)
    assert (view["status_label"], view["outcome_text"]) == ("failed", "boom")


# -- 3. Times and arguments as people read them -----------------------------------------------------


def times_in(content):
    """Each <time> element's (datetime, title, text)."""
    return re.findall(r'<time[^>]*datetime="([^"]*)" title="([^"]*)">([^<]*)</time>', content)


CLOCK = re.compile(r"^\d\d:\d\d UTC$")


def test_the_request_page_shows_readable_times_with_the_exact_moment_kept(browser, alice):
    refused_run(alice)
    stored = Request.objects.get()
    content = browser.get(f"/requests/{stored.pk}/").content.decode()
    asked = moments.iso_time(stored.created_at)
    assert f"{asked}</" not in content  # no raw ISO where a person reads
    shown = times_in(content)
    assert (asked, asked, f"{stored.created_at:%H:%M} UTC") in shown
    assert all(CLOCK.match(text) for _, _, text in shown), shown


def test_the_run_page_shows_its_arguments_as_json_and_its_times_readably(browser, alice):
    run = refused_run(alice)
    content = browser.get(f"/runs/{run.pk}/").content.decode()
    args = re.search(r'<pre class="json" id="run-args">(.*?)</pre>', content, re.DOTALL).group(1)
    assert html.unescape(args) == '{\n  "order": "A-1001",\n  "amount": 25\n}'
    timeline = re.search(r'<ol class="timeline" id="timeline">(.*?)</ol>', content, re.DOTALL).group(1)
    shown = times_in(timeline)
    assert shown and all(CLOCK.match(text) for _, _, text in shown), shown
    assert f"at {run.created_at:%H:%M} UTC" in re.sub(r"<[^>]+>", "", content)


def test_the_tokens_page_writes_its_times_readably(browser, alice):
    browser.post("/tokens/", {"name": "ci"})
    content = browser.get("/tokens/").content.decode()
    cells = re.findall(r'<td class="created" data-label="Created">(.*?)</td>', content)
    assert cells and all(CLOCK.match(re.sub(r"<[^>]+>", "", cell)) for cell in cells), cells


def test_the_audit_page_writes_its_times_readably(browser, alice):
    refused_run(alice)
    content = browser.get("/audit/").content.decode()
    cells = re.findall(r'<td class="when" data-label="When \(UTC\)">(.*?)</td>', content)
    assert cells and all(CLOCK.match(re.sub(r"<[^>]+>", "", cell)) for cell in cells), cells


# -- 4. Words ----------------------------------------------------------------------------------------


def test_a_bad_run_filter_on_the_audit_page_asks_for_a_run_number(browser):
    content = html.unescape(browser.get("/audit/?run=nine").content.decode())
    assert "'nine' is not a run number; enter a run number, like 42." in content
    assert "9223372036854775807" not in content


def test_a_run_not_waiting_for_anyone_shows_no_key_hints(browser, alice):
    run = refused_run(alice)
    content = browser.get(f"/runs/{run.pk}/").content.decode()
    assert re.search(r'<p class="muted keys-hint" id="requests-keys-hint" hidden>', content)


# -- 5. Not found, the icon, the way back ------------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize(
    ("path", "says"),
    [("/requests/nope/", "There is no request 'nope'."), ("/runs/999999/", "There is no run 999999.")],
)
def test_an_unknown_request_or_run_is_the_consoles_own_404_page(browser, settings, debug, path, says):
    settings.DEBUG = debug  # make run sets DJANGO_DEBUG=1: people must not see Django's debug page there either
    response = browser.get(path)
    assert response.status_code == 404
    content = html.unescape(response.content.decode())
    assert 'id="not-found"' in content and says in content
    assert '<a href="/" id="not-found-inbox">Back to the inbox</a>' in content
    assert 'name="viewport"' in content  # base.html: readable on a phone
    assert "URLconf" not in content


def test_an_unknown_page_without_debug_is_the_consoles_404_page(browser, settings):
    settings.DEBUG = False
    response = browser.get("/no-such-page/")
    assert response.status_code == 404
    assert 'id="not-found"' in response.content.decode()


@pytest.mark.parametrize("path", ["/", "/audit/", "/tokens/", "/requests/{request}/", "/runs/{run}/"])
def test_every_page_links_its_icon_and_the_inbox(browser, alice, path):
    run = refused_run(alice)
    content = browser.get(path.format(request=f"r-{run.pk}", run=run.pk)).content.decode()
    icon = re.search(r'<link rel="icon" href="(/static/[^"]+)" type="image/svg\+xml">', content)
    assert icon and finders.find(source_name(icon.group(1))), "the page links an icon the console serves"
    assert re.search(r'<nav class="topnav"[^>]*>\s*<a href="/" class="inbox-link">Inbox</a>', content)
