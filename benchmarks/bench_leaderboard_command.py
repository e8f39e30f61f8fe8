"""Benchmark of the ``leaderboard`` command (docs/protocol.md "Deployment leaderboard", "Commands") on the
paper's deployment size.

Builds, in a scratch SQLite database, a study of 10 systems on 1,113 pages (every candidate
rendered, all sharing one StoredImage row: eligibility needs an image, not its pixels), schedules
10,000 comparisons with the project's ``deployment_schedule_create`` (the paper's quotas: 35 pairs
× 222 + 10 pairs × 223, 2,000 appearances each), bulk-creates one primary-order, repeat-0 output per
comparison for each of 5 judges (plus a few invalid ones, which must be skipped) and a frozen
coefficient set. Then it times:

- ``manage.py leaderboard`` as a subprocess, end to end (interpreter and Django start-up included),
  with 2,000 resamples — the figure the target (< 3 s) applies to;
- the same command in-process (``call_command``), and its parts: the selector (queries → arrays)
  and the bootstrap.

Run: .venv/bin/python benchmarks/bench_leaderboard_command.py [--resamples 2000] [--repeat 3] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYSTEMS = 10
PAGES = 1113
COMPARISONS = 10_000
JUDGES = ("bench-judge-a", "bench-judge-b", "bench-judge-c", "bench-judge-d", "bench-judge-e")
BETAS = (0.3, 0.25, 0.2, 0.15, 0.1)
SLUG = "bench-leaderboard"


def build_study() -> None:
    import numpy as np

    from annotation.models import Candidate, Comparison, Page, StoredImage, Study, System
    from calibration.models import CoefficientSet
    from judges.models import Judge, JudgeOutput
    from ranking.schedule import deployment_schedule_create

    rng = np.random.default_rng(20260831)
    study = Study.objects.create(slug=SLUG, title="Leaderboard benchmark")
    image = StoredImage.objects.create(sha256="0" * 64, file="images/bench.png", width=1, height=1, size_bytes=1)
    systems = System.objects.bulk_create(
        System(study=study, external_id=f"sys{k:02d}", name=f"System {k}", position=k) for k in range(SYSTEMS)
    )
    pages = Page.objects.bulk_create(
        Page(study=study, external_id=f"{k:04d}", position=k) for k in range(PAGES)
    )
    Candidate.objects.bulk_create(
        (Candidate(page=page, system=system, image=image, rendered=True) for page in pages for system in systems),
        batch_size=5000,
    )
    started = time.perf_counter()
    outcome = deployment_schedule_create(study=study, comparisons=COMPARISONS, seed=20260831)
    print(f"make_schedule service: {time.perf_counter() - started:.2f} s")
    for line in outcome.lines():
        print("  " + line)
    strength = {s.pk: 0.25 * (SYSTEMS / 2 - k) for k, s in enumerate(systems)}
    judges = [Judge.objects.create(name=name, family=name[-1], provider="imported") for name in JUDGES]
    comps = list(Comparison.objects.filter(study=study).values_list("id", "candidate_a__system_id", "candidate_b__system_id"))
    outputs = []
    for n, (cid, a, b) in enumerate(comps):
        prob = 1 / (1 + np.exp(-(strength[a] - strength[b])))
        for j, judge in enumerate(judges):
            if n % 997 == j:  # a few invalid replies: those comparisons are skipped
                outputs.append(JudgeOutput(judge=judge, comparison_id=cid, order="primary", repeat=0, status="invalid"))
                continue
            r = rng.random()
            winner = "A" if r < 0.9 * prob else ("TIE" if r < 0.9 * prob + 0.1 else "B")
            outputs.append(
                JudgeOutput(judge=judge, comparison_id=cid, order="primary", repeat=0, status="valid", winner=winner, confidence=3)
            )
    JudgeOutput.objects.bulk_create(outputs, batch_size=5000)
    CoefficientSet.objects.create(
        study=study, name="bench", coefficients=dict(zip(JUDGES, BETAS, strict=True)), report={"judges": list(JUDGES)}
    )
    print(f"study: {SYSTEMS} systems, {PAGES} pages, {len(comps)} comparisons, {len(outputs)} judge outputs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each kind (the best is reported)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="arbiter-bench-lb-"))
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{work}/bench.sqlite3", MEDIA_ROOT=str(work / "media"))
    env.pop("CELERY_BROKER_URL", None)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")
    os.environ.update({k: env[k] for k in ("DATABASE_URL", "MEDIA_ROOT", "DJANGO_SETTINGS_MODULE")})
    os.environ.pop("CELERY_BROKER_URL", None)
    sys.path.insert(0, str(ROOT))
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        build_study()
        print(f"built in {time.perf_counter() - started:.1f} s")

        out = work / "leaderboard.json"
        command = [sys.executable, "manage.py", "leaderboard", SLUG, "--coefficients", "bench", "--json", str(out),
                   "--bootstrap", str(args.resamples), "--seed", "20260831"]
        walls, cpus = [], []
        for _ in range(args.repeat):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
            walls.append(time.perf_counter() - started)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if result.returncode:
                raise SystemExit(f"leaderboard failed: {result.stderr.strip().splitlines()[-1]}")
        report = json.loads(out.read_text())
        print(result.stdout.strip())
        print(f"manage.py leaderboard (subprocess, end to end): best wall {min(walls):.2f} s, runs "
              + ", ".join(f"{w:.2f}" for w in walls)
              + f"; CPU (user + sys) best {min(cpus):.2f} s (wall exceeds CPU only when the machine is busy)")

        from annotation.models import Study
        from calibration.models import CoefficientSet
        from ranking.leaderboard import bootstrap_chunk
        from ranking.selectors import leaderboard_inputs

        in_process = []
        with open(os.devnull, "w") as devnull:
            for _ in range(args.repeat):
                started = time.perf_counter()
                call_command("leaderboard", SLUG, "--coefficients", "bench", "--json", str(work / "again.json"),
                             "--bootstrap", str(args.resamples), "--seed", "20260831", stdout=devnull)
                in_process.append(time.perf_counter() - started)
        assert json.loads((work / "again.json").read_text()) == report
        study = Study.objects.get(slug=SLUG)
        cset = CoefficientSet.objects.get(study=study, name="bench")
        started = time.perf_counter()
        inputs = leaderboard_inputs(study=study, coefficient_set=cset)
        selector = time.perf_counter() - started
        started = time.perf_counter()
        bootstrap_chunk(inputs, resamples=args.resamples, seed=20260831, start=0, stop=args.resamples)
        boot = time.perf_counter() - started
        print(f"leaderboard in-process (call_command): best {min(in_process):.2f} s "
              f"(selector {selector:.2f} s, bootstrap {boot:.2f} s)")
        print(f"n_comparisons {report['n_comparisons']}, n_skipped {report['n_skipped']}, n_pages {report['n_pages']}, "
              f"appearances {sorted({s['appearances'] for s in report['systems']})}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
