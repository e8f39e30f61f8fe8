"""What transaction pooling (PgBouncer, docs/deploy.md) rules out stays out of the code.

A session-level advisory lock (``pg_advisory_lock``, ``pg_try_advisory_lock`` and their
``_shared`` forms) stays with the server connection, which PgBouncer then hands to another
client; the transaction-level forms (``pg_advisory_xact_lock``) are the ones that pool. And
behind the pooler the settings turn off server-side cursors and the prepared hot path.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("annotation", "calibration", "config", "demo", "judges", "kind_reports", "ranking", "stats")
SESSION_LOCK = re.compile(r"pg_(try_)?advisory_(un)?lock(_shared)?\s*\(|pg_advisory_unlock_all", re.I)


def test_no_session_level_advisory_lock_in_the_code() -> None:
    found = [f"{path.relative_to(ROOT)}:{n}" for app in APPS for path in (ROOT / app).rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1) if SESSION_LOCK.search(line)]
    assert found == []
    assert SESSION_LOCK.search("SELECT pg_advisory_lock(1)") and not SESSION_LOCK.search("SELECT pg_advisory_xact_lock(1)")


def settings_with(**env: str) -> str:
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.DATABASES['default'].get('DISABLE_SERVER_SIDE_CURSORS', False))")
    environment = {"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "config.settings.local", **env}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)
    return (done.stdout.strip() or done.stderr.strip().splitlines()[-1])


def test_behind_pgbouncer_server_side_cursors_are_off() -> None:
    url = "postgres://postgres@127.0.0.1:6432/arbiter"
    assert settings_with(DATABASE_URL=url) == "False"
    assert settings_with(DATABASE_URL=url, DATABASE_POOLER="pgbouncer") == "True"
    assert settings_with(DATABASE_URL=url, DATABASE_POOLER="odyssey").endswith(
        "DATABASE_POOLER: 'odyssey' is not a known pooler (leave it empty or say pgbouncer)")
