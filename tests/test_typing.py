"""The app stays typed, read from its source: how many functions are annotated, what mypy is told to
check, and that every ``# type: ignore`` says which error it silences and why (issue 31).

mypy (``make lint``) already refuses an unannotated function; these checks hold the same floor
without it, and keep its configuration from quietly checking less.
"""

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The share of function definitions that must be annotated, per package.
FLOORS = {"approvals": 0.90, "console_remote": 1.0}
CHECKED = ("approvals", "console_remote", "toolnexus_site")
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<after>.*)")


def unannotated(source):
    """Names of the functions in ``source`` missing an annotation: on a parameter (self and cls aside,
    ``*args`` and ``**kwargs`` included) or on the return."""
    missing = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        arguments = node.args
        parameters = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
        if parameters and parameters[0].arg in ("self", "cls"):
            parameters = parameters[1:]
        parameters += [extra for extra in (arguments.vararg, arguments.kwarg) if extra is not None]
        if node.returns is None or any(parameter.annotation is None for parameter in parameters):
            missing.append(f"{node.name} (line {node.lineno})")
    return missing


def function_count(source):
    return sum(isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) for node in ast.walk(ast.parse(source)))


def annotated_share(package):
    """(share annotated, the unannotated functions by file) for every module under ``package``."""
    total, missing = 0, {}
    for path in sorted((ROOT / package).rglob("*.py")):
        source = path.read_text()
        total += function_count(source)
        if found := unannotated(source):
            missing[str(path.relative_to(ROOT))] = found
    return 1 - sum(map(len, missing.values())) / total, missing


def ignores_without_code_or_reason(source):
    """Lines whose ``# type: ignore`` names no error code, or has no comment saying why (after it on
    the line, or on the line above)."""
    lines = source.splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        match = IGNORE.search(line)
        if match is None:
            continue
        above = lines[number - 2].strip() if number > 1 else ""
        reason = match["after"].strip().startswith("#") or above.startswith("#")
        if not match["codes"] or not reason:
            found.append(number)
    return found


def test_every_function_in_console_remote_is_annotated():
    share, missing = annotated_share("console_remote")
    assert share >= FLOORS["console_remote"], missing


def test_at_least_nine_in_ten_functions_of_the_app_are_annotated():
    share, missing = annotated_share("approvals")
    assert share >= FLOORS["approvals"], f"{share:.1%} annotated; missing: {missing}"


def test_the_annotation_count_sees_each_missing_annotation():
    source = """
def typed(a: int, *rest: str, b: int = 0, **more: str) -> int: ...
class C:
    def method(self, x: int) -> None: ...
    @classmethod
    def make(cls) -> "C": ...
def no_return(a: int): ...
def bare_parameter(a) -> None: ...
async def bare_keyword(*, b) -> None: ...
def bare_varargs(*args) -> None: ...
def bare_kwargs(**kwargs) -> None: ...
class D:
    def bare_method(self, y): ...
"""
    assert function_count(source) == 9
    assert [name.split()[0] for name in unannotated(source)] == [
        "no_return",
        "bare_parameter",
        "bare_keyword",
        "bare_varargs",
        "bare_kwargs",
        "bare_method",
    ]


def test_mypy_checks_the_whole_app_and_ignores_no_module():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert set(config["files"]) >= set(CHECKED)
    assert not config.get("exclude"), "every module of the app is checked, migrations included"
    assert config["disallow_untyped_defs"] is True
    for override in config.get("overrides", []):
        assert "ignore_errors" not in override, override["module"]


def test_every_type_ignore_names_its_error_and_why():
    found = {}
    for package in CHECKED:
        for path in (ROOT / package).rglob("*.py"):
            if lines := ignores_without_code_or_reason(path.read_text()):
                found[str(path.relative_to(ROOT))] = lines
    assert not found


def test_the_type_ignore_check_sees_a_bare_or_unexplained_one():
    source = """x = f()  # type: ignore
y = f()  # type: ignore[arg-type]
# The stub leaves None out.
z = f()  # type: ignore[arg-type]
w = f()  # type: ignore[misc]  # private in the stubs
v = f()  # type:ignore
"""
    assert ignores_without_code_or_reason(source) == [1, 2, 6]
