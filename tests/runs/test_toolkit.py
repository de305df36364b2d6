"""Tool modules from settings and TOOLNEXUS_TOOL_MODULES, and the Toolkit the console serves."""

import textwrap
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from toolnexus import Tool

from approvals import demo_tools
from approvals.review.forms import SOME_TEXT
from approvals.runs import toolkit

DEMO_NAMES = [
    "deploy",
    "refund",
    "crunch",
    "fetchish",
    "balance",
    "signup",
    "ask_secret",
    "confirm",
    "phish",
    "expiring",
]


@pytest.fixture
def tool_module(tmp_path, monkeypatch):
    """Write a throw-away module onto sys.path: ``tool_module(source) -> its dotted name``."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(source):
        name = f"console_test_tools_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.delitem(__import__("sys").modules, name, raising=False)
        return name

    return write


def test_wrong_module_path_names_the_module():
    with pytest.raises(ImproperlyConfigured) as bad:
        toolkit.load_tool_modules(["approvals.no_such_tools"])
    message = str(bad.value)
    assert "'approvals.no_such_tools' could not be found" in message
    assert "TOOLNEXUS_TOOL_MODULES" in message


def test_wrong_top_level_package_names_the_module():
    with pytest.raises(ImproperlyConfigured, match=r"'nowhere_pkg\.tools' could not be found"):
        toolkit.load_tool_modules(["nowhere_pkg.tools"])


def test_module_raising_on_import_names_it_and_the_error(tool_module):
    name = tool_module("""
        raise RuntimeError("tool config missing: API_TOKEN")
    """)
    with pytest.raises(ImproperlyConfigured) as bad:
        toolkit.load_tool_modules([name])
    assert str(bad.value) == f"Tool module {name!r} failed to import: RuntimeError: tool config missing: API_TOKEN"
    assert isinstance(bad.value.__cause__, RuntimeError)


def test_module_with_a_missing_dependency_is_not_reported_as_missing_itself(tool_module):
    name = tool_module("""
        import console_test_dependency_that_is_not_installed  # noqa: F401
    """)
    with pytest.raises(ImproperlyConfigured) as bad:
        toolkit.load_tool_modules([name])
    message = str(bad.value)
    assert message.startswith(f"Tool module {name!r} failed to import: ModuleNotFoundError")
    assert "console_test_dependency_that_is_not_installed" in message
    assert "could not be found" not in message


def test_module_without_tools_is_refused(tool_module):
    name = tool_module("""
        VALUE = 1
    """)
    with pytest.raises(ImproperlyConfigured, match=rf"'{name}' exposes no toolnexus.Tool"):
        toolkit.load_tool_modules([name])


def test_module_level_tool_attributes_are_picked_up(tool_module):
    name = tool_module("""
        from toolnexus import define_tool

        def _ping(host: str = "localhost"):
            \"\"\"Ping a host.\"\"\"
            return f"pong from {host}"

        ping = define_tool(_ping, name="ping")
        _hidden = define_tool(_ping, name="hidden")
        not_a_tool = "ping"
    """)
    tools = toolkit.load_tool_modules([name])
    assert [t.name for t in tools] == ["ping"]
    assert isinstance(tools[0], Tool)
    assert tools[0].description == "Ping a host."


def test_explicit_tools_list_wins_over_attributes(tool_module):
    name = tool_module("""
        from toolnexus import define_tool

        def _a():
            \"\"\"A.\"\"\"
            return "a"

        a = define_tool(_a, name="a")
        b = define_tool(_a, name="b")
        TOOLS = [b]
    """)
    assert [t.name for t in toolkit.load_tool_modules([name])] == ["b"]


def test_configured_modules_are_the_demo_tools_by_default(monkeypatch):
    monkeypatch.delenv("TOOLNEXUS_TOOL_MODULES", raising=False)
    assert toolkit.configured_module_paths() == ["approvals.demo_tools"]
    assert toolkit.load_tool_modules() == demo_tools.TOOLS


def test_env_var_adds_tool_modules(tool_module, monkeypatch):
    first = tool_module("""
        from toolnexus import define_tool
        greet = define_tool(lambda: "hi", name="greet", description="Greet.")
    """)
    second = tool_module("""
        from toolnexus import define_tool
        wave = define_tool(lambda: "o/", name="wave", description="Wave.")
    """)
    monkeypatch.setenv("TOOLNEXUS_TOOL_MODULES", f" {first} ,,{second},approvals.demo_tools")
    assert toolkit.configured_module_paths() == ["approvals.demo_tools", first, second]
    assert [t.name for t in toolkit.load_tool_modules()] == DEMO_NAMES + ["greet", "wave"]


def test_env_var_with_a_bad_module_stops_loading(monkeypatch):
    monkeypatch.setenv("TOOLNEXUS_TOOL_MODULES", "approvals.not_here")
    with pytest.raises(ImproperlyConfigured, match="'approvals.not_here' could not be found"):
        toolkit.configured_tools()


async def test_get_toolkit_serves_the_demo_tools_and_question_only():
    kit = await toolkit.get_toolkit()
    names = [t.name for t in kit.tools()]
    assert sorted(names) == sorted(DEMO_NAMES + ["question"])
    for builtin in ("bash", "read", "write", "edit", "webfetch"):
        assert kit.get(builtin) is None
    assert kit.get("question").source == "builtin"
    assert {kit.get(n).source for n in DEMO_NAMES} == {"native"}
    assert await toolkit.get_toolkit() is kit  # built once per process


async def test_get_toolkit_includes_extra_tools(extra_tools):
    from toolnexus import define_tool

    extra_tools(define_tool(lambda: "x", name="extra_one", description="Extra."))
    kit = await toolkit.get_toolkit()
    assert kit.get("extra_one") is not None
    assert kit.get("deploy") is not None


async def test_tool_catalog_describes_each_tool():
    catalog = {entry["name"]: entry for entry in await toolkit.tool_catalog()}
    assert set(catalog) == set(DEMO_NAMES + ["question"])
    deploy = catalog["deploy"]
    assert deploy["description"] == "Deploy a service, asking the reviewer which environment first."
    assert deploy["input_schema"]["properties"] == {
        "service": {"type": "string", "pattern": SOME_TEXT, "default": "web", "description": "The service to deploy."}
    }
    assert deploy["source"] == "native"
