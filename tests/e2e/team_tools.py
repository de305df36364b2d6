"""Tools for the team e2e test, each an approval that a policy (CONSOLE_POLICIES) governs.

``payout`` needs two approvals; only bob may approve a ``wire``.
"""
from toolnexus import ToolResult, define_tool, pending


def money_tool(name, ask, done):
    """An approval tool: asks ``ask`` about an amount, returns ``done`` once the reviewers approve."""

    def execute(amount: float = 100.0, ctx=None):
        answer = getattr(ctx, "answer", None)
        if answer is not None:
            return done.format(amount=amount) if answer.ok else ToolResult(output=f"{name} not made", is_error=True)
        return pending(kind="approval", prompt=ask.format(amount=amount), data={"amount": amount})

    return define_tool(execute, name=name, description=f"Asks {ask!r} and answers {done!r} once approved.")


payout = money_tool("payout", "Pay out {amount} EUR?", "paid out {amount} EUR")
wire = money_tool("wire", "Wire {amount} EUR?", "wired {amount} EUR")
