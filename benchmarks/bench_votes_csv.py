"""Benchmark of the votes-CSV exchange (docs/protocol.md "Files") and the votes frame on 10,000+ votes.

Builds a rated study of 200 pages (600 comparisons, 8 blocks × 17 raters × 77 trials = 10,472
votes) on a scratch SQLite database, then times ``votes_frame`` (the table every report starts
from), ``votes_export_csv`` and ``votes_import_csv`` of that export into a copy of the study
without votes. Targets (this script's baseline, unchanged since the first session): frame < 5 s,
export < 10 s, import < 30 s. The round trip's correctness is tested in
``tests/annotation/test_votes.py``; this script is where the speed is measured.

Run: .venv/bin/python benchmarks/bench_votes_csv.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCRATCH = Path(tempfile.mkdtemp(prefix="arbiter-bench-votes-"))
os.environ.setdefault("DATABASE_URL", f"sqlite:///{SCRATCH / 'db.sqlite3'}")
os.environ["MEDIA_ROOT"] = str(SCRATCH / "media")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
os.environ.pop("CELERY_BROKER_URL", None)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

TARGETS = {"votes_frame": 5.0, "export": 10.0, "import": 30.0}


def main() -> int:
    call_command("migrate", verbosity=0)
    from annotation.models import Vote
    from annotation.selectors.votes import votes_frame
    from annotation.services.votes_csv import votes_export_csv, votes_import_csv
    from tests.annotation.factories import make_rated_study
    from tests.annotation.test_votes import make_rated_study_shell

    started = time.perf_counter()
    study = make_rated_study("big", n_pages=200, n_blocks=8, raters_per_block=17, tmp_dir=SCRATCH, seed=3)
    figures = {"build": time.perf_counter() - started}
    started = time.perf_counter()
    frame = votes_frame(study=study)
    figures["votes_frame"] = time.perf_counter() - started
    started = time.perf_counter()
    n = votes_export_csv(study=study, path=SCRATCH / "big.csv")
    figures["export"] = time.perf_counter() - started
    copy = make_rated_study_shell(study)
    started = time.perf_counter()
    votes_import_csv(study=copy, path=SCRATCH / "big.csv")
    figures["import"] = time.perf_counter() - started
    stored = Vote.objects.filter(trial__assignment__block__study=copy).count()
    print(f"{n} votes ({len(frame)} in the frame, {stored} stored by the re-import); load {os.getloadavg()[0]:.1f}")
    print(f"  build (factory + import) {figures['build']:6.2f} s")
    failed = False
    for name, target in TARGETS.items():
        ok = figures[name] < target
        failed |= not ok
        print(f"  {name:<24} {figures[name]:6.2f} s   target < {target:.0f} s   {figures[name] / target:5.2f}x of target")
    return 1 if failed or stored != n else 0


if __name__ == "__main__":
    raise SystemExit(main())
