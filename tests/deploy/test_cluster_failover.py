"""Losing a node under load (issue 28 item 5), on the loopback cluster of deploy/cluster/cluster.py.

One cluster for the module (HAProxy, two gunicorn nodes, PgBouncer in transaction pooling, two
Celery worker nodes) in front of the test database. Each case runs ``ARBITER_FAILOVER_RATERS``
(50) closed-loop raters for ``ARBITER_FAILOVER_SECONDS`` (60) through the load balancer, with the
fault a third of the way in, and then holds the cluster to:

- every acknowledged vote is stored exactly once (``bench_raters.verify_votes``), no block has more
  live rater assignments than planned;
- no request failed for good: what failed was sent again (as the trial page does) and succeeded;
- every failure ended within 2 s of the fault (``recovered_after_s``).

The Celery case kills a whole worker node (master and children) in the middle of a 500-call
judge run on the provider emulator (tests/judges/fake_provider.py): with no operator command, the
cluster's one ``celery beat`` re-queues the dead node's calls once their lease runs out, and the
other node finishes the run; every call the dead node held ends within 2 × the lease.
The S3 case stalls the cluster's S3 server (moto, SIGSTOPped: it accepts and answers nothing) for
10 s; it runs unless ``ARBITER_CLUSTER_S3=0``. Rater load through a stall: tests/deploy/test_stalled_bucket.py.

Run (about 4 minutes):
DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_cluster CELERY_BROKER_URL=redis://127.0.0.1:6379/7 \\
    .venv/bin/python -m pytest -q -m cluster tests/deploy/test_cluster_failover.py
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.db.models import Sum

from deploy.cluster.cluster import Cluster, from_environment
from deploy.cluster.failover import check_votes, run_load

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.cluster]

RATERS = int(os.environ.get("ARBITER_FAILOVER_RATERS", "50"))
SECONDS = float(os.environ.get("ARBITER_FAILOVER_SECONDS", "60"))
FAULT_AT = SECONDS / 3
JUDGE_KEY = "sk-cluster-judge-0123456789"


@pytest.fixture(scope="module")
def cluster(django_db_setup: None, django_db_blocker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:  # type: ignore[no-untyped-def]
    run = tmp_path_factory.mktemp("cluster")
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    configured = from_environment(run)
    c = Cluster(run_dir=run, database=database, redis_url=django_settings.CELERY_BROKER_URL or configured.redis_url,
                s3=configured.s3, healthcheck=configured.healthcheck,
                extra_env={"MEDIA_ROOT": str(run / "media"), "ARBITER_CLUSTER_TEST_KEY": JUDGE_KEY})
    c.up(migrate=False)
    try:
        yield c
    finally:
        c.down()


def use_cluster_media(cluster: Cluster, settings, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """This process stores images where the nodes read them: the shared folder, or the cluster's bucket."""
    settings.MEDIA_ROOT = cluster.run_dir / "media"
    if cluster.s3:
        env = cluster.env()
        for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            monkeypatch.setenv(key, env[key])
        settings.ARBITER_MEDIA_STORAGE = "s3"
        settings.AWS_STORAGE_BUCKET_NAME = env["AWS_STORAGE_BUCKET_NAME"]
        settings.AWS_S3_ENDPOINT_URL = env["AWS_S3_ENDPOINT_URL"]
        settings.AWS_S3_REGION_NAME = env["AWS_S3_REGION_NAME"]
        settings.STORAGES = {**settings.STORAGES, "default": settings.STORAGES["media_s3"]}


@pytest.fixture
def study(cluster: Cluster, transactional_db: None, settings, monkeypatch: pytest.MonkeyPatch) -> str:  # type: ignore[no-untyped-def]
    """The rater study of bench_raters (40 pages, 4 blocks of 30 comparisons), its images where the nodes read them."""
    from benchmarks.bench_raters import build_study

    use_cluster_media(cluster, settings, monkeypatch)
    planned = max(20, RATERS // 4 + int(SECONDS))  # per block: every rater's first assignment and the re-joins
    link, _ = build_study(pages=40, blocks=4, block_size=30, raters_per_block=planned)
    connection.close()
    return link


def assert_no_vote_lost_or_doubled(stats, summary: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    votes = check_votes(stats)
    print(f"\n{summary}\nvotes {votes}, errors {dict(stats.errors)}")
    assert votes["lost"] == 0 and votes["duplicated"] == 0, votes
    assert votes["over_assigned_blocks"] == 0, votes
    assert votes["acknowledged"] > RATERS, votes  # the load ran
    assert sum(stats.errors.values()) == 0, dict(stats.errors)  # every failed request succeeded when sent again


def test_sigkill_of_one_web_node(cluster: Cluster, study: str) -> None:
    try:
        stats, timeline, at = run_load(cluster.lb_url, study, raters=RATERS, seconds=SECONDS,
                                       fault=(FAULT_AT, lambda: cluster.kill("web1")))
        summary = timeline.summary(at)
        assert_no_vote_lost_or_doubled(stats, summary)
        assert summary["recovered_after_s"] <= 2.0, summary
        # At most the requests in flight failed (one per rater) and their resends.
        assert summary["failed"] <= 2 * RATERS, summary
        assert summary["ok_after_fault"] > 5 * RATERS, summary  # the other node carried the study on
    finally:
        if not cluster.running().get("web1"):
            cluster.start_web(1)


def test_pgbouncer_restart(cluster: Cluster, study: str) -> None:
    stats, timeline, at = run_load(cluster.lb_url, study, raters=RATERS, seconds=SECONDS,
                                   fault=(FAULT_AT, cluster.restart_pgbouncer))
    summary = timeline.summary(at)
    assert_no_vote_lost_or_doubled(stats, summary)
    assert summary["recovered_after_s"] <= 2.0, summary
    assert summary["ok_after_fault"] > 5 * RATERS, summary


@pytest.mark.broker
def test_sigkill_of_one_worker_node_mid_judge_run(cluster: Cluster, transactional_db: None, settings,  # type: ignore[no-untyped-def]
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from judges.models import JudgeOutput
    from judges.services.calls import attempt_seconds
    from tests.judges.factories import make_example_study, make_judge
    from tests.judges.fake_provider import FakeProvider

    use_cluster_media(cluster, settings, monkeypatch)
    monkeypatch.setenv("ARBITER_CLUSTER_TEST_KEY", JUDGE_KEY)
    from config.celery_app import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("celery")
    provider = FakeProvider(delay=0.05, inspect=False).start()
    try:
        make_example_study(extra_pages=124)  # 125 comparisons of the "deployment" set x 2 orders x 2 repeats
        judge = make_judge(base_url=provider.url, api_key_env="ARBITER_CLUSTER_TEST_KEY", timeout_seconds=2.0,
                   concurrency=4, max_attempts=5)
        connection.close()
        call_command("run_judges", "example", "--judge", "judge-x", "--set", "deployment", "--repeats", "2",
                     stdout=StringIO())
        deadline = time.monotonic() + 60
        while len(provider.requests) < 150 and time.monotonic() < deadline:
            time.sleep(0.05)
        at_kill = len(provider.requests)
        cluster.kill("worker2")
        killed_at = time.monotonic()
        # No operator command from here: beat's sweep and worker node 1 alone.
        held = set(JudgeOutput.objects.filter(status="running").values_list("pk", flat=True))
        ended: dict[int, float] = {}
        deadline = killed_at + 180
        while time.monotonic() < deadline:
            unfinished = set(JudgeOutput.objects.filter(status__in=("pending", "running")).values_list("pk", flat=True))
            for pk in held - unfinished:
                ended.setdefault(pk, time.monotonic() - killed_at)
            if not unfinished:
                break
            time.sleep(0.25)
        run_ended = time.monotonic() - killed_at
        lease = attempt_seconds(judge)
        print(f"\nworker node 2 killed: {len(held)} calls running then, the last of them ended after "
              f"{max(ended.values(), default=0):.1f} s, the run after {run_ended:.1f} s (lease {lease:.0f} s)")
        assert held and set(ended) == held, held - set(ended)  # none of them left running or pending
        assert max(ended.values()) <= 2 * lease, sorted(ended.values())[-5:]
        rows = list(JudgeOutput.objects.values_list("comparison__external_id", "order", "repeat", "status"))
        assert len(rows) == 500 and len({r[:3] for r in rows}) == 500
        errors = set(JudgeOutput.objects.exclude(status="valid").values_list("status", "error")[:5])
        assert {r[3] for r in rows} == {"valid"}, errors  # none left running, none lost
        calls = JudgeOutput.objects.aggregate(n=Sum("calls"))["n"]
        retried = JudgeOutput.objects.aggregate(n=Sum("calls"))["n"] - len(rows)
        # Calls made = outputs stored + recorded retries; a call cut by the kill may have counted a
        # request it never sent (killed between the counting UPDATE and the send), at most one per
        # child of the killed node.
        assert len(provider.requests) <= calls <= len(provider.requests) + cluster.worker_concurrency, (calls, len(provider.requests))
        print(f"\njudge run: {len(rows)} outputs, {len(provider.requests)} requests received, {retried} retries "
              f"recorded, {at_kill} received when worker node 2 was killed")
        assert 150 <= at_kill < 500  # the kill came mid-run
        assert provider.problems == []
    finally:
        provider.stop()
        if not cluster.running().get("worker2"):
            cluster.start_worker(2)


@pytest.mark.skipif(not from_environment(Path("/nonexistent")).s3,
                    reason="the cluster runs on local media (ARBITER_CLUSTER_S3=0)")
def test_s3_stalled_for_10_seconds(cluster: Cluster, study: str, examples_dir: Path) -> None:
    import json
    import subprocess
    import sys

    import httpx

    from annotation.models import Study
    from benchmarks.bench_raters import IMAGE_RE
    from tests.conftest import ROOT

    bundle = examples_dir
    slug = json.loads((Path(bundle) / "bundle" / "study.json").read_text())["slug"]
    with httpx.Client(base_url=cluster.lb_url, follow_redirects=True, timeout=30) as client:
        page = client.get(f"/s/{study}/", params={"participant": "s3-probe"})
        images = IMAGE_RE.findall(page.text)
        assert images and client.get(images[0]).status_code == 200
        cluster.s3_stalled(True)
        try:
            began = time.monotonic()
            # Asked of a node itself: the application's own answer, not the load balancer's (with
            # /healthz checking storage, HAProxy takes both nodes out while the bucket is away).
            during, slowest = [], 0.0
            for url in images:
                asked = time.monotonic()
                during.append(httpx.get(cluster.node_url(1) + url, cookies=client.cookies, timeout=30).status_code)
                slowest = max(slowest, time.monotonic() - asked)
            # An import while the bucket hangs (its own storage timeout shortened; the stall lasts
            # until it has ended, 10 s at least).
            importing = subprocess.run([sys.executable, "manage.py", "import_study", str(Path(bundle) / "bundle")],
                                       cwd=ROOT, env={**cluster.env(), "ARBITER_S3_TIMEOUT": "2", "ARBITER_S3_ATTEMPTS": "1"},
                                       capture_output=True, text=True, timeout=120)
            time.sleep(max(0.0, 10 - (time.monotonic() - began)))
        finally:
            cluster.s3_stalled(False)
        after = [client.get(url).status_code for url in images]
    assert set(during) == {503}, during  # a clear "try again", not a 500
    assert slowest < 2.0, slowest  # answered promptly, not after ARBITER_S3_TIMEOUT x attempts
    assert set(after) == {200}, after
    assert importing.returncode != 0 and len(importing.stderr.strip().splitlines()) >= 1
    assert not Study.objects.filter(slug=slug).exists()  # the import failed whole
