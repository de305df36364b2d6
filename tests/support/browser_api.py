"""Calling the console's API from inside a signed-in Chromium page: its session cookie and CSRF token,
as the dashboard's own scripts call it (another reviewer's tab, as far as the page under test can tell)."""

CALL_JS = """async ([method, path, body]) => {
  const match = document.cookie.match(/(?:^|; )csrftoken=([^;]+)/);
  const response = await fetch(path, {
    method, credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRFToken": match ? match[1] : "" },
    body: body === null ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json().catch(() => null) };
}"""

# How far a page scrolls sideways (0 when it fits its viewport).
SIDEWAYS_JS = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def call(page, method, path, body=None):
    """``{"status", "body"}`` of one API call made by ``page``."""
    return page.evaluate(CALL_JS, [method, path, body])


def start(page, body):
    """Start a run through the API from ``page``; returns its id."""
    started = call(page, "POST", "/api/v1/runs", body)
    assert started["status"] == 201, started
    return started["body"]["id"]
