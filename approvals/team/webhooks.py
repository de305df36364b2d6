"""Notifications out: a policy's webhook hears when one of its requests opens, when its deadline is near (the
policy's ``remind_minutes_before``: review/deadlines.py), and when it resolves.

The POST body is Slack-compatible (``{"text": ...}``, which Slack and most chat
incoming-webhooks show as is) with structured fields beside it for programs.
Delivery runs on a small thread pool after the commit, with a timeout per attempt
and a bounded number of retries with exponential backoff, so a slow or broken
receiver never holds up a run or an answer: failures are logged, never raised.

Settings (all optional, in TOOLNEXUS): WEBHOOK_TIMEOUT_SECONDS (5), WEBHOOK_ATTEMPTS
(3), WEBHOOK_BACKOFF_SECONDS (0.5, doubled after each failure), WEBHOOK_WORKERS (4),
and PUBLIC_URL (the console's address, for links in the message).
"""

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from approvals.models import RESOLVING_ACTIONS, AuditEvent, Request
from approvals.moments import iso_time, readable_time
from approvals.team import policies
from approvals.telemetry import metrics

logger = logging.getLogger(__name__)

# An escalation and a reminder tell the policy's channel too: its (fallback) answerers may answer now.
WEBHOOK_ACTIONS = (
    frozenset(
        {AuditEvent.Action.REQUEST_OPENED, AuditEvent.Action.REQUEST_ESCALATED, AuditEvent.Action.REQUEST_REMINDED}
    )
    | RESOLVING_ACTIONS
)
MAX_QUEUED = 1000  # beyond this many undelivered messages, new ones are dropped (and logged)

VERBS: dict[str, str] = {
    AuditEvent.Action.REQUEST_ANSWERED: "answered",
    AuditEvent.Action.REQUEST_DECLINED: "declined",
    AuditEvent.Action.REQUEST_CANCELLED: "cancelled",
    AuditEvent.Action.REQUEST_EXPIRED: "expired",
}


def _setting(name: str, default: Any) -> Any:
    return settings.TOOLNEXUS.get(name, default)


@dataclass
class Delivery:
    ok: bool
    attempts: int
    status: int | None = None
    error: str = ""


# -- what is sent ------------------------------------------------------------------------------


def _slack_escape(text: object) -> str:
    """Slack reads <...> as links and mentions (<!channel>); a tool's prompt must not be able to ping anyone."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(request: Request) -> str | None:
    base = (_setting("PUBLIC_URL", "") or "").rstrip("/")
    if not base:
        return None
    return f"{base}/runs/{request.run_id}/" if request.run_id else f"{base}/"


def _said_words(payload: dict[str, Any]) -> str:
    """What a decline said beyond "declined by bob": " (Too large)", ", who answered instead of running the tool",
    ", who asked for changes" (the payload's response and option, as the one door recorded them)."""
    option = payload.get("option")
    label = f" ({option.get('label')})" if isinstance(option, dict) and option.get("label") else ""
    response = payload.get("response")
    if response == "respond":
        return ", who answered instead of running the tool"
    if response == "request_changes":
        return f"{label}, who asked for changes"
    return label


def message_for(event: AuditEvent, request: Request, rule: policies.Rule) -> dict[str, Any]:
    """The JSON body for one event: ``text`` for chat, the rest for programs."""
    source = request.tool or request.host or "a tool"
    prompt = request.prompt if len(request.prompt) <= 300 else request.prompt[:299] + "…"
    payload = event.payload if isinstance(event.payload, dict) else {}
    if event.action == AuditEvent.Action.REQUEST_OPENED:
        headline = f"{request.kind} request from {source} is waiting"
    elif event.action == AuditEvent.Action.REQUEST_ESCALATED:
        to = ", ".join(str(name) for name in payload.get("to") or ()) or "the fallback answerers"
        headline = f"{request.kind} request from {source} passed its deadline and is escalated to {to}"
    elif event.action == AuditEvent.Action.REQUEST_EXPIRED:
        headline = f"{request.kind} request from {source} expired, nobody answered"
    elif payload.get("decided_by") == "timeout":
        headline = f"{request.kind} request from {source} was approved with its defaults when it expired"
    elif event.action == AuditEvent.Action.REQUEST_REMINDED:
        minutes = (event.payload or {}).get("minutes_before")
        due = readable_time(request.expires_at) if request.expires_at is not None else "its deadline"
        headline = f"Reminder: {request.kind} request from {source} is due in {minutes} min, at {due}"
    else:
        verb = VERBS.get(event.action, event.action)
        if event.action == AuditEvent.Action.REQUEST_ANSWERED and request.kind == "approval":
            verb = "approved"
        headline = f"{request.kind} request from {source} was {verb} by {event.actor}{_said_words(payload)}"
    link = _link(request)
    text = f"{_slack_escape(headline)}: {_slack_escape(prompt)}"
    if link:
        text += f" <{link}|open>"
    body: dict[str, Any] = {
        "text": text,
        "event": str(event.action),
        "seq": event.pk,
        "at": iso_time(event.created_at),
        "actor": event.actor,
        "policy": rule.name,
        "request": {
            "id": request.id,
            "kind": request.kind,
            "prompt": request.prompt,
            "tool": request.tool,
            "host": request.host or None,
            "run": request.run_id,
            "status": request.status,
            "expiresAt": request.expires_at_wire,
            "link": link,
        },
        "answer": None,
        # Who decided (models.DecidedBy: person, timeout, console); None for an event that decides nothing.
        "decided_by": payload.get("decided_by"),
    }
    if event.action == AuditEvent.Action.REQUEST_ESCALATED:
        body["escalation"] = {key: payload.get(key) for key in ("escalations", "max_escalations", "to", "expiresAt")}
    if event.action in RESOLVING_ACTIONS:
        # Not the answer's data: a form's values are for the tool, not for a chat channel.
        body["answer"] = {"ok": bool(request.answer_ok), "reason": request.answer_reason, "comment": request.comment}
        # A decline's reply, changes asked for and reject option (issue 36), only when it has them.
        body["answer"].update({key: payload[key] for key in ("response", "message", "option") if key in payload})
    return body


# -- delivery ------------------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect would turn the POST into a GET without its body: treat it as a failed delivery instead."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def shown_url(url: str) -> str:
    """A webhook URL as a log line shows it: scheme and host. Its path and query are its secret (Slack's
    hooks.slack.com/services/T…/B…/<secret>), kept out of the logs."""
    parts = urlsplit(url)
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a port: shown as no port
        port = ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}/…"


def deliver(
    url: str,
    body: dict[str, Any],
    *,
    attempts: int | None = None,
    timeout: float | None = None,
    backoff: float | None = None,
) -> Delivery:
    """POST ``body`` as JSON, retrying network errors, timeouts, 429 and 5xx; returns a Delivery."""
    attempts = max(1, int(attempts if attempts is not None else _setting("WEBHOOK_ATTEMPTS", 3)))
    timeout = float(timeout if timeout is not None else _setting("WEBHOOK_TIMEOUT_SECONDS", 5.0))
    backoff = float(backoff if backoff is not None else _setting("WEBHOOK_BACKOFF_SECONDS", 0.5))
    if urlsplit(url).scheme not in ("http", "https"):
        metrics.WEBHOOK_DELIVERIES.labels(result="failed").inc()
        return Delivery(ok=False, attempts=0, error=f"not an http(s) URL: {url!r}")
    data = json.dumps(body).encode("utf-8")
    outcome = Delivery(ok=False, attempts=0)
    for attempt in range(1, attempts + 1):
        outcome.attempts = attempt
        request = urllib.request.Request(
            url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "toolnexus-console-webhook"},
        )
        try:
            with _opener.open(request, timeout=timeout) as response:
                outcome.status = response.status
                response.read(1024)
            if 200 <= outcome.status < 300:
                outcome.ok, outcome.error = True, ""
                metrics.WEBHOOK_DELIVERIES.labels(result="delivered").inc()
                return outcome
            outcome.error = f"HTTP {outcome.status}"
        except urllib.error.HTTPError as exc:
            outcome.status, outcome.error = exc.code, f"HTTP {exc.code}"
            if exc.code < 500 and exc.code not in (408, 429):
                break  # the receiver refused this message: sending it again will not help
        except (urllib.error.URLError, OSError, ValueError) as exc:
            outcome.status, outcome.error = None, str(getattr(exc, "reason", exc))
        if attempt < attempts:
            time.sleep(backoff * 2 ** (attempt - 1))
    logger.warning("webhook %s failed after %d attempt(s): %s", shown_url(url), outcome.attempts, outcome.error)
    metrics.WEBHOOK_DELIVERIES.labels(result="failed").inc()
    return outcome


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pending: set[Future[Delivery]] = set()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=int(_setting("WEBHOOK_WORKERS", 4)), thread_name_prefix="webhook")
        return _pool


def deliver_later(url: str, body: dict[str, Any]) -> Future[Delivery] | None:
    """Queue a delivery on the webhook threads; returns its Future (or None when the queue is full)."""
    with _pool_lock:
        if len(_pending) >= MAX_QUEUED:
            logger.error(
                "webhook queue full (%d undelivered); dropping a message for %s", len(_pending), shown_url(url)
            )
            metrics.WEBHOOK_DELIVERIES.labels(result="dropped").inc()
            return None
    future = _executor().submit(deliver, url, body)
    with _pool_lock:
        _pending.add(future)
    future.add_done_callback(_done)
    return future


def _done(future: Future[Delivery]) -> None:
    with _pool_lock:
        _pending.discard(future)
    if future.exception() is not None:
        logger.error("webhook delivery crashed", exc_info=future.exception())


def wait_for_deliveries(timeout: float = 10.0) -> bool:
    """Block until queued deliveries finish (tests, and a clean shutdown); True when none is left."""
    with _pool_lock:
        pending = set(_pending)
    if not pending:
        return True
    _, not_done = wait(pending, timeout=timeout)
    return not not_done


def event_committed(event: AuditEvent) -> None:
    """After the commit of a request event: queue the webhook of the request's policy, if it has one."""
    if event.action not in WEBHOOK_ACTIONS or not event.request_id:
        return
    try:
        request = event.request
        assert request is not None  # request_id is set
        rule = policies.rule_for(request.tool, request.kind)
        if not rule.webhook_url:
            return
        body = message_for(event, request, rule)
    except Exception:  # never let a notification break the answer that caused it
        logger.exception("could not prepare the webhook for event %s", event.pk)
        return
    deliver_later(rule.webhook_url, body)
