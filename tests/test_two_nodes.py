"""Two real gunicorn nodes on their own ports share one PostgreSQL database and one S3 bucket (moto's
server on loopback); one rater alternates between them on every request: the session, the image
pass, CSRF and the vote's idempotency key all work across nodes (docs/decisions/0049-several-web-nodes.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from annotation.models import Trial, Vote
from tests.annotation.test_rater_flow import scheduled
from tests.s3_server import CREDENTIALS, REGION, free_port
from tests.security.test_database_restart import _database_url

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
IMAGE_RE = re.compile(r'src="(/t/[^"]+\.png)"')
TOKEN_RE = re.compile(r'action="/t/([^/"]+)/vote/"')
KEY_RE = re.compile(r'name="idempotency_key" value="([^"]+)"')
AXIS_RE = re.compile(r'name="axis:([A-Z_]+)"')


def start_nodes(count: int, env: dict[str, str]) -> list[tuple[subprocess.Popen[bytes], str]]:
    nodes: list[tuple[subprocess.Popen[bytes], str]] = []
    for _ in range(count):
        port = free_port()
        process = subprocess.Popen([GUNICORN, "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{port}"],
                                   cwd=ROOT, env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        nodes.append((process, f"http://127.0.0.1:{port}"))
    for process, url in nodes:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "a gunicorn node exited during start-up"
            try:
                if httpx.get(url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{url} not ready within 60 s"
            time.sleep(0.3)
    return nodes


def stop_nodes(nodes: list[tuple[subprocess.Popen[bytes], str]]) -> None:
    for process, _ in nodes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def node_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test", "DATABASE_URL": _database_url(),
        "DJANGO_SECRET_KEY": settings.SECRET_KEY, "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "WEB_CONCURRENCY": "1", "GUNICORN_THREADS": "2", **extra,
    }


@pytest.fixture
def two_nodes(s3_media, s3_server) -> Iterator[list[str]]:  # type: ignore[no-untyped-def]
    env = node_env(
        ARBITER_MEDIA_STORAGE="s3", AWS_STORAGE_BUCKET_NAME=s3_media, AWS_S3_ENDPOINT_URL=s3_server.endpoint,
        AWS_S3_REGION_NAME=REGION, AWS_ACCESS_KEY_ID=CREDENTIALS["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=CREDENTIALS["aws_secret_access_key"],
    )
    nodes = start_nodes(2, env)
    try:
        yield [url for _, url in nodes]
    finally:
        stop_nodes(nodes)


def test_one_rater_alternating_between_two_nodes_keeps_session_image_pass_csrf_and_idempotency(two_nodes) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    a, b = two_nodes
    client = httpx.Client(timeout=10)  # one browser: one cookie jar, whatever node answers
    joined = client.get(f"{a}/s/{rs.study.link_token}/", params={"participant": "P-two-nodes"})
    assert joined.status_code == 302
    html = client.get(f"{b}/s/{rs.study.link_token}/").text  # the session made by A, read by B
    for answered in range(3):
        token, key = TOKEN_RE.search(html), KEY_RE.search(html)
        assert token and key, html[:400]
        images = list(dict.fromkeys(IMAGE_RE.findall(html)))
        assert images
        for i, url in enumerate(images):  # the image pass set by one node, honoured by the other
            node = (a, b)[(answered + i) % 2]
            response = client.get(node + url)
            assert response.status_code == 200 and response.content.startswith(b"\x89PNG"), (node, url)
        form = {"verdict": "A", "confidence": "4", "rationale": "", "idempotency_key": key.group(1),
                **{f"axis:{ax}": "1" for ax in dict.fromkeys(AXIS_RE.findall(html))}}
        voter, replayer = (a, b) if answered % 2 == 0 else (b, a)
        headers = {"X-CSRFToken": client.cookies["csrftoken"], "HX-Request": "true", "Referer": voter + "/"}
        first = client.post(f"{voter}/t/{token.group(1)}/vote/", data=form, headers=headers)
        assert first.status_code == 200, first.text[:300]
        headers["Referer"] = replayer + "/"
        again = client.post(f"{replayer}/t/{token.group(1)}/vote/", data=form, headers=headers)  # a double click
        assert again.status_code == 200, again.text[:300]
        assert Vote.objects.filter(trial__token=token.group(1)).count() == 1
        html = first.text
    # CSRF is checked on both nodes: without the token either refuses.
    assert client.post(f"{a}/t/{token.group(1)}/vote/", data=form).status_code == 403
    assert client.post(f"{b}/t/{token.group(1)}/vote/", data=form).status_code == 403
    assert Vote.objects.filter(trial__assignment__rater__external_id="P-two-nodes").count() == 3
    assert Trial.objects.filter(assignment__rater__external_id="P-two-nodes").count() >= 3


def test_metrics_add_up_every_gunicorn_process_in_multiprocess_mode(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    folder = tmp_path / "prometheus"
    folder.mkdir()
    nodes = start_nodes(1, node_env(WEB_CONCURRENCY="2", PROMETHEUS_MULTIPROC_DIR=str(folder),
                                    ARBITER_METRICS_ALLOW="127.0.0.0/8"))
    try:
        [(_, url)] = nodes
        for i in range(12):  # twelve browsers: new connections, spread over both processes
            with httpx.Client(timeout=10) as browser:
                assert browser.get(f"{url}/s/{rs.study.link_token}/", params={"participant": f"M{i}"}).status_code == 302
        exposed = httpx.get(f"{url}/metrics", timeout=10).text
        # One file per process that served (the balanced worker spreads new connections over both);
        # /metrics answers from one of them with the sum.
        serving = {path.stem.rsplit("_", 1)[-1] for path in folder.glob("histogram_*.db")}
        assert serving
    finally:
        stop_nodes(nodes)
    assert 'arbiter_rater_request_seconds_count{view="rater:link"} 12.0' in exposed
    assert 'arbiter_rater_responses_total{status="302",view="rater:link"} 12.0' in exposed


def test_fifty_raters_at_once_on_two_nodes_are_never_served_past_a_quota(two_nodes) -> None:  # type: ignore[no-untyped-def]
    """Issue 39 item 1 (docs/protocol.md "Serve-time choice"): 50 raters answer an adaptive study at
    once through both nodes' pages, each trial's comparison chosen as it is served; ten serve-time
    blocks of five places over 30 comparisons with a quota of 5: 250 asks for 150 places."""
    import threading
    from collections import Counter

    from annotation.models import Comparison
    from annotation.services.adaptive_allocation import study_allocation_set
    from annotation.services.serve_time import serve_block_create
    from tests.annotation.rater_factories import make_rater_study

    study = make_rater_study(slug="serve-nodes", pages=10, failed_render=False).study
    study_allocation_set(study=study, allocation="adaptive", target={"kind": "top_k", "k": 1})
    study.refresh_from_db()
    for position in range(1, 11):
        serve_block_create(study=study, position=position, size=5, target_raters=5, seed=position, repeats=1,
                           min_gap=2)
    a, b = two_nodes
    errors: list[str] = []
    answered: Counter[str] = Counter()
    barrier = threading.Barrier(50)

    def rate(i: int) -> None:
        client = httpx.Client(timeout=60)
        participant = f"crowd-{i}"
        try:
            barrier.wait()
            first = client.get(f"{(a, b)[i % 2]}/s/{study.link_token}/", params={"participant": participant})
            html = client.get(f"{(b, a)[i % 2]}/s/{study.link_token}/").text
            assert first.status_code == 302
            for step in range(20):
                token, key = TOKEN_RE.search(html), KEY_RE.search(html)
                if token is None:
                    break  # the end page
                node = (a, b)[(i + step) % 2]
                form = {"verdict": "B", "confidence": "3", "rationale": "", "idempotency_key": key.group(1),  # type: ignore[union-attr]
                        **{f"axis:{ax}": "-1" for ax in dict.fromkeys(AXIS_RE.findall(html))}}
                headers = {"X-CSRFToken": client.cookies["csrftoken"], "HX-Request": "true", "Referer": node + "/"}
                reply = client.post(f"{node}/t/{token.group(1)}/vote/", data=form, headers=headers)
                if reply.status_code != 200:
                    errors.append(f"{participant}: HTTP {reply.status_code}")
                    return
                answered[participant] += 1
                html = reply.text
        except Exception as exc:
            errors.append(f"{participant}: {type(exc).__name__}: {exc}")
        finally:
            client.close()

    threads = [threading.Thread(target=rate, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors[:5]
    assert len(answered) == 50  # every rater got a place and answered (none turned away as "full")
    main = Trial.objects.filter(assignment__block__study=study, is_repeat=False, attention_expected="")
    per_comparison = Counter(main.values_list("comparison_id", flat=True))
    assert None not in per_comparison  # nothing left open on a finished assignment
    assert max(per_comparison.values()) <= 5  # no quota passed
    assert dict(Comparison.objects.filter(study=study, served__gt=0).values_list("pk", "served")) == dict(per_comparison)
    assert 140 <= sum(per_comparison.values()) <= 150
    pairs = list(main.values_list("assignment_id", "comparison_id"))
    assert len(set(pairs)) == len(pairs)  # no comparison twice to a rater
    assert Vote.objects.filter(trial__assignment__block__study=study).count() == sum(answered.values())
