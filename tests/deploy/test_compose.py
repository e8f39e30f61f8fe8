"""compose.yaml and the Dockerfile, checked structurally (issue 28 item 6).

Docker is not installed on the project's machines, so ``docker compose config`` is not run here;
this loads the file as Compose would (YAML with anchors and merge keys) and holds it to the
deployment docs/deploy.md describes: every service of the cluster, health checks, the web nodes
and workers on one environment, the same variables as deploy/cluster/cluster.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from deploy.cluster.cluster import Cluster

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
