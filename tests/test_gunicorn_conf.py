"""gunicorn.conf.py: the measured layout (cores + 1 processes × 2 threads, gunicorn's gthread
worker), and the usual environment overrides, as gunicorn itself reads them (``--print-config``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def _config(**env: str) -> dict[str, str]:
    ours = ("WEB_CONCURRENCY", "GUNICORN_THREADS", "GUNICORN_CMD_ARGS")
    environment = {k: v for k, v in os.environ.items() if k not in ours}
    out = subprocess.run([GUNICORN, "--print-config"], cwd=ROOT, env={**environment, **env}, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    pairs = (line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs}


def test_the_default_layout_is_one_process_per_core_plus_one_with_two_threads() -> None:
    config = _config()
    assert config["worker_class"] == "gthread"
    assert (int(config["workers"]), int(config["threads"])) == ((os.cpu_count() or 1) + 1, 2)
    assert config["wsgi_app"] == "config.wsgi:application" and int(config["keepalive"]) == 30


def test_the_environment_overrides_the_layout() -> None:
    config = _config(WEB_CONCURRENCY="5", GUNICORN_THREADS="4")
    assert (config["workers"], config["threads"]) == ("5", "4")
    assert _config(GUNICORN_CMD_ARGS="--threads 7")["threads"] == "7"


def _freeze_in_a_fresh_process(**env: str) -> str:
    code = (
        "import django, gc, sys; django.setup(); "
        "from config.heap import load_and_freeze; n = load_and_freeze(); "
        "print(n, gc.get_freeze_count(), 'annotation.rater.views' in sys.modules, 'calibration.reports' in sys.modules)"
    )
    environment = {k: v for k, v in os.environ.items() if k != "ARBITER_GC_FREEZE"}
    environment.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**environment, **env}, capture_output=True,
                          text=True, timeout=120, check=True).stdout.split()


def test_a_worker_loads_its_views_and_freezes_that_heap() -> None:
    frozen, count, views, reports = _freeze_in_a_fresh_process()
    # Every view module (the reports' plotting included) is imported before the freeze, and the
    # frozen generation holds the start-up heap (well over 100,000 objects: Django, numpy, scipy).
    assert views == reports == "True"
    assert int(frozen) == int(count) > 100_000


def test_the_freeze_can_be_turned_off() -> None:
    frozen, count, _views, _reports = _freeze_in_a_fresh_process(ARBITER_GC_FREEZE="0")
    assert frozen == count == "0"
    with pytest.raises(subprocess.CalledProcessError) as refused:
        _freeze_in_a_fresh_process(ARBITER_GC_FREEZE="maybe")
    assert "ARBITER_GC_FREEZE must be a boolean" in refused.value.stderr


def test_gunicorn_runs_the_freeze_after_loading_a_worker() -> None:
    namespace: dict[str, object] = {}
    exec((ROOT / "gunicorn.conf.py").read_text(), namespace)
    hook = namespace["post_worker_init"]
    assert callable(hook) and "load_and_freeze" in hook.__code__.co_names
