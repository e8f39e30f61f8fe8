"""The import graph keeps the layering STYLE describes: apps stack, they do not circle.

Every ``import`` in the project's apps is read with ``ast`` (imports inside functions included, since
that is where a hidden cycle lives), resolved to a project module, and checked:

- no import cycle between project modules;
- no app imports an app above it (stats < rule_score < annotation < objective < judges < calibration < kind_reports <
  ranking < demo < config);
- the pure maths modules (``stats/``, ``rule_score/``, ``annotation.canonical`` and ``objective``'s) import no Django
  and no app services, and ``stats`` imports nothing of the project outside ``stats``.

The cycles and upward imports that exist today are listed in ``KNOWN_*`` below: a ratchet. A new
one fails the test; so does a listed one that has gone (remove it from the list, so the list only
shrinks). The restructuring issue empties both lists.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("stats", "rule_score", "annotation", "objective", "judges", "calibration", "kind_reports", "ranking", "demo", "config")
#: The Django-free maths: every module of the ``stats`` and ``rule_score`` packages (docs/protocol.md
#: "AesCode's rule score"), plus docs/protocol.md "Canonical answers" canonicalization.
PURE_MODULES = (
    *sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in ("stats", "rule_score")
        for path in (ROOT / package).rglob("*.py")
    ),
    "annotation.canonical",
    # docs/protocol.md "The objective protocol": any app (a study's services) may use them.
    "objective.blocks",
    "objective.score",
    "objective.aggregate",
)
# Pure modules may be used by any app (STYLE: "a pure maths module imports no app").
PURE_USES_ALLOWED = frozenset(PURE_MODULES)
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset({})
KNOWN_UPWARD: frozenset[tuple[str, str]] = frozenset()


def project_modules() -> dict[str, Path]:
    return dict(_project_modules())


@cache
def _project_modules() -> dict[str, Path]:
    """Listed once for the file: the slice tests ask for it once per module they read."""
    modules: dict[str, Path] = {}
    for app in LAYERS:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


@cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for the file (the tests walk it, never change it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*parts, base] if base else parts)
                # ``from pkg import module`` uses the module; ``from module import name`` the module.
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            else:
                continue
            for target in targets:
                resolved = resolve(target)
                if resolved and resolved != module:
                    edges[module].add(resolved)
    return edges


def strongly_connected(edges: dict[str, set[str]], nodes: list[str]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative; components of more than one module are cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_cycle_finder_finds_a_cycle_through_three_modules() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(edges, ["a", "b", "c", "d"]) == [frozenset({"a", "b", "c"})]


def test_no_new_import_cycle_between_project_modules() -> None:
    modules = project_modules()
    cycles = set(strongly_connected(import_graph(modules), sorted(modules)))
    assert not cycles - KNOWN_CYCLES, f"new import cycles: {[sorted(c) for c in cycles - KNOWN_CYCLES]}"
    assert not KNOWN_CYCLES - cycles, f"cycles gone, remove them from KNOWN_CYCLES: {KNOWN_CYCLES - cycles}"


def test_no_app_imports_an_app_above_it() -> None:
    rank = {app: i for i, app in enumerate(LAYERS)}
    upward = {
        (module, target)
        for module, targets in import_graph(project_modules()).items()
        for target in targets
        if rank[target.split(".")[0]] > rank[module.split(".")[0]] and target not in PURE_USES_ALLOWED
    }
    assert upward <= KNOWN_UPWARD, f"imports of a higher app: {sorted(upward - KNOWN_UPWARD)}"
    assert upward >= KNOWN_UPWARD, f"gone, remove from KNOWN_UPWARD: {sorted(KNOWN_UPWARD - upward)}"


def test_pure_maths_modules_import_no_django_and_no_app_code() -> None:
    modules = project_modules()
    edges = import_graph(modules)
    for name in PURE_MODULES:
        tree = _tree(modules[name])
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        } | {
            node.module.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
        }
        assert "django" not in imported and "rest_framework" not in imported, name
        impure = {target for target in edges.get(name, ()) if target not in PURE_USES_ALLOWED}
        assert not impure, f"{name} imports app code: {sorted(impure)}"


def test_stats_imports_no_app() -> None:
    """``stats`` is below every app: it imports only itself (and neither Django nor DRF, above)."""
    modules = project_modules()
    edges = import_graph(modules)
    outside = {
        (module, target)
        for module, targets in edges.items()
        if module.split(".")[0] == "stats"
        for target in targets
        if target.split(".")[0] != "stats"
    }
    assert not outside, f"stats imports app code: {sorted(outside)}"


# --- the rater slice (annotation/rater/, issue 41) ----------------------------------------------

SLICE = "annotation.rater"
#: What a participant's action view may call: the parse, the one flow call, the render and the
#: image pass (``forms.*`` and ``flow.*`` by module, the other two by name).
SLICE_VIEW_CALLS = frozenset({"screen_response", "image_pass_grant", "dict"})
SLICE_ACTION_VIEWS = ("study_link", "trial_vote", "trial_undo", "trial_revise", "trial_problem")
SLICE_FLOW_ACTIONS = ("show_trial", "answer_trial", "revise_trial", "undo_trial", "report_problem", "join")


def _functions(module: str) -> dict[str, ast.FunctionDef]:
    tree = _tree(project_modules()[module])
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def _called(function: ast.FunctionDef) -> list[str]:
    """What a function calls, as written: ``module.name`` or ``name``."""
    names = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
                names.append(f"{func.value.id}.{func.attr}")
            elif isinstance(func, ast.Name):
                names.append(func.id)
            else:
                names.append(ast.dump(func))
    return names


def test_the_slice_is_entered_through_the_rater_urls_only() -> None:
    """Outside ``annotation/rater/`` only the rater URL configuration imports the slice."""
    importers = {
        module
        for module, targets in import_graph(project_modules()).items()
        if not module.startswith(SLICE) and any(t == SLICE or t.startswith(f"{SLICE}.") for t in targets)
    }
    assert importers == {"annotation.urls.rater"}, sorted(importers)


def test_the_slice_has_its_public_entry_points() -> None:
    modules = project_modules()
    for name in ("forms", "screens", "flow", "images", "views", "api"):
        assert f"{SLICE}.{name}" in modules, name
    flow = _functions(f"{SLICE}.flow")
    assert set(SLICE_FLOW_ACTIONS) <= set(flow), sorted(set(SLICE_FLOW_ACTIONS) - set(flow))
    assert "next_trial" not in flow  # no alias: the next trial is chosen in one place (below)
    assert "trial_image_view" in _functions(f"{SLICE}.images")


def test_one_function_chooses_the_next_trial() -> None:
    """Issue 47: uniform or serve-time, every path asks ``next_trial_choose``; only it calls ``serve_next``
    (which fills a serve-time trial), and the vote and the trial read ask it rather than picking a trial."""
    callers = {}
    for module in project_modules():
        for name, function in _functions(module).items():
            if "serve_next" in _called(function):
                callers[f"{module}.{name}"] = function
    assert set(callers) == {"annotation.services.answers.next_trial_choose"}, sorted(callers)
    answers = _functions("annotation.services.answers")
    for asker in ("_vote_locked_steps", "trial_next"):
        assert "next_trial_choose" in _called(answers[asker]), asker


def test_an_action_view_parses_calls_one_flow_function_and_renders() -> None:
    views = _functions(f"{SLICE}.views")
    for name in SLICE_ACTION_VIEWS:
        called = _called(views[name])
        stray = [c for c in called if c not in SLICE_VIEW_CALLS and not c.startswith(("forms.", "flow."))]
        assert not stray, f"{name} calls {stray}"
        assert sum(c.startswith("flow.") for c in called) <= (2 if name == "study_link" else 1), name  # join or show
        assert any(c.startswith("forms.") for c in called) and "screen_response" in called, name


def test_the_pages_around_the_trials_go_through_the_flow_too() -> None:
    """Issue 47: the instructions, the pause page, the comprehension question, the break and the end
    comment call one flow function each and render its Screen, like the trial views."""
    views = _functions(f"{SLICE}.views")
    for name in ("instructions", "pause", "comprehension", "break_continue", "end_comment"):
        called = _called(views[name])
        stray = [c for c in called if c not in {*SLICE_VIEW_CALLS, "serving_origin"}
                 and not c.startswith(("forms.", "flow."))]
        assert not stray, f"{name} calls {stray}"
        assert sum(c.startswith("flow.") for c in called) == 1 and "screen_response" in called, name


def test_the_rater_api_calls_the_same_flow_functions() -> None:
    tree = _tree(project_modules()[f"{SLICE}.api"])
    methods = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)]
    used = {c for f in methods for c in _called(f) if c.startswith("flow.")}
    assert {"flow.show_trial", "flow.answer_trial", "flow.revise_trial", "flow.report_problem"} <= used, sorted(used)
