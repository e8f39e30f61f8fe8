"""Benchmark of the full ``calibrate`` command (docs/protocol.md "Judges and calibration", "Commands") on
paper-sized data in a database.

The data of ``bench_calibration.simulate`` (1,872 human comparisons in 8 blocks of 234, raters per
block 5,5,5,5,5,4,2,2, 10 systems, 5 judges from 3 families × 2 orders × 2 repeats = 37,440
outputs) is written with ``bulk_create`` into a scratch SQLite database (never the project's):
7,722 votes on 33 assignments (no hidden repeats). Then it times the parts and the whole command:

- the selectors (votes → human table, judge outputs frame),
- ``calibrate`` with 5,000 resamples (pure maths),
- the HTML report (four matplotlib figures),
- ``manage.py calibrate SLUG --json --html --freeze NAME`` end to end (5,000 resamples, pilot 320).

Run: .venv/bin/python benchmarks/bench_calibrate_command.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
WORK = Path(tempfile.mkdtemp(prefix="arbiter-bench-calibrate-"))
os.environ["DATABASE_URL"] = f"sqlite:///{WORK}/db.sqlite3"
os.environ["MEDIA_ROOT"] = str(WORK / "media")
os.environ.pop("CELERY_BROKER_URL", None)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

import django  # noqa: E402

django.setup()

from bench_calibration import JUDGES, simulate  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import transaction  # noqa: E402

from annotation.models import (  # noqa: E402
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    Page,
    Rater,
    Study,
    System,
    Trial,
    Vote,
)
from calibration.calibration_plots import calibration_html  # noqa: E402
from calibration.selectors.calibration import calibration_inputs  # noqa: E402
from judges.models import Judge, JudgeOutput, Provider  # noqa: E402
from stats.judge_weights import calibrate  # noqa: E402

RATERS = [5, 5, 5, 5, 5, 4, 2, 2]


def build(slug: str = "bench-cal") -> Study:
    outputs, human = simulate()
    # The simulation may draw one unordered pair twice on a page; give such a repeat its own page.
    seen: dict[tuple[str, str, str], int] = {}
    fixed = []
    for r in human.itertuples():
        key = (r.page, *sorted((r.system_a, r.system_b)))
        seen[key] = seen.get(key, 0) + 1
        fixed.append(r.page if seen[key] == 1 else f"{r.page}~{seen[key]}")
    human["page"] = fixed
    study = Study.objects.create(slug=slug, title="Calibration benchmark")
    systems = sorted(set(human["system_a"]) | set(human["system_b"]))
    sys_obj = {s: System.objects.create(study=study, external_id=s, name=s) for s in systems}
    pages = {
        p: Page(study=study, external_id=p, position=i) for i, p in enumerate(sorted(set(human["page"])))
    }
    Page.objects.bulk_create(pages.values())
    cands = {}
    for pid in pages:
        rows = human[human["page"] == pid]
        for s in sorted(set(rows["system_a"]) | set(rows["system_b"])):
            cands[pid, s] = Candidate(page=pages[pid], system=sys_obj[s])
    Candidate.objects.bulk_create(cands.values())
    comps = {}
    for r in human.itertuples():
        comps[r.comparison] = Comparison(
            study=study,
            external_id=r.comparison,
            page=pages[r.page],
            candidate_a=cands[r.page, r.system_a],
            candidate_b=cands[r.page, r.system_b],
        )
    Comparison.objects.bulk_create(comps.values())
    blocks = {
        name: Block.objects.create(study=study, name=name, position=i)
        for i, name in enumerate(sorted(set(human["block"])))
    }
    items, assignments, trials, votes = [], [], [], []
    for bi, (name, block) in enumerate(blocks.items()):
        rows = human[human["block"] == name].reset_index(drop=True)
        items += [
            BlockItem(block=block, position=i, comparison=comps[c]) for i, c in enumerate(rows["comparison"])
        ]
        for k in range(RATERS[bi]):
            rater = Rater.objects.create(study=study, external_id=f"{name}-r{k}")
            a = Assignment(block=block, slot=k, rater=rater, state=AssignmentState.FINISHED)
            assignments.append(a)
            for i, r in enumerate(rows.itertuples()):
                label = "A" if k < r.n_A else "TIE" if k < r.n_A + r.n_T else "B"
                t = Trial(assignment=a, position=i, comparison=comps[r.comparison], swapped=bool((k + i) % 2))
                trials.append(t)
                votes.append(Vote(trial=t, label=label, confidence=3))
    BlockItem.objects.bulk_create(items)
    Assignment.objects.bulk_create(assignments)
    Trial.objects.bulk_create(trials, batch_size=2000)
    Vote.objects.bulk_create(votes, batch_size=2000)
    judges = {
        name: Judge.objects.get_or_create(name=name, defaults={"family": fam, "provider": Provider.IMPORTED})[
            0
        ]
        for name, fam in JUDGES.items()
    }
    JudgeOutput.objects.bulk_create(
        [
            JudgeOutput(
                judge=judges[o.judge],
                comparison=comps[o.comparison],
                order=o.order,
                repeat=o.repeat,
                status=o.status,
                winner=o.winner if o.status == "valid" else "",
            )
            for o in outputs.itertuples()
        ],
        batch_size=5000,
    )
    return study


def main() -> None:
    call_command("migrate", verbosity=0)
    t0 = time.perf_counter()
    with transaction.atomic():
        study = build()
    t1 = time.perf_counter()
    print(
        f"scratch DB {WORK}: {Vote.objects.count()} votes, {JudgeOutput.objects.count()} judge outputs "
        f"(built in {t1 - t0:.1f} s)"
    )
    inputs = calibration_inputs(study=study)
    t2 = time.perf_counter()
    result = calibrate(
        inputs.judge_outputs,
        inputs.human,
        judges=list(inputs.judges),
        resamples=5000,
        seed=20260830,
        pilot_size=320,
        families=inputs.families,
    )
    t3 = time.perf_counter()
    report = result.to_dict()
    html = calibration_html(report, title="bench")
    t4 = time.perf_counter()
    print(f"selectors (human table + judge outputs frame): {t2 - t1:.2f} s")
    print(f"calibrate, 5,000 resamples: {t3 - t2:.2f} s")
    print(f"HTML report (4 figures, {len(html) // 1024} KiB): {t4 - t3:.2f} s")
    start = time.perf_counter()
    call_command(
        "calibrate",
        study.slug,
        "--json",
        str(WORK / "calibrate.json"),
        "--html",
        str(WORK / "calibrate.html"),
        "--freeze",
        "bench",
        "--pilot-size",
        "320",
    )
    end = time.perf_counter()
    print(
        f"manage.py calibrate --json --html --freeze (5,000 resamples): {end - start:.2f} s; "
        f"JSON {(WORK / 'calibrate.json').stat().st_size // 1024} KiB"
    )


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
