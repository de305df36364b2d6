"""A tool for the team e2e test: a payout that a policy (CONSOLE_POLICIES) makes need two approvals."""
from toolnexus import ToolResult, define_tool, pending


def payout_execute(amount: float = 100.0, ctx=None):
    """Pay out once the reviewers approve."""
    answer = getattr(ctx, "answer", None)
    if answer is not None:
        return f"paid out {amount} EUR" if answer.ok else ToolResult(output="payout not made", is_error=True)
    return pending(kind="approval", prompt=f"Pay out {amount} EUR?", data={"amount": amount})


payout = define_tool(payout_execute, name="payout")
