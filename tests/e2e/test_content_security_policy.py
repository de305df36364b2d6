"""Every page under the console's Content-Security-Policy in Chromium, with no violation anywhere.

A console with real data (runs waiting and finished, an agent run's transcript, a host's request,
a token, a policy, the lockout's rows) is walked page by page: the console's own, the login and
password-reset pages, the 404 and CSRF refusals, and the Django admin, every registered model's
changelist, its add and change forms, history, deletion, popups and password pages. Each document
must carry the policy, and the page must report no violation: a ``securitypolicyviolation`` event
(heard by a listener added before any of the page's scripts) or Chromium's "Content Security
Policy" console message. The interactive parts run too, since DOM a script makes can violate it.
"""

import re

import pytest
from playwright.sync_api import expect

from tests.support.browser_api import start
from tests.support.console_page import EVENT_TIMEOUT_MS, armed, request_row

from .conftest import LAPTOP, PASSWORD, free_port, serve_console

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; object-src 'none'; form-action 'self'"
)

SETUP = f"""
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from approvals.models import Policy
User = get_user_model()
User.objects.create_superuser("alice", "alice@example.com", {PASSWORD!r})
bob = User.objects.create_user("bob", "bob@example.com", {PASSWORD!r})
Group.objects.create(name="reviewers").user_set.add(bob)
Policy.objects.create(name="refunds are confirmed", tool_pattern="refund", confirm_approval=True)
"""

# axes writes its failure log only with AXES_ENABLE_ACCESS_FAILURE_LOG, which the console leaves off.
EMPTY_BY_DESIGN = {"/admin/axes/accessfailurelog/"}

# Tell the test about every violation: added to each document before its own scripts run.
LISTEN_JS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.reportCspViolation({
    page: location.href, directive: event.violatedDirective, blocked: event.blockedURI,
    source: `${event.sourceFile}:${event.lineNumber}`, sample: event.sample,
  });
});
"""

# Violation events are queued as tasks: two turns of the task queue let every one already queued be heard.
SETTLE_JS = "() => new Promise((done) => setTimeout(() => setTimeout(done)))"


@pytest.fixture(scope="module")
def csp_console(tmp_path_factory):
    """A console as in production: DEBUG off (its own 404 page), and password reset offered (a mail host
    nothing listens on: the pages render, a send would fail and be logged)."""
    with serve_console(
        tmp_path_factory.mktemp("e2e-csp"),
        "e2e-csp",
        SETUP,
        ("alice",),
        PASSWORD,
        DJANGO_DEBUG="0",
        CONSOLE_EMAIL_HOST="127.0.0.1",
        CONSOLE_EMAIL_PORT=str(free_port()),
    ) as server:
        yield server


class Watched:
    """A browser context whose every page, popups included, reports its policy violations and documents."""

    def __init__(self, context, server):
        self.server = server
        self.violations = []
        self.documents = []  # (url, its Content-Security-Policy header)
        context.expose_function("reportCspViolation", lambda report: self.violations.append(report))
        context.add_init_script(LISTEN_JS)
        context.on("console", self._on_console)
        context.on("response", self._on_response)
        self.page = context.new_page()

    def _on_console(self, message):
        if "Content Security Policy" in message.text:
            self.violations.append({"console": message.text, "page": message.page.url if message.page else None})

    def _on_response(self, response):
        if response.request.resource_type == "document":
            self.documents.append((response.url, response.headers.get("content-security-policy")))

    def visit(self, path, status=200):
        response = self.page.goto(self.server.base_url + path)
        assert response.status == status, f"{path}: {response.status}"
        self.settle()
        return self.page

    def settle(self, page=None):
        (page or self.page).evaluate(SETTLE_JS)

    def assert_clean(self):
        self.settle()
        assert self.violations == [], f"Content-Security-Policy violations: {self.violations}"
        unguarded = [url for url, policy in self.documents if policy != POLICY]
        assert unguarded == [], f"pages without the policy: {unguarded}"


@pytest.fixture
def watched(browser, csp_console):
    context = browser.new_context(viewport=LAPTOP)
    try:
        yield Watched(context, csp_console)
    finally:
        context.close()


def log_in(tab, username="alice"):
    page = tab.visit("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form[action='/accounts/login/'] button[type=submit]")
    expect(page).to_have_url(tab.server.base_url + "/")
    tab.settle()


def test_the_listener_hears_a_violation(watched):
    # The check below is only as good as its ears: a style attribute set from script is refused and heard.
    page = watched.visit("/accounts/login/")
    page.evaluate("() => document.querySelector('h1').setAttribute('style', 'color: red')")
    watched.settle()
    assert [v["directive"] for v in watched.violations if "directive" in v] == ["style-src-attr"]
    assert any("console" in v for v in watched.violations)  # Chromium says so in the console as well
    assert watched.documents == [(watched.server.base_url + "/accounts/login/", POLICY)]


def test_the_consoles_pages_and_their_scripts_raise_no_violation(watched):
    tab, base = watched, watched.server.base_url
    # Logged out: a refused login, the reset pages (a bad link included), the 404.
    page = tab.visit("/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "not-the-password")
    page.click("form[action='/accounts/login/'] button[type=submit]")
    expect(page.locator(".error[role=alert]")).to_be_visible()
    for path in ("/accounts/password_reset/", "/accounts/password_reset/done/", "/accounts/reset/done/"):
        tab.visit(path)
    expect(tab.visit("/accounts/reset/MQ/bad-token/").locator("main")).to_contain_text("no longer works")
    page = tab.visit("/accounts/password_reset/")
    page.fill("input[name=email]", "nobody@example.com")
    page.click("main form button[type=submit]")
    expect(page).to_have_url(base + "/accounts/password_reset/done/")
    expect(tab.visit("/no/such/page/", status=404).locator("#not-found")).to_be_visible()

    # A form whose CSRF cookie is gone: Django's refusal, in the console's page.
    page = tab.visit("/accounts/login/")
    page.context.clear_cookies()
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("form[action='/accounts/login/'] button[type=submit]")
    expect(page.locator("#csrf-failure h1")).to_have_text("Form refused (403)")

    log_in(tab)
    # The dashboard's socket is same-origin ws:, which connect-src 'self' allows.
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    waiting = start(page, {"tool": "deploy", "args": {"service": "web-" + "x" * 600}})
    refund = start(page, {"tool": "refund", "args": {"order": "CSP-1", "amount": 12}})
    declined = start(page, {"tool": "refund", "args": {"order": "CSP-2", "amount": 3}})

    # The detail pane, a clamped value shown whole, the approval's confirmation, a decline's reason.
    request_row(page, waiting).click()
    card = page.locator("#request-detail article.card")
    card.get_by_role("button", name="Show all").click()
    expect(card.locator(".arg-value.whole")).to_have_count(1)
    request_row(page, refund).click()
    card.get_by_role("button", name="Approve", exact=True).click()
    armed(card)
    card.locator(".confirm-panel").get_by_role("button", name=re.compile("Approve")).click()
    expect(request_row(page, refund)).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    request_row(page, declined).click()
    card.get_by_role("button", name="Decline").click()
    card.get_by_label("Reason for declining").fill("not this one")
    card.locator(".decline-panel").get_by_role("button", name="Decline").click()
    expect(request_row(page, declined)).to_have_count(0, timeout=EVENT_TIMEOUT_MS)
    page.locator("#filter-more summary").click()
    page.keyboard.press("?")  # the keys' help
    expect(page.locator("#key-help")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.locator("#key-help")).to_be_hidden()

    # An agent run with its transcript, started from the dashboard's own form.
    page.select_option("#agent-model", "scripted")
    page.fill("#agent-prompt", 'call refund with {"order": "CSP-3", "amount": 1}')
    page.click("#start-agent button[type=submit]")
    page.locator("#agent-result a").click()
    expect(page.locator("#transcript [data-kind='pending']")).to_contain_text("refund", timeout=EVENT_TIMEOUT_MS)
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    tab.settle()

    # A waiting run's page, a finished one's, a host's request on its own page.
    page = tab.visit(f"/runs/{waiting}/")
    expect(page.locator("#run-requests li.run-request")).to_have_count(1)
    request_id = page.locator("#run-requests li.run-request").get_attribute("data-request-id")
    tab.visit(f"/runs/{refund}/")
    page = tab.visit(f"/requests/{request_id}/")
    expect(page.locator("#conn-status")).to_have_attribute("data-state", "live")
    tab.visit(f"/runs/{declined}/")
    tab.visit("/runs/99999/", status=404)

    # The audit trail and its filters; the tokens page: a new token shown once, the revoke question.
    page = tab.visit("/audit/")
    expect(page.locator("main table tbody tr").first).to_be_visible()
    page.fill("#audit-filters input[name=tool]", "refund")
    page.check("#show-transcript")
    page.click("#audit-filters button[type=submit]")
    expect(page).to_have_url(re.compile(r"tool=refund"))
    tab.visit("/audit/?since=not-a-date", status=400)
    page = tab.visit("/tokens/")
    page.fill("#id_token_name", "csp-token")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token-secret")).to_be_visible()
    page.locator("#tokens tr", has_text="csp-token").locator("summary", has_text="Revoke").click()
    tab.settle()
    page.context.clear_cookies(name="csrftoken")  # signed in, the refusal is the same page
    page.fill("#id_token_name", "refused")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#csrf-failure h1")).to_have_text("Form refused (403)")

    # The phone's top bar menu, then log out.
    page = tab.visit("/tokens/")
    page.set_viewport_size({"width": 390, "height": 844})
    page.click("#menu-toggle")
    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(base + "/accounts/login/")
    tab.assert_clean()


def test_the_admins_pages_and_widgets_raise_no_violation(watched):
    tab, base = watched, watched.server.base_url
    page = tab.visit("/accounts/login/")  # a refused login and a login, for the lockout's tables
    page.fill("#id_username", "mallory")
    page.fill("#id_password", "not-the-password")
    page.click("form[action='/accounts/login/'] button[type=submit]")
    expect(page.locator(".error[role=alert]")).to_be_visible()
    log_in(tab)
    start(tab.page, {"tool": "deploy", "args": {"service": "admin-view"}})  # a run, a request, audit events

    page = tab.visit("/admin/")
    changelists = page.eval_on_selector_all("#content-main th[scope=row] a", "links => links.map(a => a.pathname)")
    add_forms = page.eval_on_selector_all("#content-main a.addlink", "links => links.map(a => a.pathname)")
    apps = page.eval_on_selector_all("#content-main caption a", "links => links.map(a => a.pathname)")
    assert len(changelists) >= 10, changelists  # ours, auth's and axes'
    page.locator("button.theme-toggle").first.click()
    for path in apps + add_forms:
        tab.visit(path)

    for path in changelists:
        page = tab.visit(path)
        if path in EMPTY_BY_DESIGN:
            expect(page.locator("#result_list")).to_have_count(0)
            continue
        first = page.locator("#result_list tbody tr").first.locator("th a, td a").first
        expect(first).to_be_visible()  # every other model has a row to look at
        change = first.evaluate("a => a.pathname")
        page = tab.visit(change)
        history = page.locator("a.historylink")
        if history.count():
            tab.visit(history.get_attribute("href"))
        delete = page.locator("a.deletelink")
        if delete.count():
            tab.visit(delete.get_attribute("href"))

    # A changelist's search, filter and date drill-down; an action's confirmation page.
    page = tab.visit("/admin/approvals/run/?q=deploy")
    page.fill("#nav-filter", "pol")  # the sidebar's filter
    expect(page.locator("#nav-sidebar a", has_text="Runs")).to_be_hidden()
    page.locator(".toplinks a").first.click()
    expect(page).to_have_url(re.compile(r"created_at__"))
    page.locator("#changelist-filter a").last.click()
    tab.settle()
    page = tab.visit("/admin/auth/group/")
    page.locator("#result_list tbody input.action-select").first.check()
    page.select_option("select[name=action]", "delete_selected")
    page.locator("button[name=index]").click()
    expect(page.locator("#content h1")).to_have_text("Delete multiple objects")
    tab.settle()

    # The policy form: its two-list pickers, a popup that adds a group and closes itself.
    page = tab.visit("/admin/approvals/policy/add/")
    page.locator(".field-allowed_users .selector-chooseall").click()
    expect(page.locator("#id_allowed_users_to option")).to_have_count(2)
    with page.expect_popup() as opened:
        page.click("#add_id_allowed_groups")
    popup = opened.value
    popup.wait_for_load_state()
    tab.settle(popup)
    popup.fill("#id_name", "from the popup")
    with popup.expect_event("close"):
        popup.click("input[name=_save]")
    expect(page.locator("#id_allowed_groups_to option", has_text="from the popup")).to_have_count(1)
    page.fill("#id_name", "added in the admin")
    page.click("input[name=_save]")
    expect(page.locator("ul.messagelist li.success")).to_be_visible()
    tab.settle()

    # A user's form with its calendar and clock, the password pages, then logging out of the admin.
    bob = tab.visit("/admin/auth/user/?q=bob").locator("#result_list tbody th a").first.evaluate("a => a.pathname")
    page = tab.visit(bob)
    page.click("#calendarlink0")
    expect(page.locator("#calendarbox0")).to_be_visible()
    page.locator("#calendarbox0 .calendar-shortcuts a").first.click()
    page.click("#clocklink0")
    expect(page.locator("#clockbox0")).to_be_visible()
    tab.settle()
    tab.visit(bob.removesuffix("change/") + "password/")
    tab.visit("/admin/password_change/")
    tab.visit("/admin/password_change/done/")
    tab.visit("/admin/nowhere/", status=404)
    page = tab.visit("/admin/")
    page.locator("#logout-form button").click()
    expect(page).to_have_url(base + "/accounts/login/")
    tab.visit("/admin/login/")
    tab.assert_clean()
