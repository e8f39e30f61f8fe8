"""Backups (SECURITY.md "Backups", README "Backups"): the three exports are a complete backup.

A synthetic study with images, media regions, failed renders, human votes (participants through
the real rater flow, hidden repeats included) and judge outputs (valid and invalid) is exported
with the documented commands (``export_study``, ``export_votes``, ``export_judge_outputs``). Then
the database is emptied of everything the study used — the study and all its rows, every stored
image row and file, every judge — and the three files are imported back with ``import_study``,
``import_votes`` and ``import_judge_outputs``. Systems, axes, pages, targets, candidates,
comparisons, images (pixel for pixel), votes and judge outputs must be as they were.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from PIL import Image

from annotation.models import Candidate, Comparison, StoredImage, Study, Vote
from demo.service import demo_study_create
from judges.models import Judge, JudgeOutput

# Transactional: the restore starts from a flushed (truly empty) database, which PostgreSQL
# cannot TRUNCATE inside the test transaction.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _pixels(image: StoredImage | None, media: Path) -> tuple[tuple[int, int], bytes] | None:
    if image is None:
        return None
    with Image.open(media / image.file.name) as opened:
        return opened.size, opened.convert("RGBA").tobytes()


def study_state(slug: str, media: Path) -> dict[str, Any]:
    """Everything a backup must carry, keyed by the study's own ids (never database ids)."""
    study = Study.objects.get(slug=slug)
    axes = list(study.axes.order_by("position").values_list("axis_id", "scope", "description"))
    systems = list(study.systems.order_by("position").values_list("external_id", "name"))
    pages = {
        p.external_id: (p.targets, p.media, p.meta, _pixels(p.image, media))
        for p in study.pages.select_related("image")
    }
    candidates = {
        (c.page.external_id, c.system.external_id): (c.rendered, c.media, _pixels(c.image, media))
        for c in Candidate.objects.filter(page__study=study).select_related("page", "system", "image")
    }
    comparisons = {
        c.external_id: (
            c.page.external_id,
            c.candidate_a.system.external_id,
            c.candidate_b.system.external_id,
            c.set,
        )
        for c in Comparison.objects.filter(study=study).select_related(
            "page", "candidate_a__system", "candidate_b__system"
        )
    }
    votes = sorted(
        (
            v.trial.comparison.external_id,
            v.trial.assignment.block.name,
            v.trial.assignment.rater.external_id,
            v.trial.position,
            v.trial.swapped,
            v.trial.is_repeat,
            v.label,
            v.confidence,
            tuple(sorted(v.axis_scores.items())),
            v.rationale,
            v.response_ms,
        )
        for v in Vote.objects.filter(trial__assignment__block__study=study).select_related(
            "trial__comparison", "trial__assignment__block", "trial__assignment__rater"
        )
    )
    outputs = sorted(
        (
            o.judge.name,
            o.comparison.external_id,
            o.order,
            o.repeat,
            o.status,
            o.raw,
            o.error,
            o.winner,
            o.confidence,
            repr(o.axis_scores),
            o.reason,
        )
        for o in JudgeOutput.objects.filter(comparison__study=study).select_related("judge", "comparison")
    )
    # Committee eligibility (docs/protocol.md "Judges and calibration": one judge per vendor family) needs
    # each judge's family.
    judges = sorted(
        set(JudgeOutput.objects.filter(comparison__study=study).values_list("judge__name", "judge__family"))
    )
    return {
        "study": (study.slug, study.title, study.kind, study.instructions_md, study.judge_prompt),
        "axes": axes,
        "systems": systems,
        "pages": pages,
        "candidates": candidates,
        "comparisons": comparisons,
        "votes": votes,
        "judge_outputs": outputs,
        "judge_families": judges,
    }


def test_exports_restore_the_study_votes_and_judge_outputs_on_an_empty_database(
    tmp_path: Path, _media_root: Path
) -> None:
    demo_study_create(slug="backup", seed=3, n_pages=12, n_systems=4)
    before = study_state("backup", _media_root)
    # The study is worth backing up: every part of it is present.
    assert len(before["votes"]) >= 20 and any(v[5] for v in before["votes"])  # with hidden repeats
    assert {o[4] for o in before["judge_outputs"]} >= {"valid"} and len(before["judge_outputs"]) >= 20
    assert any(c[0] is False for c in before["candidates"].values())  # a failed render
    assert any(p[1] for p in before["pages"].values())  # media regions

    backup = tmp_path / "backup"
    backup.mkdir()
    call_command("export_study", "backup", str(backup / "study.zip"))
    call_command("export_votes", "backup", str(backup / "votes.csv"))
    call_command("export_judge_outputs", "backup", str(backup / "judges.jsonl"))

    # An empty database (every table flushed) and an empty media folder.
    call_command("flush", interactive=False, verbosity=0)
    shutil.rmtree(_media_root)
    _media_root.mkdir()
    assert not Study.objects.exists() and not StoredImage.objects.exists() and not Judge.objects.exists()
    assert not JudgeOutput.objects.exists() and not Vote.objects.exists()

    out = io.StringIO()
    call_command("import_study", str(backup / "study.zip"), stdout=out)
    assert out.getvalue().strip() == "backup"
    call_command("import_votes", "backup", str(backup / "votes.csv"), stdout=io.StringIO())
    call_command("import_judge_outputs", "backup", str(backup / "judges.jsonl"), stdout=io.StringIO())

    after = study_state("backup", _media_root)
    for key in before:
        assert after[key] == before[key], f"the restore changed {key}"


def test_a_second_export_of_the_restored_study_is_identical(tmp_path: Path, _media_root: Path) -> None:
    """Export → import → export gives the same three files (the backup is a fixed point)."""
    demo_study_create(slug="fixed", seed=5, n_pages=8, n_systems=3)
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    call_command("export_study", "fixed", str(first / "bundle"))
    call_command("export_votes", "fixed", str(first / "votes.csv"))
    call_command("export_judge_outputs", "fixed", str(first / "judges.jsonl"))
    call_command("flush", interactive=False, verbosity=0)
    call_command("import_study", str(first / "bundle"), stdout=io.StringIO())
    call_command("import_votes", "fixed", str(first / "votes.csv"), stdout=io.StringIO())
    call_command("import_judge_outputs", "fixed", str(first / "judges.jsonl"), stdout=io.StringIO())
    call_command("export_study", "fixed", str(second / "bundle"))
    call_command("export_votes", "fixed", str(second / "votes.csv"))
    call_command("export_judge_outputs", "fixed", str(second / "judges.jsonl"))
    assert (second / "votes.csv").read_bytes() == (first / "votes.csv").read_bytes()
    assert (second / "judges.jsonl").read_bytes() == (first / "judges.jsonl").read_bytes()
    first_files = sorted(p.relative_to(first / "bundle") for p in (first / "bundle").rglob("*"))
    second_files = sorted(p.relative_to(second / "bundle") for p in (second / "bundle").rglob("*"))
    assert first_files == second_files
    for name in first_files:
        if (first / "bundle" / name).is_file():
            assert (first / "bundle" / name).read_bytes() == (second / "bundle" / name).read_bytes(), name
