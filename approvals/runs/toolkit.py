"""Builds the console's one toolnexus Toolkit from settings.

Tool modules are imported at start-up (a bad path must stop the server, naming the
module); the Toolkit itself is built on the server's event loop the first time it
is needed, because MCP servers are subprocesses bound to that loop.
"""

import asyncio
import contextvars
import importlib
import os
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from toolnexus import Tool, Toolkit, create_toolkit
from toolnexus.builtin import BuiltinsConfig, create_builtin_tools

from approvals.runs import waiting

_loaded_tools: list[Tool] | None = None
_toolkit: Toolkit | None = None
_toolkit_lock: asyncio.Lock | None = None
# (task, close event): the task that opened the MCP connections
_toolkit_owner: tuple[asyncio.Task[None], asyncio.Event] | None = None


def configured_module_paths() -> list[str]:
    paths = list(settings.TOOLNEXUS.get("TOOL_MODULES", []))
    for path in os.environ.get("TOOLNEXUS_TOOL_MODULES", "").split(","):
        path = path.strip()
        if path and path not in paths:
            paths.append(path)
    return paths


def tools_in_module(module: ModuleType) -> list[Tool]:
    """Every ``toolnexus.Tool`` a module exposes: its ``TOOLS`` list if it has one, else its Tool attributes."""
    explicit = getattr(module, "TOOLS", None)
    if explicit is not None:
        return list(explicit)
    return [value for name, value in vars(module).items() if isinstance(value, Tool) and not name.startswith("_")]


def _is_missing_itself(path: str, exc: ModuleNotFoundError) -> bool:
    """True when ``exc`` is about ``path`` (or one of its parent packages), not a module it imports."""
    return exc.name is None or path == exc.name or path.startswith(exc.name + ".")


def load_tool_modules(paths: Iterable[str] | None = None) -> list[Tool]:
    """Import each configured module and collect its tools; raise ImproperlyConfigured naming a bad module."""
    tools: list[Tool] = []
    for path in configured_module_paths() if paths is None else paths:
        try:
            module = importlib.import_module(path)
        except ModuleNotFoundError as exc:
            if not _is_missing_itself(path, exc):
                # The module exists; something it imports does not.
                raise ImproperlyConfigured(
                    f"Tool module {path!r} failed to import: {type(exc).__name__}: {exc}"
                ) from exc
            raise ImproperlyConfigured(
                f"Tool module {path!r} could not be found ({exc}). Check TOOLNEXUS_TOOL_MODULES "
                f"and TOOLNEXUS['TOOL_MODULES']: each entry is a dotted path importable from the project."
            ) from exc
        except Exception as exc:
            raise ImproperlyConfigured(f"Tool module {path!r} failed to import: {type(exc).__name__}: {exc}") from exc
        found = tools_in_module(module)
        if not found:
            raise ImproperlyConfigured(f"Tool module {path!r} exposes no toolnexus.Tool.")
        tools.extend(found)
    return tools


def configured_tools() -> list[Tool]:
    global _loaded_tools
    if _loaded_tools is None:
        _loaded_tools = load_tool_modules()
    return _loaded_tools


def _builtins_config() -> BuiltinsConfig:
    enabled = set(settings.TOOLNEXUS.get("BUILTINS", []))
    if not enabled:
        return False
    return {"tools": {tool.name: tool.name in enabled for tool in create_builtin_tools(None)}}


async def _own_toolkit(built: asyncio.Future[Toolkit], close: asyncio.Event) -> None:
    """Build the Toolkit and keep its MCP connections in this one task until ``close`` is set.

    The MCP SDK's sessions must be closed by the task that opened them, and their
    reader tasks inherit this task's (empty) context: an elicitation never carries
    the context of whichever run or HTTP request happened to build the toolkit.
    """
    try:
        toolkit = await create_toolkit(
            mcp_config=settings.TOOLNEXUS.get("MCP_CONFIG"),
            skills_dir=settings.TOOLNEXUS.get("SKILLS_DIR"),
            extra_tools=configured_tools(),
            builtins=_builtins_config(),
            wait_for=waiting.console_wait_for,  # MCP elicitations arrive during a run's call: started
        )
    except BaseException as exc:
        built.set_exception(exc)
        return
    built.set_result(toolkit)
    try:
        await close.wait()
    finally:
        await toolkit.close()


async def get_toolkit() -> Toolkit:
    """The process's Toolkit, built once on the running loop."""
    global _toolkit, _toolkit_lock, _toolkit_owner
    if _toolkit is not None:
        return _toolkit
    if _toolkit_lock is None:
        _toolkit_lock = asyncio.Lock()
    async with _toolkit_lock:
        if _toolkit is None:
            loop = asyncio.get_running_loop()
            built: asyncio.Future[Toolkit] = loop.create_future()
            close = asyncio.Event()
            task = loop.create_task(_own_toolkit(built, close), context=contextvars.Context())
            _toolkit_owner = (task, close)
            _toolkit = await built
    return _toolkit


async def close_toolkit() -> None:
    """Close the Toolkit's MCP connections (their server subprocesses end) and forget it."""
    global _toolkit_owner
    owner, _toolkit_owner = _toolkit_owner, None
    reset_toolkit()
    if owner is not None:
        task, close = owner
        close.set()
        await asyncio.gather(task, return_exceptions=True)


def tool_names() -> frozenset[str]:
    """The names of the tools this console serves: the built Toolkit's (MCP servers' and builtins' too),
    else the configured modules' (what a metric's ``tool`` label may say; any other is ``other``)."""
    if _toolkit is not None:
        return frozenset(tool.name for tool in _toolkit.tools())
    return frozenset(tool.name for tool in configured_tools())


def reset_toolkit() -> None:
    """Forget the built Toolkit (tests switch tool modules and loops)."""
    global _toolkit, _toolkit_lock, _loaded_tools
    _toolkit = None
    _toolkit_lock = None
    _loaded_tools = None


async def tool_catalog() -> list[dict[str, Any]]:
    """Name, description and input schema of every tool the console serves, for the Start-a-run form:
    the console's own tools first, in the order they are configured, then toolnexus' builtins (the form
    opens on the first entry, the README's ``deploy`` in the demo)."""
    toolkit = await get_toolkit()
    return [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema, "source": t.source}
        for t in sorted(toolkit.tools(), key=lambda tool: tool.source == "builtin")
    ]
