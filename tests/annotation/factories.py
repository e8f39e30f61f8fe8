"""Test studies built directly with the ORM (no bundle import, no images).

``make_study`` mirrors the docs/protocol.md "Files" example bundle (``../shared/examples/bundle``): three axes
(two fixed, TABLE conditional), systems alpha/beta/gamma, pages e00 (TABLE target), e01 (none),
e02 (TABLE target), comparisons c1 (e00 alpha–beta), c2 (e01 gamma–alpha), c3 (e02 beta–alpha).
``make_rated_study`` adds more pages, comparisons and raters with seeded votes through the
votes CSV importer, for the agreement report.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from annotation.models import (
    Axis,
    AxisScope,
    Candidate,
    Comparison,
    ComparisonSet,
    Page,
    Study,
    System,
)

AXES: tuple[tuple[str, str], ...] = (
    ("GLOBAL_LAYOUT_FIDELITY", AxisScope.FIXED),
    ("TEXT_VISUAL_PRESENTATION", AxisScope.FIXED),
    ("TABLE", AxisScope.CONDITIONAL),
)
TABLE_TARGET = {"axis": "TABLE", "role": "table", "bbox_1000": [66, 450, 934, 650], "description": "results table"}
BASE_COLUMNS: tuple[str, ...] = (
    "comparison", "page", "system_a", "system_b", "block", "rater", "position", "swapped",
    "repeat", "label", "confidence", "rationale", "response_ms",
)
HEADER: tuple[str, ...] = BASE_COLUMNS + tuple(f"axis:{a}" for a, _ in AXES)


def make_study(
    slug: str = "example",
    *,
    researchers: Iterable[Any] = (),
    seed: int = 20260830,
) -> Study:
    """The docs/protocol.md "Files" example study, built with the ORM (no images)."""
    study = Study.objects.create(slug=slug, title=f"Study {slug}", seed=seed)
    study.researchers.add(*researchers)
    for i, (axis_id, scope) in enumerate(AXES):
        Axis.objects.create(study=study, axis_id=axis_id, scope=scope, position=i)
    systems = {
        sid: System.objects.create(study=study, external_id=sid, name=f"{sid.title()} system", position=i)
        for i, sid in enumerate(("alpha", "beta", "gamma"))
    }
    pages = {}
    for i, (pid, targets) in enumerate((("e00", [TABLE_TARGET]), ("e01", []), ("e02", [TABLE_TARGET]))):
        pages[pid] = Page.objects.create(study=study, external_id=pid, targets=targets, position=i)
    cands = {}
    for pid, page in pages.items():
        for sid, system in systems.items():
            rendered = not (pid == "e02" and sid == "gamma")
            cands[pid, sid] = Candidate.objects.create(page=page, system=system, rendered=rendered)
    for cid, pid, a, b, cset in (
        ("c1", "e00", "alpha", "beta", ComparisonSet.HUMAN),
        ("c2", "e01", "gamma", "alpha", ComparisonSet.HUMAN),
        ("c3", "e02", "beta", "alpha", ComparisonSet.DEPLOYMENT),
    ):
        Comparison.objects.create(
            study=study, external_id=cid, page=pages[pid], candidate_a=cands[pid, a],
            candidate_b=cands[pid, b], set=cset,
        )
    return study


EXAMPLE_ROWS: tuple[Mapping[str, str], ...] = tuple(
    dict(zip(HEADER, row, strict=True))
    for row in (
        ("c1", "e00", "alpha", "beta", "block-1", "r01", "1", "0", "0", "A", "4", "table kept", "12034", "1", "0", "2"),
        ("c2", "e01", "gamma", "alpha", "block-1", "r01", "2", "1", "0", "TIE", "2", "", "8410", "0", "0", ""),
        ("c1", "e00", "alpha", "beta", "block-1", "r01", "3", "0", "1", "A", "4", "", "6120", "1", "1", "1"),
        ("c1", "e00", "alpha", "beta", "block-1", "r02", "1", "1", "0", "B", "3", "", "15022", "-1", "0", "-1"),
        ("c2", "e01", "gamma", "alpha", "block-1", "r02", "2", "0", "0", "CANNOT_JUDGE", "1",
         "image did not load", "4000", "", "", ""),
    )
)


def votes_csv_text(rows: Iterable[Mapping[str, str]], header: Sequence[str] = HEADER) -> str:
    """A votes CSV (docs/protocol.md "Files") from row dicts; missing keys are written empty."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        writer.writerow([row.get(c, "") for c in header])
    return buf.getvalue()


def write_votes_csv(path: Path, rows: Iterable[Mapping[str, str]], header: Sequence[str] = HEADER) -> Path:
    path.write_text(votes_csv_text(rows, header), encoding="utf-8")
    return path


def make_rated_study(
    slug: str = "rated",
    *,
    researchers: Iterable[Any] = (),
    n_pages: int = 12,
    n_blocks: int = 3,
    raters_per_block: int = 4,
    seed: int = 7,
    tmp_dir: Path,
) -> Study:
    """A study with ``n_pages`` pages × 3 comparisons, split into blocks, with seeded votes.

    System quality alpha > beta > gamma > delta, so the human ranking has a clear order. Each rater
    also answers two hidden repeats. Votes go in through ``votes_import_csv`` (the code under test
    elsewhere); this only builds the study and the file.
    """
    from annotation.services.votes_csv import votes_import_csv

    rng = np.random.default_rng(seed)
    study = Study.objects.create(slug=slug, title=f"Study {slug}", seed=seed)
    study.researchers.add(*researchers)
    for i, (axis_id, scope) in enumerate(AXES):
        Axis.objects.create(study=study, axis_id=axis_id, scope=scope, position=i)
    quality = {"alpha": 1.2, "beta": 0.4, "gamma": -0.3, "delta": -1.0}
    systems = {
        sid: System.objects.create(study=study, external_id=sid, name=sid, position=i)
        for i, sid in enumerate(quality)
    }
    pairs = (("alpha", "beta"), ("gamma", "alpha"), ("beta", "delta"), ("delta", "gamma"), ("alpha", "delta"))
    comparisons: list[tuple[str, str, str, str, bool]] = []  # (id, page, a, b, table)
    for p in range(n_pages):
        table = p % 2 == 0
        page = Page.objects.create(
            study=study, external_id=f"p{p:03d}", targets=[TABLE_TARGET] if table else [], position=p
        )
        cands = {sid: Candidate.objects.create(page=page, system=s) for sid, s in systems.items()}
        for k in range(3):
            a, b = pairs[(p + k) % len(pairs)]
            cid = f"p{p:03d}-{a}-{b}"
            Comparison.objects.create(
                study=study, external_id=cid, page=page, candidate_a=cands[a], candidate_b=cands[b]
            )
            comparisons.append((cid, page.external_id, a, b, table))
    rows: list[dict[str, str]] = []
    per_block = [comparisons[i::n_blocks] for i in range(n_blocks)]
    for bi, block_comps in enumerate(per_block):
        for ri in range(raters_per_block):
            rater = f"b{bi}-r{ri}"
            order = rng.permutation(len(block_comps))
            labels: dict[str, tuple[str, bool]] = {}
            position = 0
            for j in order:
                cid, pid, a, b, table = block_comps[j]
                diff = quality[a] - quality[b] + rng.normal(0, 0.8)
                label = "A" if diff > 0.5 else "B" if diff < -0.5 else "TIE"
                if rng.random() < 0.05:
                    label = "CANNOT_JUDGE"
                swapped = bool((ri + j) % 2)
                labels[cid] = (label, swapped)
                rows.append(_row(cid, pid, a, b, f"block-{bi + 1}", rater, position, swapped, False, label,
                                 table, rng))
                position += 1
            for j in order[:2]:
                cid, pid, a, b, table = block_comps[j]
                label, swapped = labels[cid]
                if rng.random() < 0.25:
                    label = "TIE" if label != "TIE" else "A"
                rows.append(_row(cid, pid, a, b, f"block-{bi + 1}", rater, position, swapped, True, label,
                                 table, rng))
                position += 1
    path = write_votes_csv(tmp_dir / f"{slug}-votes.csv", rows)
    votes_import_csv(study=study, path=path)
    return study


def _row(
    cid: str, pid: str, a: str, b: str, block: str, rater: str, position: int, swapped: bool,
    repeat: bool, label: str, table: bool, rng: np.random.Generator,
) -> dict[str, str]:
    row = {
        "comparison": cid, "page": pid, "system_a": a, "system_b": b, "block": block, "rater": rater,
        "position": str(position), "swapped": "1" if swapped else "0", "repeat": "1" if repeat else "0",
        "label": label, "confidence": str(int(rng.integers(1, 6))), "rationale": "",
        "response_ms": str(int(rng.integers(2000, 30000))),
    }
    if label != "CANNOT_JUDGE":
        sign = {"A": 1, "B": -1, "TIE": 0}[label]
        row["axis:GLOBAL_LAYOUT_FIDELITY"] = str(sign)
        row["axis:TEXT_VISUAL_PRESENTATION"] = str(int(rng.integers(-2, 3)))
        if table:
            row["axis:TABLE"] = str(sign * int(rng.integers(0, 3)))
    return row
