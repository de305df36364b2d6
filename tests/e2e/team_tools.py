"""Tools for the team e2e test, each an approval that a policy (CONSOLE_POLICIES) governs.

``payout`` needs two approvals; only bob may approve a ``wire``.
"""

from toolnexus import ToolResult, define_tool, pending


def money_tool(name, ask, done):
    """An approval tool: asks ``ask`` about an amount (which the reviewers may edit), returns ``done`` once approved."""

    def execute(amount: float = 100.0, ctx=None):
        answer = getattr(ctx, "answer", None)
        if answer is not None:
            if not answer.ok:
                return ToolResult(output=f"{name} not made", is_error=True)
            # The reviewers may have changed the amount before approving it.
            return done.format(amount=((answer.data or {}).get("args") or {}).get("amount", amount))
        return pending(kind="approval", prompt=ask.format(amount=amount), data={"editable": ["amount"]})

    return define_tool(execute, name=name, description=f"Asks {ask!r} and answers {done!r} once approved.")


payout = money_tool("payout", "Pay out {amount} EUR?", "paid out {amount} EUR")
wire = money_tool("wire", "Wire {amount} EUR?", "wired {amount} EUR")
