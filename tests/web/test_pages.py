"""Server-rendered pages: the dashboard, a run's page and the login page.

The views are async and read the database through database_sync_to_async, so
these tests use ``transaction=True`` like the async ones.
"""

import html
import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.db import transaction
from django.test import Client
from toolnexus import Request as WireRequest

from approvals import events, frames
from approvals.models import AuditEvent, RunStatus
from approvals.review import decisions
from approvals.runs import services as runs
from approvals.team import policies
from tests.support.pages import json_script
from tests.support.static_files import source_name

pytestmark = pytest.mark.django_db(transaction=True)

XSS = "<img src=x onerror=alert(1)>"
DEMO_TOOLS = ("deploy", "refund", "crunch", "fetchish", "balance")


@pytest.fixture
def browser(alice):
    client = Client()
    client.force_login(alice)
    return client


def waiting_run(user, prompt="Approve the deploy?", args=None, request_id="req-1"):
    """A run that asked a human: created and waiting on an open request (no task: just the rows)."""
    run = runs.create_run(tool="deploy", args=args or {"service": "web"}, timeout=None, user=user, owner="pages-test")
    decisions.open_request(
        WireRequest(id=request_id, kind="approval", prompt=prompt, data={"note": prompt}),
        run_id=run.pk,
        tool="deploy",
        args=run.args,
        actor="tool:deploy",
    )
    return run


def finished_run(user, output="deployed to staging", status=RunStatus.SUCCEEDED, is_error=False):
    run = runs.create_run(tool="deploy", args={"service": "web"}, timeout=12.5, user=user, owner="pages-test")
    runs.finish_run(run.pk, status, output, is_error)
    return run


# -- dashboard --------------------------------------------------------------------------------------


def test_dashboard_redirects_to_login_when_logged_out():
    response = Client().get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")
    assert "next=/" in response["Location"]


def test_dashboard_renders_the_tools_and_the_initial_snapshot(browser, alice):
    run = waiting_run(alice, prompt="Ship it?")
    response = browser.get("/")
    assert response.status_code == 200
    content = response.content.decode()

    # Start-a-run form: one option per tool the console serves, demo tools included.
    select = re.search(r'<select id="start-tool"[^>]*>(.*?)</select>', content, re.DOTALL).group(1)
    options = re.findall(r'<option value="([^"]+)">\1</option>', select)
    served = [tool["name"] for tool in response.context["tools"]]
    assert options == served
    assert set(DEMO_TOOLS) <= set(options)
    assert [t["name"] for t in json_script(content, "tool-catalog")] == served

    snap = json_script(content, "initial-snapshot")
    # The shared snapshot, seen through alice's eyes (what she may answer): as the socket sends it.
    viewer = policies.viewer_of(alice)
    assert snap == json.loads(json.dumps(frames.frame_for_user(frames.snapshot(viewer), viewer)))
    assert snap["type"] == "snapshot"
    assert [r["id"] for r in snap["requests"]] == ["req-1"]
    assert snap["requests"][0]["prompt"] == "Ship it?"
    assert [r["id"] for r in snap["runs"]] == [run.pk]
    # The header counts what alice may answer (the server's total, as the socket keeps it), and all that is open.
    assert re.search(rf'id="request-count"[^>]*>{snap["counts"]["for_me"]}<', content)
    assert re.search(r'id="request-totals"[^>]*>1 open<', content)


def test_dashboard_page_stays_bounded_with_2000_open_requests(browser):
    # It embedded every open request: 5.3 MB at 5,000. Now the first page and the totals.
    from tests.support.long_queue import open_requests_in_bulk

    ids = open_requests_in_bulk(2000)
    response = browser.get("/")
    assert response.status_code == 200
    assert len(response.content) < 256 * 1024
    content = response.content.decode()
    snap = json_script(content, "initial-snapshot")
    assert [r["id"] for r in snap["requests"]] == ids[: len(snap["requests"])]
    assert 0 < len(snap["requests"]) <= frames.DASHBOARD_PAGE_ROWS
    assert snap["next"] and snap["counts"]["requests"] == 2000
    assert re.search(r'id="request-count"[^>]*>2000<', content)
    assert re.search(r'id="requests-more">', content)  # the Load more control is shown


def test_dashboard_sets_the_csrf_cookie(browser):
    response = browser.get("/")
    assert "csrftoken" in response.cookies


# -- escaping -------------------------------------------------------------------------------------


def assert_never_unescaped(content):
    assert XSS not in content
    assert "<img" not in content
    assert "onerror=alert(1)>" not in content


def test_script_in_a_prompt_is_never_rendered_unescaped(browser, alice):
    run = waiting_run(alice, prompt=XSS, args={"service": XSS})

    dashboard = browser.get("/").content.decode()
    run_page = browser.get(f"/runs/{run.pk}/").content.decode()

    for content in (dashboard, run_page):
        assert_never_unescaped(content)
    # Not vacuous: the prompt is on both pages, escaped for a script element, and reads back intact.
    assert json_script(dashboard, "initial-snapshot")["requests"][0]["prompt"] == XSS
    assert json_script(run_page, "initial-run")["request"]["prompt"] == XSS
    assert "\\u003Cimg src=x onerror=alert(1)\\u003E" in dashboard
    # The args are printed as HTML text on the run page: escaped, and intact once unescaped.
    args_text = re.search(r'<pre class="json" id="run-args">(.*?)</pre>', run_page, re.DOTALL).group(1)
    assert XSS in html.unescape(args_text)


def test_script_in_a_finished_result_is_never_rendered_unescaped(browser, alice):
    run = finished_run(alice, output=XSS, status=RunStatus.FAILED, is_error=True)
    dashboard = browser.get("/").content.decode()
    run_page = browser.get(f"/runs/{run.pk}/").content.decode()
    for content in (dashboard, run_page):
        assert_never_unescaped(content)
    result = re.search(r'<pre id="run-result"[^>]*>(.*?)</pre>', run_page, re.DOTALL).group(1)
    assert html.unescape(result) == XSS


# -- run page -------------------------------------------------------------------------------------


def test_run_page_shows_status_result_and_timeline(browser, alice):
    run = finished_run(alice, output="deployed to staging")
    response = browser.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    content = response.content.decode()

    assert f'data-run-id="{run.pk}"' in content
    assert 'id="run-status" data-status="succeeded">succeeded<' in content
    result = re.search(r'<pre id="run-result" class="result"[^>]*>(.*?)</pre>', content, re.DOTALL)
    assert result and result.group(1) == "deployed to staging"
    assert "12.5 s" in content
    assert 'id="run-cancel"' not in content  # a finished run cannot be cancelled

    timeline = [
        (int(seq), action) for seq, action in re.findall(r'<li data-seq="(\d+)" data-action="([\w.]+)">', content)
    ]
    expected = [(e["seq"], e["action"]) for e in frames.run_timeline(run.pk).events]
    assert timeline == expected
    assert [action for _, action in timeline] == ["run.started", "run.finished"]
    assert json_script(content, "initial-run")["result"] == {"output": "deployed to staging", "is_error": False}


def test_run_page_of_a_waiting_run(browser, alice):
    run = waiting_run(alice, prompt="Approve?")
    content = browser.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-status="waiting"' in content
    assert "(not finished)" in content
    assert 'id="run-cancel"' in content
    timeline = content[content.index('id="timeline"') :]
    assert re.findall(r'data-action="([\w.]+)"', timeline) == ["run.started", "request.opened"]
    # People read words, not event names: "Started by alice", "Approval request opened by …".
    assert re.findall(r'<span class="timeline-words">Started by (\w+)</span>', timeline) == ["alice"]
    initial = json_script(content, "initial-run")
    assert initial["status"] == "waiting"
    assert initial["request"]["id"] == "req-1"
    assert initial["request"]["status"] == "open"


def test_a_long_timeline_shows_its_newest_page_and_offers_the_earlier_events(browser, alice):
    run = finished_run(alice)  # run.started, run.finished
    with transaction.atomic():
        for step in range(frames.RUN_TIMELINE_EVENTS):
            events.record(AuditEvent.Action.RUN_TRANSCRIPT, actor=f"step-{step}", run=run)
    content = browser.get(f"/runs/{run.pk}/").content.decode()
    timeline = content[content.index('id="timeline"') :]
    actors = re.findall(r'<span class="timeline-words">Agent step \(entry\) by ([\w-]+)</span>', timeline)
    assert actors == [f"step-{step}" for step in range(frames.RUN_TIMELINE_EVENTS)]  # the newest, oldest first
    assert 'id="timeline-earlier"' in content  # run.started and run.finished are a click away

    short = finished_run(alice)
    assert 'id="timeline-earlier"' not in browser.get(f"/runs/{short.pk}/").content.decode()


def test_unknown_run_is_404(browser):
    assert browser.get("/runs/424242/").status_code == 404


def test_run_page_redirects_to_login_when_logged_out(alice):
    run = finished_run(alice)
    response = Client().get(f"/runs/{run.pk}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


# -- login page -------------------------------------------------------------------------------------


def test_login_page_renders():
    response = Client().get("/accounts/login/")
    assert response.status_code == 200
    content = response.content.decode()
    assert 'name="username"' in content
    assert 'name="password"' in content
    assert 'name="csrfmiddlewaretoken"' in content
    assert 'id="conn-status"' not in content  # the logged-out header has no live socket status


def test_login_with_the_form_then_reach_the_dashboard(alice):
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/?next=/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "pw-for-tests-1", "next": "/", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_login_with_a_wrong_password_shows_an_error(alice):
    response = Client().post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert "did not match" in response.content.decode()


# -- the front end: small ES modules, no build step ------------------------------------------------

STATIC_JS = Path(settings.BASE_DIR) / "static" / "approvals"
MAX_MODULE_LINES = 400
IMPORT = re.compile(r'^import \{([^}]*)\} from "(\./[^"]+)";', re.MULTILINE)
EXPORT = re.compile(r"^export (?:async )?(?:function|const|let) (\w+)", re.MULTILINE)


def page_scripts(content):
    """Each script a page loads from a file: its static path -> its <script> tag's attributes."""
    scripts = {}
    for attrs in re.findall(r"<script\b([^>]*)>", content):
        src = re.search(r'src="([^"]+)"', attrs)
        if src:
            scripts[source_name(src.group(1))] = attrs
    return scripts


def test_each_page_loads_its_scripts_as_es_modules_from_static_files(browser, alice):
    run = waiting_run(alice)
    new_token_page = browser.post("/tokens/", {"name": "laptop-agent"}, follow=True)
    pages = {
        "/": browser.get("/"),
        f"/runs/{run.pk}/": browser.get(f"/runs/{run.pk}/"),
        "/tokens/ (a new token)": new_token_page,
        "/audit/": browser.get("/audit/"),
    }
    loaded = {}
    for name, response in pages.items():
        assert response.status_code == 200, name
        scripts = page_scripts(response.content.decode())
        loaded[name] = set(scripts)
        for path, attrs in scripts.items():
            assert 'type="module"' in attrs, f"{name} loads {path} as a classic script"
            assert finders.find(path), f"{name} loads {path}, which no static files finder has"
    every = {"approvals/topbar.js"}  # the top bar's Menu button, on every signed-in page
    assert loaded == {
        "/": every | {"approvals/dashboard.js", "approvals/agent_form.js"},
        f"/runs/{run.pk}/": every | {"approvals/run.js", "approvals/transcript.js"},
        "/tokens/ (a new token)": every | {"approvals/tokens.js"},
        "/audit/": every,
    }


def test_no_script_is_over_400_lines_and_every_import_names_an_export_of_a_file_that_exists():
    scripts = sorted(STATIC_JS.rglob("*.js"))
    assert len(scripts) > 10  # the console's modules, not an empty folder
    lines = {str(path.relative_to(STATIC_JS)): len(path.read_text().splitlines()) for path in scripts}
    too_long = {name: n for name, n in lines.items() if n > MAX_MODULE_LINES}
    assert not too_long, f"split these into modules of at most {MAX_MODULE_LINES} lines: {too_long}"
    for path in scripts:
        for names, target in IMPORT.findall(path.read_text()):
            module = (path.parent / target).resolve()
            assert module.is_file(), f"{path.name} imports {target}, which does not exist"
            exported = set(EXPORT.findall(module.read_text()))
            wanted = {name.split(" as ")[0].strip() for name in names.split(",") if name.strip()}
            assert wanted <= exported, (
                f"{path.name} imports {wanted - exported} from {target}, which does not export them"
            )


def test_the_dashboard_and_run_page_announce_every_module_they_import_so_the_browser_fetches_them_at_once(
    browser, alice
):
    run = waiting_run(alice)
    for path, entries in {
        "/": ["approvals/dashboard.js", "approvals/agent_form.js"],
        f"/runs/{run.pk}/": ["approvals/run.js", "approvals/transcript.js"],
    }.items():
        head = browser.get(path).content.decode().split("</head>")[0]
        preloaded = {source_name(href) for href in re.findall(r'<link rel="modulepreload" href="([^"]+)">', head)}
        assert set(entries) <= preloaded, path
        for module in preloaded:  # closed under import: nothing the browser finds later
            source = STATIC_JS.parent / module
            for _, target in IMPORT.findall(source.read_text()):
                imported = (source.parent / target).resolve().relative_to(STATIC_JS.parent.resolve())
                assert str(imported) in preloaded, f"{path}: {module} imports {imported}, which is not preloaded"
