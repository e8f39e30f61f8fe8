"""A bucket that hangs, rather than refuses, under rater load (issue 37 item 7; docs/deploy.md,
"Losing a node").

A real gunicorn node (2 processes × 2 threads, as each node of the loopback cluster) reads its
images from a real S3 server on loopback (moto's, tests/s3_server.py). 40 closed-loop raters
(``deploy/cluster/failover.py``: the browser's flow, an answer or image sent again after a 502/503)
and one client asking the trial API every 0.2 s run for 30 s; a third of the way in the S3 server
is SIGSTOPped for 10 s: it still accepts connections (the kernel does) and answers nothing. Before
the fix every image request waited ``ARBITER_S3_TIMEOUT`` × attempts (10 s), held every thread, and
the trial API and answers queued behind them.

Holds: during the stall the trial API and the answers keep a p95 under 1 s, every image request
that began in it ended within 2 s (a 503 with ``Retry-After``, or the image), images are 200 again
after it, and no acknowledged answer is lost or doubled. Images are asked once each, as a
browser's ``<img>`` does; the raters answer on.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from deploy.cluster.failover import check_votes, run_load
from tests.test_two_nodes import node_env, start_nodes, stop_nodes

# "cluster": timed under load, so CI runs it in the failure-test step, alone (.ci/run).
pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.cluster, pytest.mark.django_db(transaction=True)]

RATERS = 40
SECONDS = 30.0
STALL_AT = 10.0
STALL_SECONDS = 10.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("nan")


def test_a_stalled_bucket_keeps_the_trial_api_and_answers_fast_and_images_answer_503(
        s3_media, s3_server, settings) -> None:  # type: ignore[no-untyped-def]
    from django.db import connection

    from benchmarks.bench_raters import build_study
    from tests.s3_server import CREDENTIALS, REGION

    link, _ = build_study(pages=40, blocks=4, block_size=30, raters_per_block=RATERS + int(SECONDS))
    connection.close()
    env = node_env(
        WEB_CONCURRENCY="2", GUNICORN_THREADS="2",
        ARBITER_MEDIA_STORAGE="s3", AWS_STORAGE_BUCKET_NAME=s3_media, AWS_S3_ENDPOINT_URL=s3_server.endpoint,
        AWS_S3_REGION_NAME=REGION, AWS_ACCESS_KEY_ID=CREDENTIALS["aws_access_key_id"],
        AWS_SECRET_ACCESS_KEY=CREDENTIALS["aws_secret_access_key"],
        # The defaults a deployment gets (the conftest's S3 fixture shortens them for this process).
        ARBITER_S3_TIMEOUT="5", ARBITER_S3_ATTEMPTS="2",
    )
    [(node, url)] = start_nodes(1, env)
    stall: dict[str, float] = {}
    api: list[tuple[float, float, int]] = []  # (start, seconds, status) of each trial API request
    done = threading.Event()

    def stall_the_bucket() -> None:
        stall["start"] = time.perf_counter()
        s3_server.pause()
        time.sleep(STALL_SECONDS)
        s3_server.resume()
        stall["end"] = time.perf_counter()

    def ask_the_trial_api() -> None:
        with httpx.Client(base_url=url, timeout=30, follow_redirects=True) as probe:
            probe.get(f"/s/{link}/", params={"participant": "trial-api-probe"})
            while not done.is_set():
                began = time.perf_counter()
                try:
                    status = probe.get(f"/api/rater/{link}/trial/").status_code
                except httpx.HTTPError:
                    status = 0
                api.append((began, time.perf_counter() - began, status))
                time.sleep(0.2)

    prober = threading.Thread(target=ask_the_trial_api)
    try:
        prober.start()
        stats, timeline, _ = run_load(url, link, raters=RATERS, seconds=SECONDS, ramp=3.0,
                                      fault=(STALL_AT, stall_the_bucket), label="stall", image_resends=0)
        done.set()
        prober.join(timeout=60)
        after = httpx.get(url + "/healthz", timeout=10).status_code
    finally:
        done.set()
        s3_server.resume()
        stop_nodes([(node, url)])

    start, end = stall["start"] - timeline.began, stall["end"] - timeline.began
    during = [e for e in timeline.events if start <= e[0] < end]
    votes = [e[1] - e[0] for e in during if e[2] == "vote"]
    images = [e for e in during if e[2] == "image"]
    trial_api = [(s, status) for began, s, status in api if stall["start"] <= began < stall["end"]]
    late_images = [e for e in timeline.events if e[2] == "image" and e[0] >= end + 2.0]
    before = [e[1] - e[0] for e in timeline.events if e[2] == "vote" and 3.0 <= e[0] < start]
    figures = {
        "vote_p95_before_s": round(p95(before), 3),
        "votes_in_stall": len(votes), "vote_p95_s": round(p95(votes), 3),
        "trial_api_in_stall": len(trial_api), "trial_api_p95_s": round(p95([s for s, _ in trial_api]), 3),
        "images_in_stall": len(images), "image_refused": sum(1 for e in images if not e[3]),
        "image_p95_s": round(p95([e[1] - e[0] for e in images]), 3),
        "image_max_s": round(max((e[1] - e[0] for e in images), default=0.0), 3),
        "images_after": len(late_images), "images_after_ok": sum(1 for e in late_images if e[3]),
    }
    print(f"\nstalled bucket: {figures}")
    assert votes and trial_api and images, figures  # the load and the probe ran through the stall
    assert {status for _, status in trial_api} == {200}, trial_api
    assert figures["trial_api_p95_s"] < 1.0 and figures["vote_p95_s"] < 1.0, figures
    assert figures["image_refused"] > 0, figures  # the stall was felt: images answered 503
    assert figures["image_max_s"] < 2.0, figures
    assert late_images and figures["images_after_ok"] == len(late_images), figures  # and it cleared
    assert after == 200
    result = check_votes(stats)
    assert result["lost"] == 0 and result["duplicated"] == 0, result
