"""The app's layers, read from its source: entry points (web/) call services, services use models,
and only services call the measured speed-ups (hotpath/). No import cycles, none dodged."""

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "approvals"

# The packages allowed to import approvals.hotpath: the services and the reads they share, the
# models' append-only save, and the process start-up that installs the speed-ups.
HOTPATH_CALLERS = (
    "approvals.hotpath.",
    "approvals.review.",
    "approvals.runs.",
    "approvals.team.",
    "approvals.audit.",
    "approvals.models",
    "approvals.events",
    "approvals.selectors",
    "approvals.startup",
)
# Function-level imports Django itself asks for: AppConfig.ready connects the signal receivers once the
# app registry is loaded (importing them at module level would load the models too early).
DJANGO_HOOKS = {("approvals.apps", "ready")}
# The API's database thread is a hotpath module the API's views are wrapped in.
KNOWN_WEB_TO_HOTPATH = ["approvals.web.api -> approvals.hotpath.database_thread"]
# Write calls an entry point must leave to a service.
WRITES = {"save", "create", "update", "delete", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}


def module_name(path):
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def app_modules():
    return {
        module_name(path): ast.parse(path.read_text(), str(path))
        for path in APP.rglob("*.py")
        if "migrations" not in path.parts
    }


def imported(node, importer, known):
    """The app modules one import statement names (``from approvals.x import y`` names x.y if
    that is a module, else x)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if node.level:
        base = importer.rsplit(".", node.level)[0] if node.level else ""
        source = f"{base}.{node.module}" if node.module else base
    else:
        source = node.module or ""
    if not source.startswith("approvals"):
        return []
    found = []
    for alias in node.names:
        candidate = f"{source}.{alias.name}"
        if candidate in known:
            found.append(candidate)
        elif source in known:
            found.append(source)
    return found


def import_graph(modules):
    graph, local = {}, []
    for name, tree in modules.items():
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(imported(node, name, modules))
        for function in ast.walk(tree):
            if (
                isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (name, function.name) not in DJANGO_HOOKS
            ):
                for node in ast.walk(function):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and imported(node, name, modules):
                        local.append(f"{name}:{node.lineno}")
        edges.discard(name)
        graph[name] = edges
    return graph, local


def cycles(graph):
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_app_has_no_import_cycles():
    graph, _ = import_graph(app_modules())
    assert cycles(graph) == []


def test_no_app_module_is_imported_inside_a_function():
    _, local = import_graph(app_modules())
    assert local == []


def test_only_services_import_the_hotpath():
    graph, _ = import_graph(app_modules())
    offenders = sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if target.startswith("approvals.hotpath") and not name.startswith(HOTPATH_CALLERS)
    )
    assert offenders == KNOWN_WEB_TO_HOTPATH


def test_entry_points_never_write_models():
    offenders = []
    for name, tree in app_modules().items():
        if not name.startswith("approvals.web"):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in WRITES
                and isinstance(node.func.value, (ast.Attribute, ast.Name))
                and (getattr(node.func.value, "attr", None) == "objects" or node.func.attr == "save")
            ):
                offenders.append(f"{name}:{node.lineno} .{node.func.attr}(")
    assert offenders == []


def test_the_layout_check_sees_a_cycle_and_a_local_import():
    """The checks above are only as good as the graph: prove they catch what they forbid."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    modules = {
        "approvals.x": ast.parse("def f():\n    from approvals import y\n"),
        "approvals.y": ast.parse("import approvals.x\n"),
    }
    graph, local = import_graph(modules)
    assert local == ["approvals.x:2"]
    assert cycles(graph) == [["approvals.x", "approvals.y"]]


# -- tests ask for the database one way -------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
DATABASE_FIXTURES = {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback"}


def database_marks_out_of_place(name, tree):
    """Every way a test module asks for the database other than one module-level
    ``pytestmark = pytest.mark.django_db(...)``: a per-test or aliased mark, or a database fixture."""
    allowed = {
        id(node)
        for statement in tree.body
        if isinstance(statement, ast.Assign)
        and [getattr(target, "id", None) for target in statement.targets] == ["pytestmark"]
        for node in ast.walk(statement.value)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "django_db" and id(node) not in allowed:
            found.append(f"{name}:{node.lineno} pytest.mark.django_db outside the module's pytestmark")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for argument in node.args.args + node.args.kwonlyargs:
                if argument.arg in DATABASE_FIXTURES:
                    found.append(f"{name}:{node.lineno} {node.name} asks for the {argument.arg} fixture")
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "getfixturevalue"
            and any(isinstance(arg, ast.Constant) and arg.value in DATABASE_FIXTURES for arg in node.args)
        ):
            found.append(f"{name}:{node.lineno} asks for a database fixture by name")
    return found


def test_database_tests_are_marked_once_per_module():
    """A module whose tests touch the database says so in one line at its top:
    ``pytestmark = pytest.mark.django_db(transaction=True)`` (or the plain mark, or with reset_sequences)."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += database_marks_out_of_place(str(path.relative_to(TESTS)), ast.parse(path.read_text(), str(path)))
    assert found == [], "\n".join(found)


def test_the_database_mark_check_sees_each_other_form():
    source = (
        "import pytest\n"
        "pytestmark = pytest.mark.django_db(transaction=True)\n"
        "live_db = pytest.mark.django_db\n"
        "@pytest.mark.django_db\n"
        "def test_a(): ...\n"
        "def test_b(transactional_db): ...\n"
        "def test_c(request): request.getfixturevalue('db')\n"
    )
    assert sorted(line.split(" ", 1)[0] for line in database_marks_out_of_place("m", ast.parse(source))) == [
        "m:3",
        "m:4",
        "m:6",
        "m:7",
    ]
