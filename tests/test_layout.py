"""The app's layers, read from its source: entry points (web/) call services, services use models,
and only services call the measured speed-ups (hotpath/). No import cycles, none dodged."""

import ast
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "approvals"

# The packages allowed to import approvals.hotpath: the services and the reads they share, the
# models' append-only save, and the process start-up that installs the speed-ups. (Settings install
# its middleware and channel layers by name.)
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
# Write calls an entry point must leave to a service.
WRITES = {"save", "create", "update", "delete", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}
WRITES |= {f"a{write}" for write in WRITES}  # and their async twins (asave, aupdate, ...)
# The one module that changes a run's status once it exists (a run is created running, in approvals.runs):
# below the request's door, which makes a run wait on a suspension and go on once answered.
RUN_STATUS_WRITER = "approvals.models.run_state"
STATUS_WRITES = {"update", "aupdate", "create", "acreate", "get_or_create", "update_or_create"}


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


# The app's units from top to bottom (docs/design.md, with the reason for each place). A unit is a package
# directly under approvals/ or a module at its root; it imports only units in the ranks below its own,
# never one above and never one beside it.
LAYERS = (
    # wiring: Django, daphne and settings find these by name
    ("apps", "admin", "urls", "api_urls", "routing", "startup", "management", "templatetags", "demo_tools"),
    ("web", "checks", "signals"),  # entry points, and the hooks apps.ready connects
    ("frames",),  # the views and socket frames entry points serve
    ("inbox",),  # the inbox's query and its bulk answers
    ("runs",),
    ("shapes",),  # the one place a Request, Answer or Run becomes JSON
    ("audit",),
    ("review",),  # the request's one door
    ("selectors",),  # the shared queries
    ("team",),
    ("events",),  # handed what it publishes by apps.ready
    ("moments", "keyset", "remote", "backup", "signing"),
    ("models",),
    ("hotpath",),
    ("telemetry",),  # metrics and log lines: told of committed events, imports nothing of the app
)


def unit_of(module):
    """The unit a module belongs to: ``approvals.review.decisions`` is in ``review``, ``approvals.events`` is ``events``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def layering_breaks(graph, layers=LAYERS):
    """Every import of a unit by one not above it (``importer -> imported``), and every unit with no place."""
    rank = {unit: depth for depth, units in enumerate(layers) for unit in units}
    breaks = set()
    for importer, targets in graph.items():
        for target in targets:
            here, there = unit_of(importer), unit_of(target)
            if here is None or there is None or here == there:
                continue
            for unit in (here, there):
                if unit not in rank:
                    breaks.add(f"{unit} has no place in LAYERS")
            if here in rank and there in rank and rank[here] >= rank[there]:
                breaks.add(f"{importer} -> {target}")
    return sorted(breaks)


def test_the_app_stands_in_layers():
    """No package imports one above it or beside it (docs/design.md says why each stands where it does)."""
    graph, _ = import_graph(app_modules())
    assert layering_breaks(graph) == []


def test_the_layer_check_sees_an_upward_import_planted_in_the_app():
    """The same check over the app's own modules, with one upward import planted in a copy of its graph: the
    door importing the inbox, at module level and inside a function, and a model importing the web."""
    modules = app_modules()
    planted = {
        "approvals.review.decisions": "from approvals import inbox\n",
        "approvals.review.quorum": "def f():\n    from approvals.inbox.bulk import bulk_ask\n",
        "approvals.models.requests": "import approvals.web.views\n",
        "approvals.moments": "from approvals.keyset import encode_cursor\n",
    }
    for name, source in planted.items():
        modules[name] = ast.Module(body=modules[name].body + ast.parse(source).body, type_ignores=[])
    graph, _ = import_graph(modules)
    assert layering_breaks(graph) == [
        "approvals.models.requests -> approvals.web.views",
        "approvals.moments -> approvals.keyset",
        "approvals.review.decisions -> approvals.inbox",
        "approvals.review.quorum -> approvals.inbox.bulk",
    ]


def test_the_layer_check_sees_a_unit_with_no_place():
    graph = {"approvals.health": {"approvals.models"}, "approvals.web.api": {"approvals.health"}}
    assert layering_breaks(graph) == ["health has no place in LAYERS"]


def private_imports(modules):
    """Every private name (``_x``) one app module imports from another: a name another module needs is public."""
    return sorted(
        f"{name}:{node.lineno} imports {alias.name}"
        for name, tree in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("approvals")
        for alias in node.names
        if alias.name.startswith("_")
    )


def test_no_module_imports_another_modules_private_name():
    assert private_imports(app_modules()) == []


def renamed_app_imports(modules):
    """``from approvals.x import y as z``: an app module under another module's name (the split-era
    ``services as runs``) reads as the module it is not."""
    return sorted(
        f"{name}:{node.lineno} imports {alias.name} as {alias.asname}"
        for name, tree in modules.items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("approvals")
        for alias in node.names
        if alias.asname and alias.asname != alias.name
    )


def test_no_app_module_is_imported_under_another_name():
    assert renamed_app_imports(app_modules()) == []


def test_the_renamed_import_check_sees_one():
    modules = {"approvals.x": ast.parse("from approvals.runs import services as runs\nfrom approvals import shapes\n")}
    assert renamed_app_imports(modules) == ["approvals.x:1 imports services as runs"]


def test_the_private_import_check_sees_one():
    modules = {
        "approvals.x": ast.parse("from approvals.runs.supervisor import _current_scope, supervisor\n"),
        "approvals.y": ast.parse("def f():\n    from approvals.y import _z\n"),
        "approvals.z": ast.parse("from toolnexus.types import _pending_seq\n"),
    }
    assert private_imports(modules) == ["approvals.x:1 imports _current_scope", "approvals.y:2 imports _z"]


def responses_rendered_below_web(modules, layers=LAYERS):
    """The imports with which a unit below the entry points could make an HTTP response: a response class
    from django.http (``HttpResponseBase`` is only a type), django.shortcuts or the template engine."""
    below_web = {unit for units in layers[2:] for unit in units}
    found = []
    for name, tree in modules.items():
        if unit_of(name) not in below_web:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            if module.startswith(("django.shortcuts", "django.template")):
                found.append(f"{name}:{node.lineno} {module}")
            elif module == "django.http":
                found += [
                    f"{name}:{node.lineno} {alias.name}"
                    for alias in node.names
                    if alias.name.endswith("Response")
                    or alias.name.startswith("HttpResponse")
                    and alias.name != "HttpResponseBase"
                ]
    return sorted(found)


def test_services_render_no_http_responses():
    """What a refusal looks like over HTTP is the entry points' business (web/): services raise or return."""
    assert responses_rendered_below_web(app_modules()) == []


def test_the_response_check_sees_each_way_to_render():
    modules = {
        "approvals.team.x": ast.parse(
            "from django.http import HttpRequest, HttpResponseBase, JsonResponse\n"
            "from django.shortcuts import render\n"
            "from django.template.loader import render_to_string\n"
            "from django.http import HttpResponseRedirect\n"
        ),
        "approvals.web.y": ast.parse("from django.shortcuts import render\n"),
    }
    assert responses_rendered_below_web(modules) == [
        "approvals.team.x:1 JsonResponse",
        "approvals.team.x:2 django.shortcuts",
        "approvals.team.x:3 django.template.loader",
        "approvals.team.x:4 HttpResponseRedirect",
    ]


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
    assert offenders == []


def test_only_start_up_freezes_the_garbage_collector():
    graph, _ = import_graph(app_modules())
    importers = sorted(name for name, targets in graph.items() if "approvals.hotpath.gc_freeze" in targets)
    assert importers == ["approvals.startup"]


def model_writes(tree):
    """The ``.save()`` calls and the writes through a manager (``X.objects....update(...)``) in ``tree``."""
    writes = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in WRITES
        and ("objects" in _names(node.func.value) or node.func.attr in {"save", "asave"})
    ]
    return [f"{node.lineno} .{node.func.attr}(" for node in sorted(writes, key=lambda node: node.lineno)]


def test_entry_points_never_write_models():
    offenders = [
        f"{name}:{write}"
        for name, tree in app_modules().items()
        if name.startswith("approvals.web")
        for write in model_writes(tree)
    ]
    assert offenders == []


def test_the_model_write_check_sees_querysets_and_async_writes():
    source = (
        "Run.objects.create(tool='x')\n"
        "Run.objects.filter(pk=1).update(owner='p')\n"
        "await Request.objects.filter(pk=1).aupdate(status='x')\n"
        "await run.asave()\n"
        "run.save(update_fields=['owner'])\n"
        "Run.objects.filter(pk=1).first()\n"
        "response.delete_cookie('x')\n"
    )
    assert model_writes(ast.parse(source)) == ["1 .create(", "2 .update(", "3 .aupdate(", "4 .asave(", "5 .save("]


def run_status_writes(tree):
    """The lines of ``tree`` that write ``Run.status``: a ``Run.objects`` chain's update or create with
    ``status=``, a ``Run(status=...)``, and any ``rows.update(Run, ...)`` (its changes are a dict)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        sets_status = any(keyword.arg == "status" for keyword in node.keywords)
        if isinstance(func, ast.Name) and func.id == "Run" and sets_status:
            found.append(node.lineno)
        elif isinstance(func, ast.Attribute) and func.attr == "update" and _names(func.value) == ["rows"]:
            if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "Run":
                found.append(node.lineno)
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in STATUS_WRITES
            and sets_status
            and _names(func.value)[:2] == ["Run", "objects"]
        ):
            found.append(node.lineno)
    return found


def _names(node):
    """The names a chain of attributes and calls starts with: ``Run.objects.filter(x).update`` gives Run, objects, filter."""
    names = []
    while isinstance(node, (ast.Attribute, ast.Call)):
        if isinstance(node, ast.Call):
            node = node.func
            continue
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        names.append(node.id)
    return names[::-1]


def test_only_the_run_state_module_changes_a_runs_status():
    """Every change of a run's status is in models/run_state.py; creation (born running) is in runs/."""
    writers: dict[str, list[int]] = {}
    for name, tree in app_modules().items():
        for line in run_status_writes(tree):
            if not (name.startswith("approvals.runs.") and _creates_a_run(tree, line)):
                writers.setdefault(name, []).append(line)
    assert list(writers) == [RUN_STATUS_WRITER], writers


def _creates_a_run(tree, line):
    return any(
        isinstance(node, ast.Call)
        and node.lineno == line
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in {"create", "acreate"}
        for node in ast.walk(tree)
    )


def test_the_run_status_check_sees_each_way_of_writing_it():
    source = (
        "Run.objects.filter(pk=1).update(status='x')\n"
        "Run.objects.filter(~Exists(q), pk=1).aupdate(status='x')\n"
        "rows.update(Run, 1, changes)\n"
        "Run(status='x').save()\n"
        "Run.objects.filter(pk=1, status='x').update(owner='p')\n"
        "Request.objects.filter(pk=1).update(status='x')\n"
    )
    assert run_status_writes(ast.parse(source)) == [1, 2, 3, 4]


# The one module that changes a request's status: the door (open -> answered, declined, cancelled, expired).
REQUEST_STATUS_WRITER = "approvals.review.decisions"


def request_status_writes(tree):
    """The lines of ``tree`` that update ``Request.status``: a ``Request.objects`` chain's update with
    ``status=`` or with ``**changes`` (which may hold it), and any ``rows.update(Request, ...)``."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        keywords = [keyword.arg for keyword in node.keywords]
        if (
            node.func.attr in {"update", "aupdate"}
            and _names(node.func.value)[:2] == ["Request", "objects"]
            and ("status" in keywords or None in keywords)
        ):
            found.append(node.lineno)
        elif node.func.attr == "update" and _names(node.func.value) == ["rows"]:
            if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "Request":
                found.append(node.lineno)
    return sorted(found)


def test_only_the_door_changes_a_requests_status():
    writers = {name for name, tree in app_modules().items() if request_status_writes(tree)}
    assert writers == {REQUEST_STATUS_WRITER}


def test_the_request_status_check_sees_each_way_of_writing_it():
    source = (
        "Request.objects.filter(pk=1, status='open').update(status='x')\n"
        "await Request.objects.filter(pk=1).aupdate(**answered)\n"
        "rows.update(Request, 1, changes)\n"
        "Request.objects.filter(pk=1).update(claimed_by=None)\n"
        "Run.objects.filter(pk=1).update(status='x')\n"
    )
    assert request_status_writes(ast.parse(source)) == [1, 2, 3]


def async_twins(tree):
    """``(twin, sync function, the function defined last before it)`` for each ``aX = database_sync_to_async(X)``."""
    found, last_function = [], None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            last_function = node.name
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and _names(node.value.func) == ["database_sync_to_async"]
        ):
            found.append((node.targets[0].id, node.value.args[0].id, last_function))
    return found


def test_async_twins_are_defined_once_beside_their_function():
    """Django's convention (authenticate / aauthenticate): ``aX`` wraps ``X`` once, right after it, in X's
    module; entry points call the twin and never wrap a function themselves."""
    misplaced, defined, wrapping = [], {}, []
    for name, tree in app_modules().items():
        for twin, function, before in async_twins(tree):
            if not (twin == f"a{function}" or twin.startswith(f"a{function}_")) or before != function:
                misplaced.append(f"{name}.{twin}")
            defined.setdefault(twin, []).append(name)
        if name.startswith("approvals.web"):
            wrapping += [
                f"{name}:{node.lineno}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Name) and node.id in {"database_sync_to_async", "sync_to_async"}
            ]
    assert misplaced == []
    assert {twin: modules for twin, modules in defined.items() if len(modules) > 1} == {}
    assert wrapping == []


def test_one_viewer_of_and_one_iso_time():
    definitions = {"viewer_of": [], "iso_time": []}
    for name, tree in app_modules().items():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in definitions:
                definitions[node.name].append(name)
    assert definitions == {"viewer_of": ["approvals.team.policies"], "iso_time": ["approvals.moments"]}
    # ...and no module writes a wire time by hand. Not counted: demo_tools is tool code, written as any
    # host's would be, and the audit export shows each event's time as its hash covers it.
    by_hand = [
        f"{name}:{node.lineno}"
        for name, tree in app_modules().items()
        if name not in {"approvals.moments", "approvals.demo_tools", "approvals.audit.pages"}
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and _names(node.func)[-1:] == ["replace"]
        and [getattr(arg, "value", None) for arg in node.args] == ["+00:00", "Z"]
    ]
    assert by_hand == []


# The §10 words a refused or unresolved tool call returns (review/outcomes.py says what a refusal means).
SECTION_10_RESULTS = ("declined/expired: ", "unresolved: ")


def tool_results_by_hand(modules):
    """The f-strings that write a §10 tool result (``f"declined/expired: {prompt}"``) outside review.outcomes."""
    return sorted(
        f"{name}:{node.lineno}"
        for name, tree in modules.items()
        if name != "approvals.review.outcomes"
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        and any(
            isinstance(part, ast.Constant) and str(part.value).startswith(SECTION_10_RESULTS) for part in node.values
        )
    )


def test_a_refusal_means_what_outcomes_says():
    assert tool_results_by_hand(app_modules()) == []


def test_the_refusal_check_sees_a_result_by_hand():
    modules = {
        "approvals.runs.x": ast.parse(
            'a = f"declined/expired: {p}"\nb = f"unresolved: {p}"\nc = "declined/expired: x"\n'
        ),
        "approvals.review.outcomes": ast.parse('a = f"declined/expired: {p}"\n'),
    }
    assert tool_results_by_hand(modules) == ["approvals.runs.x:1", "approvals.runs.x:2"]


def test_one_way_to_write_a_time_for_people():
    """Pages, messages and decisions write a time as ``moments.readable_time`` does ("20:14 UTC"): no other
    module formats a clock (``%H:%M``) or asks for the server's local time."""
    definitions = [
        name
        for name, tree in app_modules().items()
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name == "readable_time"
    ]
    assert definitions == ["approvals.moments"]
    by_hand = sorted(
        name
        for name, path in ((module_name(path), path) for path in APP.rglob("*.py") if "migrations" not in path.parts)
        if name != "approvals.moments" and ("%H:%M" in path.read_text() or "localtime(" in path.read_text())
    )
    assert by_hand == []


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


# -- test modules share through conftest.py and tests/support/, never through each other -------------


def _is_ours(module):
    """A module of the test tree: ``tests`` and below, or a top-level ``test_*`` module."""
    top = module.split(".")[0]
    return top == "tests" or top.startswith("test_")


def imports_of_test_modules(name, tree):
    """Every import in ``tree`` of a ``test_*`` module, or of a ``test_*`` name from one of the test tree's
    modules: a fixture or helper reached that way ties one test module to another's insides, and a test
    function imported with it is collected twice."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names if _is_ours(alias.name)]
        elif isinstance(node, ast.ImportFrom) and (node.level or _is_ours(node.module)):
            source = "." * node.level + (node.module or "")
            joiner = "." if node.module else ""
            modules = [source] if _names_a_test_module(source) else [f"{source}{joiner}{a.name}" for a in node.names]
        else:
            continue
        found += [f"{name}:{node.lineno} imports {module}" for module in modules if _names_a_test_module(module)]
    return found


def _names_a_test_module(module):
    return any(part.startswith("test_") for part in module.split("."))


def test_no_test_module_imports_another():
    """A fixture two test modules share is in a conftest.py, a plain helper in tests/support/."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        found += imports_of_test_modules(str(path.relative_to(TESTS)), ast.parse(path.read_text(), str(path)))
    assert found == [], "\n".join(found)


def test_the_test_import_check_sees_each_form():
    source = (
        "from .test_dashboard import EVENT_TIMEOUT_MS\n"
        "from . import test_request_kinds as kinds\n"
        "from tests.web.test_api import api\n"
        "import tests.e2e.test_inbox_keyboard\n"
        "from tests.web import test_api\n"
        "from ..review.test_forms import test_a_form\n"
        "import test_api\n"
        "from .conftest import PHONE\n"
        "from tests.support.console_page import pick\n"
        "from django.test import AsyncClient\n"
        "from tests.support import api_client\n"
    )
    assert [line.split(" ", 1)[0] for line in imports_of_test_modules("m", ast.parse(source))] == [
        "m:1",
        "m:2",
        "m:3",
        "m:4",
        "m:5",
        "m:6",
        "m:7",
    ]
