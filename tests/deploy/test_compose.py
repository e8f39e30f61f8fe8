"""compose.yaml and the Dockerfile, checked structurally (issue 28 item 6).

Docker is not installed on the project's machines, so ``docker compose config`` is not run here;
this loads the file as Compose would (YAML with anchors and merge keys) and holds it to the
deployment docs/deploy.md describes: every service of the cluster, health checks, the web nodes
and workers on one environment, the same variables as deploy/cluster/cluster.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy.cluster.cluster import Cluster

pytestmark = pytest.mark.same_on_any_database  # its processes get the containers' environment, never the run's

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
APP = ("web1", "web2", "worker", "beat")


def test_every_part_of_the_cluster_is_a_service_with_a_health_check() -> None:
    assert {"lb", "web1", "web2", "worker", "beat", "postgres", "pgbouncer", "redis", "s3", "migrate", "bucket"} <= set(SERVICES)
    for name, service in SERVICES.items():
        if service.get("restart") == "no":  # one-shot: migrate, bucket
            continue
        assert service["healthcheck"]["test"], name
        assert service["healthcheck"]["test"][0] in ("CMD", "CMD-SHELL"), name
    assert "/healthz" in " ".join(SERVICES["web1"]["healthcheck"]["test"])


def test_the_nodes_share_one_environment_with_the_clusters_variables() -> None:
    envs = [SERVICES[name]["environment"] for name in APP]
    assert all(env == envs[0] for env in envs)
    env = envs[0]
    cluster = Cluster(run_dir=Path("/nonexistent"), s3=True, ports={"pgbouncer": 1, "s3": 2, "lb": 3}).env()
    shared = {k for k in cluster if k.startswith(("DJANGO_SECRET_KEY", "DATABASE_", "CELERY_", "CACHE_", "AWS_", "ARBITER_MEDIA"))}
    assert shared <= set(env), shared - set(env)
    assert env["DATABASE_POOLER"] == "pgbouncer" and ":6432/" in env["DATABASE_URL"]
    assert env["ARBITER_MEDIA_STORAGE"] == "s3" and env["AWS_S3_ENDPOINT_URL"].startswith("http://s3:")


def test_migrations_go_straight_to_postgresql_before_the_nodes_start() -> None:
    migrate = SERVICES["migrate"]
    assert migrate["entrypoint"][-2:] == ["migrate", "--noinput"]
    assert "@postgres:5432/" in migrate["environment"]["DATABASE_URL"]
    for name in APP:
        assert SERVICES[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert SERVICES[name]["depends_on"]["pgbouncer"]["condition"] == "service_healthy"


def test_the_load_balancer_checks_both_web_nodes() -> None:
    config = (ROOT / "deploy" / "compose" / "haproxy.cfg").read_text()
    assert re.search(r"server web1 web1:8000 check", config) and re.search(r"server web2 web2:8000 check", config)
    assert "uri /healthz" in config
    assert "pool_mode = transaction" in (ROOT / "deploy" / "compose" / "pgbouncer.ini").read_text()


def test_the_image_is_multi_stage_non_root_with_static_files_and_gunicorn() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert len(re.findall(r"^FROM ", dockerfile, re.M)) >= 3
    assert "collectstatic --noinput" in dockerfile
    users = re.findall(r"^USER (\S+)", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0")
    assert re.search(r'^ENTRYPOINT \["gunicorn", "-c", "gunicorn.conf.py"', dockerfile, re.M)


# -- the environment each container gets, loaded by the production settings -----------------------

# What the settings load prints: the values a broken environment would get wrong.
LOAD = """
import json, django
django.setup()
from django.conf import settings
from django.core import checks
from django.test import RequestFactory
from annotation.client_address import client_address
errors = [str(m) for m in checks.run_checks() if m.level >= checks.ERROR]
request = RequestFactory().get("/", REMOTE_ADDR="172.18.0.9", HTTP_X_FORWARDED_FOR="198.51.100.7, 203.0.113.5")
print(json.dumps({
    "settings": settings.SETTINGS_MODULE, "debug": settings.DEBUG, "errors": errors,
    "database": settings.DATABASES["default"]["ENGINE"], "host": settings.DATABASES["default"]["HOST"],
    "server_side_cursors": not settings.DATABASES["default"].get("DISABLE_SERVER_SIDE_CURSORS", False),
    "media": settings.STORAGES["default"]["BACKEND"], "bucket": settings.AWS_STORAGE_BUCKET_NAME,
    "cache": settings.CACHES["default"]["BACKEND"], "broker": settings.CELERY_BROKER_URL,
    "client": client_address(request),
}))
"""


def dockerfile_env() -> dict[str, str]:
    """The runtime stage's ENV lines (the last FROM), as Docker sets them in the container."""
    runtime = re.split(r"^FROM ", (ROOT / "Dockerfile").read_text(), flags=re.M)[-1]
    env: dict[str, str] = {}
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", runtime, re.M):
        for key, value in re.findall(r"(\w+)=(\S*)", block.replace("\\\n", " ")):
            env[key] = value
    return env


def service_env(name: str) -> dict[str, str]:
    """A service's environment as Compose builds it: env_file entries, then ``environment`` (a
    mapping, anchors and merge keys already resolved by the YAML loader, or a list of KEY=VALUE)."""
    service = SERVICES[name]
    env: dict[str, str] = {}
    files = service.get("env_file", [])
    for entry in [files] if isinstance(files, str | dict) else files:
        path = entry["path"] if isinstance(entry, dict) else entry
        for line in (ROOT / path).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#") and "=" in line:
                key, value = line.split("=", 1)
                env[key.strip()] = value.strip()
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) if "=" in item else (item, None) for item in environment)
    for key, value in environment.items():
        # Compose takes strings and numbers; a boolean is an error there, null means "from the shell".
        assert not isinstance(value, bool), f"{name}: {key} is a YAML boolean, which Compose refuses; quote it"
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    return env


@pytest.mark.parametrize("name", [*APP, "migrate"])
def test_each_services_environment_loads_the_production_settings(name: str) -> None:
    """The container's environment exactly (the image's ENV, then the service's), nothing of ours
    but PATH to find this checkout's Python: the settings load, the system checks pass, and the
    client address behind the load balancer is the client's (one proxy hop)."""
    env = {**dockerfile_env(), **service_env(name), "PATH": os.environ["PATH"]}
    assert env["DJANGO_SETTINGS_MODULE"] == "config.settings.production"
    done = subprocess.run([sys.executable, "-c", LOAD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["settings"] == "config.settings.production" and loaded["debug"] is False
    assert loaded["errors"] == []
    assert loaded["database"] == "config.db.postgresql"
    # The nodes through PgBouncer (no server-side cursors there); migrations straight to PostgreSQL.
    assert (loaded["host"], loaded["server_side_cursors"]) == (("postgres", True) if name == "migrate" else ("pgbouncer", False))
    assert loaded["media"] == "annotation.media_s3.PrivateS3Storage" and loaded["bucket"] == "arbiter-media"
    assert loaded["cache"] == "django.core.cache.backends.redis.RedisCache" and loaded["broker"].startswith("redis://redis:")
    assert loaded["client"] == "203.0.113.5"  # what HAProxy appended, not the client's own claim


def test_no_variable_in_compose_is_one_the_code_does_not_read() -> None:
    """Every variable the app services set is read somewhere in the project (a documented but unread
    setting, as DATABASE_DIRECT_URL was, misleads whoever deploys)."""
    sources = "\n".join(path.read_text() for folder in ("config", "annotation", "judges")
                        for path in (ROOT / folder).rglob("*.py")) + (ROOT / "gunicorn.conf.py").read_text()
    django_own = {"DJANGO_SETTINGS_MODULE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}  # read by Django, boto3
    unread = [key for name in [*APP, "migrate"] for key in service_env(name)
              if key not in django_own and f'"{key}"' not in sources]
    assert unread == []


def test_a_proxy_count_in_trusted_proxies_is_refused_naming_the_hop_setting() -> None:
    """What compose.yaml had: the nodes must refuse it in one line that says where a count goes."""
    env = {**dockerfile_env(), **service_env("web1"), "PATH": os.environ["PATH"]}
    env.pop("ARBITER_PROXY_HOPS", None)
    env["ARBITER_TRUSTED_PROXIES"] = "1"
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "ARBITER_TRUSTED_PROXIES: '1' is not an address or a network" in last and "ARBITER_PROXY_HOPS" in last
