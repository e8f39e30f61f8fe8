"""A pytest-xdist scheduler that keeps a module's tests together when they share a fixture.

``--dist load`` (xdist's default) hands tests out in chunks of consecutive tests, so a module whose
tests share a module-scoped fixture (the report pages' demo, a server started once, the renderer)
is often split between the two workers and sets that fixture up twice. ``--dist loadgroup`` would
keep them together through ``xdist_group`` markers, but pytest-xdist 3.8 marks a group by renaming
the test's node id, which pytest 9.2 no longer lets it do (the marker is silently ignored). This
scheduler, used for ``--dist loadgroup`` (.ci/run), groups by module instead: a module that itself,
or a conftest.py beside it or above it, defines a fixture of module, class or package scope is one
unit of work; every other test is a unit of its own. Units go out one at a time as a worker runs
low, the larger ones first (xdist's LoadScopeScheduling), so the run ends on single tests on both
workers rather than on a chunk queued behind one of them.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

_SHARED_SCOPES = frozenset({"module", "class", "package"})


def _defines_a_shared_fixture(path: Path) -> bool:
    """Whether the Python file defines a ``@pytest.fixture(scope=...)`` of a scope wider than a test."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return False
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for decorator in node.decorator_list:
            if isinstance(decorator, ast.Call):
                for keyword in decorator.keywords:
                    if (
                        keyword.arg == "scope"
                        and isinstance(keyword.value, ast.Constant)
                        and keyword.value.value in _SHARED_SCOPES
                    ):
                        return True
    return False


class ModuleFixtureScheduling(LoadScopeScheduling):
    """LoadScopeScheduling with a module as the unit only where the module shares a fixture."""

    def __init__(self, config: pytest.Config, log: object = None) -> None:
        super().__init__(config, log)  # type: ignore[arg-type]
        self._root = config.rootpath

    @cache  # noqa: B019  # one scheduler per run
    def _groups_module(self, module: str) -> bool:
        path = self._root / module
        if _defines_a_shared_fixture(path):
            return True
        for folder in path.parents:
            if folder == self._root or self._root not in folder.parents:
                break
            if _defines_a_shared_fixture(folder / "conftest.py"):
                return True
        return False

    def _split_scope(self, nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return module if self._groups_module(module) else nodeid
