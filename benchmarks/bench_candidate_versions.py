"""Benchmark of candidate versions (paper B.5) on the paper's deployment size.

Builds the study of ``bench_leaderboard_command.py`` (10 systems, 1,113 pages, 10,000 scheduled
comparisons, one primary-order, repeat-0 output per comparison for each of 5 judges) in a scratch
SQLite database, runs ``leaderboard`` once (stored, the "before"), then replaces 58 candidates the
way ``import_study --update`` does (a new CandidateVersion each, the touched comparisons' outputs
superseded through the judges app's receiver), writes the refreshed outputs, and times:

- the reuse count every leaderboard now makes (``ranking.versions.scoring_provenance``);
- the superseding (``judges.signals.supersede_outputs``);
- ``run_judges --refresh``'s plan for one judge (``judge_run_start(refresh=True, dispatch=False)``);
- ``leaderboard --compare-to`` in-process, and its version-sensitivity part alone.

It prints the paper's figures for this shape: comparisons touched, outputs refreshed and retained.

Run: .venv/bin/python benchmarks/bench_candidate_versions.py [--replace 58] [--resamples 2000] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def replace_candidates(n: int) -> tuple[list[int], int]:
    """Bump ``n`` scheduled candidates to version 2 as the update service does; touched comparison ids."""
    from django.db import transaction
    from django.db.models import Q
    from django.utils import timezone

    from annotation.models import Candidate, CandidateVersion, Comparison, Study
    from judges.signals import supersede_outputs

    study = Study.objects.get(slug="bench-leaderboard")
    used = Comparison.objects.filter(study=study).values_list("candidate_a_id", flat=True).distinct()
    ids = sorted(used)[:: max(1, len(used) // n)][:n]
    with transaction.atomic():
        now = timezone.now()
        rows = []
        for candidate in Candidate.objects.filter(pk__in=ids):
            rows.append(CandidateVersion(candidate=candidate, number=1, image_id=candidate.image_id, activated_at=study.created_at))
            rows.append(CandidateVersion(candidate=candidate, number=2, image_id=candidate.image_id, activated_at=now, note="bench"))
        CandidateVersion.objects.bulk_create(rows)
        Candidate.objects.filter(pk__in=ids).update(version=2)
        touched = list(
            Comparison.objects.filter(Q(candidate_a_id__in=ids) | Q(candidate_b_id__in=ids)).values_list("pk", flat=True)
        )
        started = time.perf_counter()
        effects = supersede_outputs(None, study=study, comparison_ids=touched)
        print(f"supersede {effects['outputs_superseded']} outputs of {len(touched)} comparisons: "
              f"{time.perf_counter() - started:.3f} s")
    return touched, effects["outputs_superseded"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replace", type=int, default=58, help="candidates replaced (the paper: 54 of 58 passed)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="arbiter-bench-versions-"))
    os.environ.update(
        DATABASE_URL=f"sqlite:///{work}/bench.sqlite3", MEDIA_ROOT=str(work / "media"),
        DJANGO_SETTINGS_MODULE=os.environ.get("DJANGO_SETTINGS_MODULE", "config.settings.local"),
    )
    os.environ.pop("CELERY_BROKER_URL", None)
    try:
        import django

        django.setup()
        from bench_leaderboard_command import JUDGES, SLUG, build_study
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        build_study()
        from annotation.models import Study
        from judges.models import Judge, JudgeOutput, OutputStatus
        from judges.services.runs import judge_run_start
        from ranking.models import Leaderboard
        from ranking.versions import scoring_provenance, version_sensitivity

        lb = ["leaderboard", SLUG, "--coefficients", "bench", "--bootstrap", str(args.resamples), "--seed", "20260831"]
        with open(os.devnull, "w") as devnull:
            call_command(*lb, "--json", str(work / "before.json"), stdout=devnull)
        study = Study.objects.get(slug=SLUG)
        earlier = Leaderboard.objects.filter(study=study).latest("pk")
        started = time.perf_counter()
        provenance = scoring_provenance(study=study, inputs=earlier.inputs)
        print(f"reuse count over {provenance['scoring_outputs']} scored outputs: {time.perf_counter() - started:.3f} s")

        touched, superseded = replace_candidates(args.replace)
        judge = Judge.objects.get(name=JUDGES[0])
        judge.provider = "openai"  # only callable judges are planned; nothing is dispatched here
        judge.save(update_fields=["provider"])
        started = time.perf_counter()
        plan = judge_run_start(study=study, judge=judge, refresh=True, dispatch=False)
        print(f"run_judges --refresh plan for one judge: {plan.calls} calls, {plan.created} new, "
              f"{time.perf_counter() - started:.3f} s")
        # The refreshed outputs: every judge answers again on the touched comparisons.
        JudgeOutput.objects.filter(pk__in=plan.output_ids).update(status=OutputStatus.VALID, winner="A")
        rows = [
            JudgeOutput(judge=j, comparison_id=cid, order="primary", repeat=0, status=OutputStatus.VALID, winner="B")
            for j in Judge.objects.filter(name__in=JUDGES[1:])
            for cid in touched
        ]
        JudgeOutput.objects.bulk_create(rows, batch_size=5000)

        started = time.perf_counter()
        with open(os.devnull, "w") as devnull:
            call_command(*lb, "--json", str(work / "after.json"), "--compare-to", str(earlier.pk), stdout=devnull)
        whole = time.perf_counter() - started
        later = Leaderboard.objects.filter(study=study).latest("pk")
        started = time.perf_counter()
        report = version_sensitivity(study=study, earlier=earlier, inputs=later.inputs, result=later.result)
        part = time.perf_counter() - started
        after = json.loads((work / "after.json").read_text())["version_sensitivity"]
        moved = sum(1 for row in after["systems"] if row["rank_change"])
        print(f"leaderboard --compare-to in-process: {whole:.2f} s (version-sensitivity report alone {part:.3f} s)")
        print(f"{args.replace} candidates replaced: {after['comparisons_touched']} comparisons touched, "
              f"{superseded} outputs superseded; outputs refreshed {after['outputs']['refreshed']}, "
              f"retained {after['outputs']['retained']}, new {after['outputs']['new']}; "
              f"{moved} systems changed rank; human-study comparisons changed {after['n_human_comparisons_changed']}")
        assert report["outputs"] == after["outputs"]
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
