"""Demo toolnexus tools, on by default, one for each path through the console.

They are ordinary ``define_tool`` tools: nothing here knows about Django. Each
reads ``ctx`` defensively, because ``ctx`` and ``ctx.signal`` may be None (§1).
"""

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from toolnexus import Answer, ToolContext, ToolResult, define_tool, pending

from approvals.review.forms import SOME_TEXT
from approvals.runs.cancel import is_cancelled


def _answer(ctx: ToolContext | None) -> Answer | None:
    return getattr(ctx, "answer", None)


def deploy_execute(service: str = "web", ctx: ToolContext | None = None) -> str | ToolResult:
    """Deploy a service, asking the reviewer which environment first."""
    answer = _answer(ctx)
    if answer is not None:
        if not answer.ok:
            return ToolResult(output=f"deploy declined: {answer.reason or 'no reason'}", is_error=True)
        env = (answer.data or {}).get("env")
        return f"deployed to {env}"
    return pending(
        kind="input",
        prompt=f"Which environment should {service} be deployed to?",
        data={
            "schema": {
                "type": "object",
                "properties": {
                    "env": {
                        "type": "string",
                        "title": "Environment",
                        "enum": ["staging", "production"],
                        "default": "staging",
                    },
                },
                "required": ["env"],
            }
        },
    )


def refund_execute(
    order: str = "A-1001", amount: float = 25.0, currency: str = "EUR", ctx: ToolContext | None = None
) -> str | ToolResult:
    """Refund an order once a reviewer approves the amount (which the reviewer may lower)."""
    answer = _answer(ctx)
    if answer is not None:
        if not answer.ok:
            return ToolResult(output=f"refund of {amount} {currency} not made", is_error=True)
        edited = (answer.data or {}).get("args") or {}
        amount = edited.get("amount", amount)
        note = (answer.data or {}).get("comment")
        return f"refunded {amount} {currency} on order {order}" + (f" ({note})" if note else "")
    return pending(
        kind="approval",
        prompt=f"Refund {amount} {currency} on order {order}?",
        # The reviewer may change the amount before approving; it comes back in answer.data["args"].
        data={"order": order, "amount": amount, "currency": currency, "editable": ["amount"]},
    )


async def crunch_execute(steps: int = 50, pause: float = 0.1, ctx: ToolContext | None = None) -> str | ToolResult:
    """Work through many steps with a short pause between each; stops when cancelled."""
    steps = int(steps)
    done = 0
    for _ in range(steps):
        if is_cancelled(ctx):
            return ToolResult(output=f"cancelled after {done} of {steps} steps", is_error=True)
        signal = getattr(ctx, "signal", None)
        if signal is not None:
            try:
                await asyncio.wait_for(signal.wait(), timeout=pause)
            except TimeoutError:
                pass
        else:
            await asyncio.sleep(pause)
        if not is_cancelled(ctx):
            done += 1
    return f"crunched {done} of {steps} steps"


def fetchish_execute(
    url: str = "https://example.invalid/data", work: float = 0.2, ctx: ToolContext | None = None
) -> str | ToolResult:
    """Pretend to fetch a URL within the caller's timeout (its own default when unset)."""
    budget = getattr(ctx, "timeout", None)
    if budget is None:
        budget = 30.0
    if budget < 0.1:
        return ToolResult(output=f"budget {budget:.3f}s is too small to try", is_error=True)
    signal = getattr(ctx, "signal", None)
    started = time.monotonic()
    # A plain def tool runs in a worker thread, so it blocks on the token itself.
    wait = min(work, budget)
    if signal is None:
        time.sleep(wait)
    elif signal.wait_blocking(wait):
        return ToolResult(output=f"gave up on {url}: {signal.reason}", is_error=True)
    if work > budget:
        return ToolResult(output=f"could not fetch {url} within {budget:g}s", is_error=True)
    return f"fetched {url} within {budget:g}s (took {time.monotonic() - started:.2f}s)"


BALANCES = {"acme": 1250.40, "globex": 87.00}


def balance_execute(account: str = "acme", ctx: ToolContext | None = None) -> str | ToolResult:
    """Report an account balance after the reviewer signs in at the bank."""
    answer = _answer(ctx)
    if answer is not None:
        if not answer.ok:
            return ToolResult(output="not authorized", is_error=True)
        # For an authorization the world changed out of band; the answer carries no payload.
        return f"balance of {account}: {BALANCES.get(account, 0.0):.2f} EUR"
    return pending(
        kind="authorization",
        prompt=f"Sign in to the bank so the console can read the balance of {account}.",
        url=f"https://bank.example.com/oauth/authorize?account={account}",
    )


SIGNUP_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Full name", "minLength": 2, "maxLength": 60},
        "email": {"type": "string", "title": "Email", "format": "email"},
        "seats": {"type": "integer", "title": "Seats", "minimum": 1, "maximum": 50, "default": 5},
        "start": {"type": "string", "title": "Start date", "format": "date"},
        "plan": {
            "type": "string",
            "title": "Plan",
            "oneOf": [{"const": "team", "title": "Team"}, {"const": "enterprise", "title": "Enterprise"}],
            "default": "team",
        },
        "regions": {
            "type": "array",
            "title": "Regions",
            "items": {"type": "string", "enum": ["eu", "us", "apac"]},
            "minItems": 1,
        },
        "invoice": {"type": "boolean", "title": "Send an invoice", "default": True},
    },
    "required": ["name", "email", "seats", "plan", "regions"],
}


def signup_execute(company: str = "Acme", ctx: ToolContext | None = None) -> str | ToolResult:
    """Open an account, asking the reviewer for the customer's details."""
    answer = _answer(ctx)
    if answer is not None:
        if not answer.ok:
            return ToolResult(output=f"signup of {company} stopped: {answer.reason}", is_error=True)
        details = answer.data or {}
        return "signed up {company}: {name} <{email}>, {seats} seats on {plan} in {regions}".format(
            company=company,
            regions="/".join(details.get("regions", [])),
            **{k: details.get(k) for k in ("name", "email", "seats", "plan")},
        )
    return pending(kind="input", prompt=f"Details for the {company} account", data={"schema": SIGNUP_SCHEMA})


def ask_secret_execute(service: str = "database", ctx: ToolContext | None = None) -> str | ToolResult:
    """Ask for a password: the console refuses to collect it (the reviewer can only decline)."""
    answer = _answer(ctx)
    if answer is not None:
        return ToolResult(output=f"no credentials for {service}: {answer.reason or 'answered'}", is_error=not answer.ok)
    return pending(
        kind="input",
        prompt=f"Enter the {service} password",
        data={"schema": {"type": "object", "properties": {"password": {"type": "string", "format": "password"}}}},
    )


CONFIRM_DETAILS = {"risk": "low"}


def confirm_execute(
    action: str = "rotate the logs", details: dict[str, Any] | None = None, ctx: ToolContext | None = None
) -> str | ToolResult:
    """Ask for a kind the console has no special form for ("confirmation"): the reviewer replies in JSON."""
    answer = _answer(ctx)
    if answer is not None:
        if not answer.ok:
            return ToolResult(output=f"not confirmed: {answer.reason}", is_error=True)
        return f"confirmed {action} with {json.dumps(answer.data or {}, sort_keys=True)}"
    shown = {"action": action, **(CONFIRM_DETAILS if details is None else details)}
    shown["action"] = action
    return pending(kind="confirmation", prompt=f"Confirm: {action}?", data=shown)


def phish_execute(ctx: ToolContext | None = None) -> str | ToolResult:
    """An authorization whose url is not http(s): the dashboard shows it as text, never as a link."""
    answer = _answer(ctx)
    if answer is not None:
        return ToolResult(output="authorized" if answer.ok else "not authorized", is_error=not answer.ok)
    return pending(kind="authorization", prompt="Sign in to continue", url="javascript:alert(document.cookie)")


def expiring_execute(seconds: float = 30.0, ctx: ToolContext | None = None) -> str | ToolResult:
    """An approval that expires after the given seconds; at the deadline the server declines it as expired."""
    answer = _answer(ctx)
    if answer is not None:
        return "approved in time" if answer.ok else ToolResult(output=f"not approved: {answer.reason}", is_error=True)
    deadline = datetime.now(UTC) + timedelta(seconds=float(seconds))
    return pending(
        kind="approval",
        prompt=f"Approve within {float(seconds):g} seconds?",
        data={"seconds": seconds},
        expiresAt=deadline.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    )


def _args(**properties: Any) -> dict[str, Any]:
    """A demo tool's input schema. toolnexus infers one from the signature but leaves out the
    defaults, so each tool declares its own: forms open with the defaults, and bounds and
    choices are checked before a run starts."""
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _text(default: str, description: str, **rules: Any) -> dict[str, Any]:
    # Something in it: not empty, not only spaces ("Which environment should   be deployed to?").
    return {
        "type": "string",
        "pattern": SOME_TEXT,
        "default": default,
        "description": description,
        **rules,
    }


deploy = define_tool(deploy_execute, name="deploy", input_schema=_args(service=_text("web", "The service to deploy.")))
refund = define_tool(
    refund_execute,
    name="refund",
    input_schema=_args(
        order=_text("A-1001", "The order to refund."),
        amount={"type": "number", "exclusiveMinimum": 0, "default": 25.0, "description": "How much to refund."},
        currency={"type": "string", "enum": ["EUR", "USD", "GBP"], "default": "EUR"},
    ),
)
crunch = define_tool(
    crunch_execute,
    name="crunch",
    input_schema=_args(
        steps={"type": "integer", "minimum": 0, "default": 50, "description": "How many steps to work through."},
        pause={"type": "number", "minimum": 0, "maximum": 60, "default": 0.1, "description": "Seconds between steps."},
    ),
)
fetchish = define_tool(
    fetchish_execute,
    name="fetchish",
    input_schema=_args(
        url=_text("https://example.invalid/data", "What to pretend to fetch."),
        work={"type": "number", "minimum": 0, "default": 0.2, "description": "Seconds the fetch takes."},
    ),
)
balance = define_tool(balance_execute, name="balance", input_schema=_args(account=_text("acme", "The account.")))

signup = define_tool(signup_execute, name="signup", input_schema=_args(company=_text("Acme", "The customer.")))
ask_secret = define_tool(
    ask_secret_execute, name="ask_secret", input_schema=_args(service=_text("database", "Whose password to ask for."))
)
confirm = define_tool(
    confirm_execute,
    name="confirm",
    input_schema=_args(
        action=_text("rotate the logs", "What to do."),
        details={
            "type": "object",
            "default": CONFIRM_DETAILS,
            "description": "Shown to the reviewer beside the action.",
        },
    ),
)
phish = define_tool(phish_execute, name="phish", input_schema=_args())
expiring = define_tool(
    expiring_execute,
    name="expiring",
    input_schema=_args(
        seconds={"type": "number", "exclusiveMinimum": 0, "default": 30.0, "description": "Seconds until it expires."}
    ),
)

TOOLS = [deploy, refund, crunch, fetchish, balance, signup, ask_secret, confirm, phish, expiring]
