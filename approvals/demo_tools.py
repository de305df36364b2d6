"""Demo toolnexus tools, on by default, one for each path through the console.

They are ordinary ``define_tool`` tools: nothing here knows about Django. Each
reads ``ctx`` defensively, because ``ctx`` and ``ctx.signal`` may be None (§1).
"""
import asyncio
import time

from toolnexus import ToolResult, define_tool, pending

from .cancel import is_cancelled


def _answer(ctx):
    return getattr(ctx, "answer", None)


def deploy_execute(service: str = "web", ctx=None):
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


def refund_execute(order: str = "A-1001", amount: float = 25.0, currency: str = "EUR", ctx=None):
    """Refund an order once a reviewer approves the amount."""
    answer = _answer(ctx)
    if answer is not None:
        if not answer.ok:
            return ToolResult(output=f"refund of {amount} {currency} not made", is_error=True)
        return f"refunded {amount} {currency} on order {order}"
    return pending(
        kind="approval",
        prompt=f"Refund {amount} {currency} on order {order}?",
        data={"order": order, "amount": amount, "currency": currency},
    )


async def crunch_execute(steps: int = 50, pause: float = 0.1, ctx=None):
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
            except asyncio.TimeoutError:
                pass
        else:
            await asyncio.sleep(pause)
        if not is_cancelled(ctx):
            done += 1
    return f"crunched {done} of {steps} steps"


def fetchish_execute(url: str = "https://example.invalid/data", work: float = 0.2, ctx=None):
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
    stopped = signal.wait_blocking(wait) if signal is not None else time.sleep(wait)
    if stopped:
        return ToolResult(output=f"gave up on {url}: {signal.reason}", is_error=True)
    if work > budget:
        return ToolResult(output=f"could not fetch {url} within {budget:g}s", is_error=True)
    return f"fetched {url} within {budget:g}s (took {time.monotonic() - started:.2f}s)"


BALANCES = {"acme": 1250.40, "globex": 87.00}


def balance_execute(account: str = "acme", ctx=None):
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


deploy = define_tool(deploy_execute, name="deploy")
refund = define_tool(refund_execute, name="refund")
crunch = define_tool(crunch_execute, name="crunch")
fetchish = define_tool(fetchish_execute, name="fetchish")
balance = define_tool(balance_execute, name="balance")

TOOLS = [deploy, refund, crunch, fetchish, balance]
