"""`make run` serves the demo with gunicorn (one process, four threads, no request timeout), and
the local settings give it the static files without `collectstatic`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.same_on_any_database  # `make -n`, and a gunicorn on its own SQLite file

ROOT = Path(__file__).resolve().parents[2]
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))


def test_make_run_starts_gunicorn_with_one_process_of_four_threads_and_no_timeout() -> None:
    out = subprocess.run(["make", "-n", "run", "PORT=8123"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    serve = next(line for line in out.splitlines() if "gunicorn" in line)
    assert "DJANGO_SETTINGS_MODULE=config.settings.local" in serve and "config.wsgi:application" in serve
    assert "--workers 1 --threads 4 --timeout 0" in serve and "-b 127.0.0.1:8123" in serve


def test_the_local_settings_serve_static_files_from_the_source_folders(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(DJANGO_SETTINGS_MODULE="config.settings.local", DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
               STATIC_ROOT=str(tmp_path / "static-not-collected"))
    server = subprocess.Popen([GUNICORN, "config.wsgi:application", "--workers", "1", "--threads", "4", "--timeout", "0",
                               "-b", f"127.0.0.1:{port}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/vendor/htmx.min.js", timeout=5) as r:
                    body, kind = r.read(), r.headers["Content-Type"]
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.3)
        assert b"htmx" in body and "javascript" in kind  # node_modules' htmx, never collected
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/annotation/trial.css", timeout=5) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/css")
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=15)


def test_make_run_installs_the_apps_packages_once_and_says_what_each_step_does() -> None:
    """Issue 40: a quieter, faster first run (no pip upgrade each time, no dev tools for `make run`,
    each demo study built only when missing, a line per step)."""
    def dry(target: str) -> str:
        return subprocess.run(["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=120,
                              check=True).stdout

    # The packages go in with uv (put into the venv by its pip), or with pip where uv cannot be
    # installed (docs/decisions/0087-setup-with-uv.md): both take the same arguments.
    installer = "uv pip install --quiet --python .venv/bin/python \"$@\""
    run = dry("run")
    assert "--upgrade pip" not in run and ".[dev]" not in run
    assert installer in run and "install -e '.[render]'" in run and "-m pip install --quiet \"$@\"" in run
    assert "chromium" in run  # the renderer of HTML uploads (issue 45)
    assert run.count("manage.py shell") == 1  # one Django start finds the demo studies that are missing
    for step in ("Python packages the app needs", "htmx and ECharts from the npm registry", "database migrations",
                 "demo study 'demo'", "calibration of the demo's judges"):
        assert f"==> {step}" in run or step in run
    test = dry("test")
    assert installer in test and "install -e '.[dev]'" in test and "--upgrade pip" not in test
    assert 'license = "Apache-2.0"' in (ROOT / "pyproject.toml").read_text()
