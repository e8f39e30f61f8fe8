"""A pytest plugin that counts Chromium launches (``annotation.render.chromium.launch``): per test
and in all, printed with the test output (docs/benchmarks.md, the CI-time row).

    PYTHONPATH=benchmarks .venv/bin/python -m pytest -q -p no:cacheprovider -p count_launches -s \\
        --durations=0 tests/annotation/test_new_study_html.py
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from annotation.render import chromium

_launch = chromium.launch
_count = [0]


def _counted(playwright: Any, marker: str) -> Any:
    _count[0] += 1
    return _launch(playwright, marker)


chromium.launch = _counted  # renderer.py calls it through the module, so every browser start is counted


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    before = _count[0]
    yield
    print(f"\nChromium launches {item.nodeid}: {_count[0] - before}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    print(f"\nChromium launches in all: {_count[0]}")
