"""``/livez`` and ``/healthz`` (config/health.py) and the node start-up checks (annotation/services/deployment.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from annotation.models import DeploymentCheck
from annotation.services import deployment
from annotation.services.deployment import node_startup_checks, secret_key_agreement, secret_key_value

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _fresh_migration_state():  # type: ignore[no-untyped-def]
    deployment._migrated.clear()
    yield
    deployment._migrated.clear()


def test_livez_answers_without_database_session_or_host_check(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SECURE_SSL_REDIRECT = True  # a load balancer probes over plain HTTP, by address
    # No django_db mark: a database query here would raise.
    response = Client(HTTP_HOST="10.0.0.7:8000").get("/livez")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store" and not response.cookies


@pytest.mark.django_db
def test_healthz_passes_every_check_and_reveals_nothing_of_a_study(settings) -> None:  # type: ignore[no-untyped-def]
    from tests.annotation.test_rater_flow import scheduled

    scheduled()
    settings.SECURE_SSL_REDIRECT = True
    response = Client(HTTP_HOST="10.0.0.7").get("/healthz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {"status": "ok", "checks": {"database": "ok", "migrations": "ok", "storage": "ok"}}
    assert not response.cookies


@pytest.mark.django_db
def test_healthz_is_503_when_the_media_storage_is_not_a_folder(settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    not_a_folder = tmp_path / "media-file"
    not_a_folder.write_text("x")
    settings.MEDIA_ROOT = not_a_folder
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "fail", "checks": {"database": "ok", "migrations": "ok", "storage": "fail"}}
    # A balancer that keeps a node in rotation while the storage is away asks for the others only.
    response = Client().get("/healthz", {"checks": "database,migrations"})
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "migrations": "ok"}


@pytest.mark.django_db
def test_healthz_is_503_while_a_migration_is_not_applied() -> None:
    latest = MigrationRecorder.Migration.objects.filter(app="annotation").order_by("-name").first()
    assert latest is not None
    latest.delete()  # as if this node's code were newer than the database (rolled back after the test)
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["migrations"] == "fail"


@pytest.mark.django_db
def test_healthz_refuses_an_unknown_check() -> None:
    response = Client().get("/healthz", {"checks": "database,studies"})
    assert response.status_code == 400
    assert "choose among database,migrations,storage" in response.json()["error"]


@pytest.mark.django_db
def test_a_node_with_another_secret_key_is_refused_in_one_line(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SECRET_KEY = "node-one-key-" + "x" * 40
    node_startup_checks()  # the first node stores its check value
    assert DeploymentCheck.objects.get(name="secret_key").value == secret_key_value()
    secret_key_agreement()  # the same key again: fine
    settings.SECRET_KEY = "node-two-key-" + "y" * 40
    with pytest.raises(ImproperlyConfigured) as refused:
        secret_key_agreement()
    assert "DJANGO_SECRET_KEY differs from the key the other nodes of this database use" in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.django_db
def test_a_rotated_secret_key_is_accepted_through_the_fallbacks(settings) -> None:  # type: ignore[no-untyped-def]
    settings.SECRET_KEY = "old-key-" + "o" * 40
    secret_key_agreement()
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "new-key-" + "n" * 40, ["old-key-" + "o" * 40]
    secret_key_agreement()
    assert DeploymentCheck.objects.get(name="secret_key").value == secret_key_value()


def test_an_unknown_media_storage_setting_is_one_line_at_start() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "ARBITER_MEDIA_STORAGE": "ftp"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "ARBITER_MEDIA_STORAGE must be 'local' or 's3', got 'ftp'" in done.stderr


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_gunicorn_node_with_another_secret_key_stops_with_one_line(settings) -> None:  # type: ignore[no-untyped-def]
    from tests.security.test_database_restart import _database_url

    secret_key_agreement()  # this node's key is the deployment's
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production", "DATABASE_URL": _database_url(),
           "DJANGO_SECRET_KEY": "a-different-key-" + "z" * 40}
    done = subprocess.run([sys.executable, "-c", "import config.wsgi"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("arbiter:")]
    assert "Traceback" not in done.stderr
    assert lines == ["arbiter: DJANGO_SECRET_KEY differs from the key the other nodes of this database use: give "
                     "every node the same key (or list the old one in SECRET_KEY_FALLBACKS while rotating)"]
    env["DJANGO_SECRET_KEY"] = settings.SECRET_KEY
    same = subprocess.run([sys.executable, "-c", "import config.wsgi"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert same.returncode == 0, same.stderr
