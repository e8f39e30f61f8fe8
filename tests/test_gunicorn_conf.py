"""gunicorn.conf.py: the measured layout (cores + 1 processes × 2 threads, gunicorn's gthread
worker), and the usual environment overrides, as gunicorn itself reads them (``--print-config``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.same_on_any_database  # gunicorn --print-config

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
