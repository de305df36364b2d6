"""The console's pages in Chromium, for the end-to-end tests: a watched tab, the inbox's rows and picks,
runs started through the API with a browser context's cookies or from the Start-a-run form, and how long
a live update may take. The fixtures that open such tabs are in tests/e2e/conftest.py."""

import json

from playwright.sync_api import expect

EVENT_TIMEOUT_MS = 3000  # a live update on a loaded 2-core CI machine; a reload would take longer anyway


class Tab:
    """A dashboard page plus its dialogs, script errors and the socket frames it sent."""

    def __init__(self, page):
        self.page = page
        self.dialogs = []
        self.errors = []
        self.frames_sent = []
        self.confirm_replies = []  # for each confirm(): True accepts it; default dismisses
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("websocket", self._on_socket)

    def _on_dialog(self, dialog):
        self.dialogs.append((dialog.type, dialog.message))
        if dialog.type == "confirm" and self.confirm_replies and self.confirm_replies.pop(0):
            dialog.accept()
        else:
            dialog.dismiss()

    def _on_socket(self, ws):
        ws.on("framesent", lambda payload: self.frames_sent.append(payload))

    def answers_sent(self):
        frames = [json.loads(f) for f in self.frames_sent if isinstance(f, str)]
        return [f for f in frames if f.get("type") == "answer"]


# -- the API, through a browser context's cookies ------------------------------------------


def _csrf(context):
    return next(c["value"] for c in context.cookies() if c["name"] == "csrftoken")


def api_post(context, server, path, body):
    return context.request.post(f"{server.base_url}/api/v1/{path}", data=body, headers={"X-CSRFToken": _csrf(context)})


def api_get(context, server, path):
    return context.request.get(f"{server.base_url}/api/v1/{path}")


def start_run(tab, server, tool, args=None):
    response = api_post(tab.page.context, server, "runs", {"tool": tool, "args": args or {}})
    assert response.status == 201, response.text()
    return response.json()["id"]


def request_in(context, server, request_id, status):
    """The request's view when it is listed under ``status``, reading every page of that list; else None."""
    query = f"requests?status={status}&limit=500"
    after = ""
    while True:
        page = api_get(context, server, query + (f"&after={after}" if after else "")).json()
        found = next((r for r in page["requests"] if r["id"] == request_id), None)
        if found is not None or not page.get("next"):
            return found
        after = page["next"]


# -- page helpers -------------------------------------------------------------------------


def request_row(page, run_id, kind=None):
    """The run's request in the inbox list: one compact row."""
    kind_filter = f'[data-kind="{kind}"]' if kind else ""
    return page.locator(f'#requests > .row{kind_filter}[data-run="{run_id}"]')


def pick(page, row):
    """Click a request's row in the inbox (once it is there) and return its card, the inbox's detail."""
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    row.click()
    return page.locator(f'#request-detail article.card[data-request-id="{row.get_attribute("data-request-id")}"]')


def finished_row(page, run_id):
    return page.locator(f'#recent-runs tr[data-run-id="{run_id}"]')


def expect_result(page, run_id, text, status=None):
    row = finished_row(page, run_id)
    expect(row.locator(".result")).to_have_text(text, timeout=EVENT_TIMEOUT_MS)
    if status:
        expect(row.locator(".status")).to_have_text(status)


def field_error(card, name):
    return card.locator(f'.field-error[data-field="{name}"]')


def open_card(tab, server, tool, args=None, kind=None):
    """Start a run and pick its request: ``(run id, its card)``."""
    run_id = start_run(tab, server, tool, args)
    card = pick(tab.page, request_row(tab.page, run_id, kind))
    expect(card).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    return run_id, card


def decline(card):
    """Decline, then confirm: the card asks for a reason inline, and its Decline sends it."""
    card.get_by_role("button", name="Decline").click()
    card.get_by_role("button", name="Decline").click()
    expect(card).to_have_count(0, timeout=EVENT_TIMEOUT_MS)


def armed(scope):
    """Wait until the question asked once more in ``scope`` takes an answer: guard.js arms it after half a second."""
    expect(scope.locator("[role=alertdialog]:not([data-arming])")).to_have_count(1)


def host_row(page, request_id):
    return page.locator(f'#requests > .row[data-request-id="{request_id}"]')


def record_focus(page):
    """From now on, list in ``window.__focused`` the request id of every row or card that gets focus."""
    page.evaluate("""() => {
        window.__focused = [];
        document.addEventListener("focusin", (event) => {
            const card = event.target.closest && event.target.closest("#requests > .row, article.card");
            if (card) window.__focused.push(card.dataset.requestId);
        });
    }""")


# -- the dashboard's own forms and a page's identity --------------------------------------


def mark_page(page):
    """Tag the page's JS realm; a reload would lose the tag."""
    page.evaluate("window.__e2eSamePage = true")


def assert_not_reloaded(page):
    assert page.evaluate("window.__e2eSamePage === true"), "the page reloaded; the update should have come live"


def start_run_from_the_form(page, tool, args=None):
    """Start a run from the "Start a run" form and return its id (from the API's 201 answer)."""
    page.select_option("#start-tool", tool)
    if args is not None:
        page.check("input[name='args-mode'][value='json']")
        page.fill("#start-args-json", json.dumps(args))
    with page.expect_response(lambda r: r.url.endswith("/api/v1/runs") and r.request.method == "POST") as answer:
        page.click("#start-run button[type=submit]")
    response = answer.value
    assert response.status == 201, response.text()
    run_id = response.json()["id"]
    expect(page.locator("#start-result a")).to_have_text(f"run #{run_id}")
    return run_id


def request_card(page, run_id, kind=None):
    """The run's request, picked: its row is clicked once it arrives, and its card (the inbox's detail) returned."""
    row = request_row(page, run_id, kind)
    expect(row).to_have_count(1, timeout=EVENT_TIMEOUT_MS)
    row.click()
    return page.locator(f'#request-detail article.card[data-request-id="{row.get_attribute("data-request-id")}"]')


def overlaps(a, b):
    """Whether two bounding boxes (Playwright's {x, y, width, height}) share any area."""
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


# Close the dashboard's own console socket, as a dropped network would: the page reconnects by itself.
# The module by the URL the page preloads it under (hashed when DEBUG is off): another URL would be another
# module instance, with no socket of its own.
DROP_SOCKET_JS = """async () => {
  const preload = document.querySelector('link[rel=modulepreload][href*="/console/socket."]');
  const { socket } = await import(preload.href);
  socket.close();
}"""
