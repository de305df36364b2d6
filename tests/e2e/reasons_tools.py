"""A tool for the reasons e2e test: while it runs, it asks a reviewer itself (``console_wait_for``, as an MCP
server's elicitation does), so its request is asked from inside a running call and takes no reply."""

from toolnexus import Request, define_tool

from approvals.runs.waiting import console_wait_for


async def execute(ctx=None):
    answer = await console_wait_for(Request(id="asked-inside", kind="approval", prompt="Also delete the old logs?"))
    return f"cleaned up; old logs {'deleted' if answer.ok else 'kept'}"


cleanup = define_tool(execute, name="cleanup", description="Cleans up, asking about the old logs while it runs.")
