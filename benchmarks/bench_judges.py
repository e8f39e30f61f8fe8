"""Benchmark of judge dispatch (docs/protocol.md "Judges and calibration"): 2,000 calls at concurrency 16
against a loopback judge.

The fake OpenAI-compatible server (tests/judges/fake_provider.py) runs in its own process and
answers every request after 200 ms, so the ideal throughput at concurrency 16 is 16 / 0.2 = 80
calls/s. Calls go through the real path — claim (conditional UPDATE), request building, limiter,
httpx, validation, conditional result write — run by ``judge_outputs_run_local`` with 16 threads
on a scratch SQLite database (or ``DATABASE_URL`` if set).

500 pages, each with its own reference and two candidate renderings (800 × 1040 px), one
comparison per page × 2 orders × 2 repeats = 2,000 calls. Two scenarios:
- ``as stored``: no image limits, the stored PNGs are sent (read + base64 + JSON);
- ``repair``: ``max_image_edge = 600``, every image is re-encoded as JPEG and downscaled (each
  distinct image once per process, then from the prepared-image cache).
Reported: calls per second against the ideal 80/s, and CPU time per call spent building the
request (image encoding included), measured with ``time.thread_time`` around the builder.

Run: .venv/bin/python benchmarks/bench_judges.py [--pages 500] [--repeats 2] [--scenarios as-stored,repair,batch]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCRATCH = Path(tempfile.mkdtemp(prefix="arbiter-bench-judges-"))
os.environ.setdefault("DATABASE_URL", f"sqlite:///{SCRATCH / 'db.sqlite3'}")
os.environ["MEDIA_ROOT"] = str(SCRATCH / "media")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
os.environ.pop("CELERY_BROKER_URL", None)
os.environ["BENCH_JUDGE_KEY"] = "sk-bench"

CONCURRENCY = 16
DELAY = 0.2


def serve(port_queue: multiprocessing.Queue, delay: float) -> None:  # type: ignore[type-arg]
    from tests.judges.fake_provider import FakeProvider

    server = FakeProvider(delay=delay, inspect=False).start()
    port_queue.put(server.url)
    threading.Event().wait()


_STRIPS: list = []


def page_png(seed: int, colour: tuple[int, int, int]) -> bytes:
    """A page-like 800 × 1040 rendering: a coloured header, 42 lines of text, a photo block.

    Text lines are drawn once and pasted in a per-page random order (fast setup, distinct pages).
    """
    import io
    import random

    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    if not _STRIPS:
        letters = "abcdefghijklmnopqrstuvwxyz      ,.;0123456789"
        for _ in range(80):
            strip = Image.new("RGB", (700, 13), (252, 252, 250))
            text = "".join(rng.choice(letters) for _ in range(rng.randrange(40, 110)))
            ImageDraw.Draw(strip).text((0, 0), text, fill=(30, 30, 30))
            _STRIPS.append(strip)
    image = Image.new("RGB", (800, 1040), (252, 252, 250))
    draw = ImageDraw.Draw(image)
    draw.rectangle((40, 40, 760, 100), fill=colour)
    for row in range(42):
        image.paste(rng.choice(_STRIPS), (50 + rng.randrange(0, 20), 120 + row * 15))
    for x in range(480, 740, 4):  # a "photo": a gradient block
        draw.rectangle((x, 780, x + 3, 1000), fill=((x + seed) % 256, (x * 3) % 256, 160))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def stored(data: bytes):  # type: ignore[no-untyped-def]
    """Store an already-clean PNG (the benchmark's own pixels) without the intake re-encode."""
    import hashlib

    from django.conf import settings

    from annotation.models import StoredImage

    sha = hashlib.sha256(data).hexdigest()
    relative = f"images/{sha[:2]}/{sha}.png"
    path = Path(settings.MEDIA_ROOT) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    image, _ = StoredImage.objects.get_or_create(
        sha256=sha, defaults={"file": relative, "width": 800, "height": 1040, "size_bytes": len(data)}
    )
    return image


def build_study(pages: int):  # type: ignore[no-untyped-def]
    from django.db import transaction

    from annotation.models import Axis, Candidate, Comparison, Page, Study, System
    from tests.judges.factories import AXES, TABLE_TARGET

    with transaction.atomic():
        study = Study.objects.create(slug="bench", title="Judge benchmark", neutralize_media=False)
        for i, (axis_id, scope, description) in enumerate(AXES):
            Axis.objects.create(study=study, axis_id=axis_id, scope=scope, description=description, position=i)
        alpha = System.objects.create(study=study, external_id="alpha", name="Alpha")
        beta = System.objects.create(study=study, external_id="beta", name="Beta")
        for p in range(pages):
            page = Page.objects.create(study=study, external_id=f"p{p:04d}", image=stored(page_png(3 * p, (30, 30, 30))),
                                       targets=[TABLE_TARGET] if p % 2 else [], position=p)
            a = Candidate.objects.create(page=page, system=alpha, image=stored(page_png(3 * p + 1, (200, 40, 40))))
            b = Candidate.objects.create(page=page, system=beta, image=stored(page_png(3 * p + 2, (40, 40, 200))))
            Comparison.objects.create(study=study, external_id=f"c{p:04d}", page=page, candidate_a=a, candidate_b=b)
    return study


def cold_build_cpu(study, judge, n: int = 60) -> float:  # type: ignore[no-untyped-def]
    """CPU ms to build one request with an empty prepared-image cache (all three images encoded)."""
    import judges.request_building as rb

    comparisons = list(study.comparisons.order_by("pk")[:n])
    axes = rb.study_axes(study.pk)
    spent = 0.0
    for comparison in comparisons:
        comparison = rb.load_comparison(comparison.pk)
        rb._cache.clear()
        started = time.thread_time()
        rb.build_judge_request(judge=judge, comparison=comparison, order="primary", axes=axes)
        spent += time.thread_time() - started
    rb._cache.clear()
    return 1000 * spent / len(comparisons)


def scenario(name: str, study, url: str, repeats: int, **limits: object) -> dict[str, float]:  # type: ignore[no-untyped-def]
    import judges.request_building as rb
    import judges.services.calls as calls
    from judges.models import Judge, JudgeOutput
    from judges.services.runs import judge_outputs_run_local, judge_run_start

    rb._cache.clear()
    judge = Judge.objects.create(name=f"bench-{name.replace(' ', '-')}", family="bench", provider="openai", model="m",
                                 base_url=url, api_key_env="BENCH_JUDGE_KEY", concurrency=CONCURRENCY,
                                 timeout_seconds=30, **limits)
    plan = judge_run_start(study=study, judge=judge, repeats=repeats, dispatch=False)
    build_cpu: list[float] = []
    lock = threading.Lock()
    original = rb.build_judge_request

    def timed(**kwargs):  # type: ignore[no-untyped-def]
        started = time.thread_time()
        try:
            return original(**kwargs)
        finally:
            spent = time.thread_time() - started
            with lock:
                build_cpu.append(spent)

    calls.build_judge_request = timed  # instrumentation only: the code path is unchanged
    try:
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        counts = judge_outputs_run_local(output_ids=plan.output_ids, concurrency=CONCURRENCY)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
    finally:
        calls.build_judge_request = original
    n = len(plan.output_ids)
    valid = JudgeOutput.objects.filter(judge=judge, status="valid").count()
    ms = sorted(x * 1000 for x in build_cpu)
    result = {
        "calls": n, "valid": valid, "wall_s": wall, "calls_per_s": n / wall, "ideal": CONCURRENCY / DELAY,
        "build_cpu_ms_mean": statistics.fmean(ms), "build_cpu_ms_p95": ms[int(0.95 * (len(ms) - 1))],
        "process_cpu_ms_per_call": 1000 * cpu / n,
    }
    cold = cold_build_cpu(study, judge)
    result["cold_build_cpu_ms"] = cold
    print(
        f"{name:10} {n} calls ({valid} valid, {counts}) in {wall:6.1f} s: {result['calls_per_s']:5.1f} calls/s "
        f"= {100 * result['calls_per_s'] / result['ideal']:4.1f} % of the ideal {result['ideal']:.0f}/s; "
        f"request building CPU {result['build_cpu_ms_mean']:.2f} ms/call (p95 {result['build_cpu_ms_p95']:.2f} ms, "
        f"{cold:.2f} ms with no cached image); "
        f"all CPU in this process {result['process_cpu_ms_per_call']:.2f} ms/call",
        flush=True,
    )
    return result


def batch_scenario(study, url: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Batch mode: one call per comparison (primary order) through the OpenAI Batch emulator.

    The emulator answers a batch at once (no provider queueing): the figure is our own cost to
    build, upload, poll, download, validate and store, per call.
    """
    import judges.request_building as rb
    from judges.models import Judge, JudgeOutput
    from judges.services.batches import judge_batch_submit, judge_batches_poll

    rb._cache.clear()
    judge = Judge.objects.create(name="bench-batch", family="bench", provider="openai", model="m", base_url=url,
                                 api_key_env="BENCH_JUDGE_KEY", timeout_seconds=120, max_image_edge=600)
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    batches = 0
    while judge_batch_submit(study=study, judge=judge, orders=["primary"]) is not None:
        batches += 1
    submitted = time.perf_counter() - t0
    while judge_batches_poll(judge=judge).get("submitted"):
        pass
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    n = JudgeOutput.objects.filter(judge=judge).count()
    valid = JudgeOutput.objects.filter(judge=judge, status="valid").count()
    print(f"batch      {n} calls ({valid} valid) in {batches} batch(es): submitted in {submitted:5.1f} s, stored after "
          f"{wall:5.1f} s = {n / wall:6.1f} calls/s (no provider queueing); CPU {1000 * cpu / n:.2f} ms/call",
          flush=True)
    return {"calls": n, "valid": valid, "wall_s": wall, "calls_per_s": n / wall}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=2, help="repeats per order (2 orders each)")
    parser.add_argument("--batch-only", action="store_true", help="only the batch-mode figure")
    parser.add_argument("--scenarios", default="as-stored,repair,batch",
                        help="comma-separated subset of as-stored, repair, batch")
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    queue: multiprocessing.Queue = multiprocessing.get_context("spawn").Queue()  # type: ignore[type-arg]
    server = multiprocessing.get_context("spawn").Process(target=serve, args=(queue, DELAY), daemon=True)
    server.start()
    try:
        url = queue.get(timeout=60)
        t0 = time.perf_counter()
        study = build_study(args.pages)
        sizes = [len(page_png(i, (30, 30, 30))) for i in range(5)]
        print(f"setup: {args.pages} pages, {3 * args.pages} distinct images (~{sum(sizes) // len(sizes) // 1024} KB PNG each) "
              f"in {time.perf_counter() - t0:.1f} s; "
              f"{2 * args.repeats * args.pages} calls per scenario, concurrency {CONCURRENCY}, server delay {DELAY * 1000:.0f} ms",
              flush=True)
        chosen = {"batch"} if args.batch_only else set(args.scenarios.split(","))
        if "as-stored" in chosen:
            scenario("as stored", study, url, args.repeats)
        if "repair" in chosen:
            scenario("repair", study, url, args.repeats, max_image_edge=600)
        if "batch" in chosen:
            batch_scenario(study, url.removesuffix("/v1") + "/v1")
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
