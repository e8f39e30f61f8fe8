"""What a process loads at start-up: the scientific stack and the judges' HTTP client only where used.

Each check runs in a fresh interpreter (this process has long since imported everything). The
report and analysis code paths import NumPy, SciPy, pandas, statsmodels and matplotlib when they
run; the URL configuration, the models, the rater's views and the task modules must not, or every
command and every web and worker process pays for them (benchmarks/bench_startup.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCIENTIFIC = ("numpy", "scipy", "pandas", "statsmodels", "matplotlib", "sklearn")
HTTP_CLIENT = ("httpx", "httpcore")


def loaded_after(code: str) -> list[str]:
    """The heavy top-level packages in ``sys.modules`` after ``django.setup()`` and ``code``."""
    script = (
        "import json, sys, django\n"
        "django.setup()\n"
        f"{code}\n"
        f"print(json.dumps([name for name in {SCIENTIFIC + HTTP_CLIENT!r} if name in sys.modules]))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("", [], id="django.setup"),
        pytest.param("from django.urls import get_resolver; get_resolver().url_patterns", [], id="config.urls"),
        pytest.param("import annotation.rater.views, annotation.rater.api", [], id="rater-views"),
        pytest.param("from django.urls import resolve; resolve('/t/token/vote/'); resolve('/s/token/')", [], id="rater-urls"),
        # The judges' tasks send judge calls: their HTTP client is theirs to load.
        pytest.param("import judges.tasks, judges.batch_tasks, ranking.tasks", list(HTTP_CLIENT), id="tasks"),
    ],
)
def test_start_up_does_not_load_the_scientific_stack(code: str, expected: list[str]) -> None:
    assert loaded_after(code) == expected


def test_a_report_still_loads_it_when_it_runs() -> None:
    """The counter-check: the same probe sees the stack once a report's code path runs."""
    loaded = loaded_after("from calibration.reports import agreement_figures; import calibration.agreement_plots")
    assert {"numpy", "matplotlib"} <= set(loaded)
