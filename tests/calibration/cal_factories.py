"""A calibration-ready study built directly with the ORM (no importer, no images).

``make_calibration_study`` creates systems, pages, human-set comparisons (plus a few deployment
ones), blocks, raters, finished assignments with trials and canonical votes (some CANNOT_JUDGE,
hidden repeats, one voided assignment whose votes must be ignored) and judge outputs
(2 orders × 2 repeats, a few invalid, one comparison where a judge has no valid output at all).
It also returns, computed here in plain Python from what it generated, the frames the pure
``calibrate`` expects — an independent check of the selectors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from annotation.models import (
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    ComparisonSet,
    Page,
    Rater,
    Study,
    System,
    Trial,
    Vote,
)
from judges.models import Judge, JudgeOutput, OutputStatus, Provider

JUDGE_FAMILIES: dict[str, str] = {
    "cal-opus": "anthropic",
    "cal-gemini": "google",
    "cal-gpt": "openai",
    "cal-mini": "openai",
}
JUDGE_NOISE: dict[str, float] = {"cal-opus": 0.4, "cal-gemini": 0.7, "cal-gpt": 0.5, "cal-mini": 1.0}
LABELS = ("B", "TIE", "A")


@dataclass
class CalibrationStudy:
    study: Study
    human: pd.DataFrame  # comparison, page, block, h, n_valid, n_A, n_T, n_B, system_a, system_b
    judge_outputs: pd.DataFrame  # comparison, judge, order, repeat, status, winner
    judges: list[str]
    families: dict[str, str]
    excluded_comparison: str


def ensure_judges(families: dict[str, str] = JUDGE_FAMILIES) -> dict[str, Judge]:
    out = {}
    for name, family in families.items():
        judge, _ = Judge.objects.get_or_create(
            name=name, defaults={"family": family, "provider": Provider.IMPORTED, "model": name}
        )
        out[name] = judge
    return out


def make_calibration_study(
    slug: str = "cal",
    *,
    researchers: Iterable[Any] = (),
    n_blocks: int = 3,
    pages_per_block: int = 8,
    comparisons_per_page: int = 2,
    raters_per_block: int = 4,
    seed: int = 11,
) -> CalibrationStudy:
    rng = np.random.default_rng(seed)
    study = Study.objects.create(slug=slug, title=f"Calibration {slug}", seed=seed)
    study.researchers.add(*researchers)
    quality = {"s-alpha": 1.0, "s-beta": 0.5, "s-gamma": 0.0, "s-delta": -0.5, "s-eps": -1.0}
    systems = {
        sid: System.objects.create(study=study, external_id=sid, name=sid, position=i)
        for i, sid in enumerate(quality)
    }
    judges = ensure_judges()
    pairs = [(a, b) for a in quality for b in quality if a < b]
    human_rows: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    latent_of: dict[str, float] = {}
    comp_objs: dict[str, Comparison] = {}
    block_comps: list[list[str]] = []
    page_no = 0
    for b in range(n_blocks):
        block = Block.objects.create(
            study=study, name=f"blk-{b + 1}", position=b, target_raters=raters_per_block
        )
        members: list[str] = []
        for _ in range(pages_per_block):
            page = Page.objects.create(study=study, external_id=f"pg{page_no:03d}", position=page_no)
            cands = {sid: Candidate.objects.create(page=page, system=s) for sid, s in systems.items()}
            chosen = rng.choice(len(pairs), comparisons_per_page + 1, replace=False)
            for k, pi in enumerate(chosen):
                a, bb = pairs[int(pi)]
                if rng.random() < 0.5:
                    a, bb = bb, a
                cid = f"cmp-{page_no:03d}-{k}"
                cset = ComparisonSet.DEPLOYMENT if k == comparisons_per_page else ComparisonSet.HUMAN
                comp = Comparison.objects.create(
                    study=study,
                    external_id=cid,
                    page=page,
                    candidate_a=cands[a],
                    candidate_b=cands[bb],
                    set=cset,
                )
                if cset == ComparisonSet.HUMAN:
                    comp_objs[cid] = comp
                    members.append(cid)
                    latent_of[cid] = quality[a] - quality[bb] + float(rng.normal(0, 0.6))
                    human_rows.append(
                        {
                            "comparison": cid,
                            "page": page.external_id,
                            "block": block.name,
                            "system_a": a,
                            "system_b": bb,
                        }
                    )
            page_no += 1
        for pos, cid in enumerate(members):
            BlockItem.objects.create(block=block, position=pos, comparison=comp_objs[cid])
        block_comps.append(members)

    counts = {cid: [0, 0, 0] for cid in comp_objs}  # B, TIE, A — valid main votes of live assignments
    blocks = list(Block.objects.filter(study=study).order_by("position"))
    for b, block in enumerate(blocks):
        members = block_comps[b]
        for r in range(raters_per_block + 1):
            voided = r == raters_per_block  # the last assignment is voided: its votes never count
            rater = Rater.objects.create(study=study, external_id=f"{block.name}-r{r}")
            assignment = Assignment.objects.create(
                block=block,
                slot=r,
                rater=rater,
                state=AssignmentState.VOIDED if voided else AssignmentState.FINISHED,
            )
            order = rng.permutation(len(members))
            originals: dict[str, Trial] = {}
            position = 0
            for j in order:
                cid = members[int(j)]
                z = latent_of[cid] + float(rng.normal(0, 0.8))
                label = "A" if z > 0.4 else "B" if z < -0.4 else "TIE"
                if rng.random() < 0.06:
                    label = "CANNOT_JUDGE"
                if voided:
                    label = "A"
                trial = Trial.objects.create(
                    assignment=assignment,
                    position=position,
                    comparison=comp_objs[cid],
                    swapped=bool((r + j) % 2),
                )
                Vote.objects.create(trial=trial, label=label, confidence=int(rng.integers(1, 6)))
                originals[cid] = trial
                if not voided and label in LABELS:
                    counts[cid][LABELS.index(label)] += 1
                position += 1
            for j in order[:2]:  # hidden repeats: never counted in h
                cid = members[int(j)]
                trial = Trial.objects.create(
                    assignment=assignment,
                    position=position,
                    comparison=comp_objs[cid],
                    swapped=originals[cid].swapped,
                    is_repeat=True,
                    repeat_of=originals[cid],
                )
                Vote.objects.create(trial=trial, label="B", confidence=3)
                position += 1

    human = pd.DataFrame(human_rows).sort_values("comparison").reset_index(drop=True)
    c = np.array([counts[cid] for cid in human["comparison"]])
    n = c.sum(axis=1)
    human["h"] = np.where(n > 0, (c[:, 2] + 0.5 * c[:, 1]) / np.maximum(n, 1), np.nan)
    human["n_valid"] = n
    human["n_A"], human["n_T"], human["n_B"] = c[:, 2], c[:, 1], c[:, 0]
    human = human[
        ["comparison", "page", "block", "h", "n_valid", "n_A", "n_T", "n_B", "system_a", "system_b"]
    ]

    excluded = sorted(comp_objs)[3]
    for cid, comp in sorted(comp_objs.items()):
        for name, judge in judges.items():
            for side in ("primary", "swapped"):
                for rep in (0, 1):
                    z = latent_of[cid] + float(rng.normal(0, JUDGE_NOISE[name]))
                    if side == "swapped" and name == "cal-mini":
                        z -= 0.3  # a position bias, so order consistency is not perfect
                    winner = "A" if z > 0.3 else "B" if z < -0.3 else "TIE"
                    status = OutputStatus.VALID
                    if (cid == excluded and name == "cal-gemini") or rng.random() < 0.03:
                        status = OutputStatus.INVALID
                    JudgeOutput.objects.create(
                        judge=judge,
                        comparison=comp,
                        order=side,
                        repeat=rep,
                        status=status,
                        winner=winner if status == OutputStatus.VALID else "",
                        confidence=3 if status == OutputStatus.VALID else None,
                        raw="{}",
                        imported=True,
                    )
                    outputs.append(
                        {
                            "comparison": cid,
                            "judge": name,
                            "order": side,
                            "repeat": rep,
                            "status": str(status),
                            "winner": winner if status == OutputStatus.VALID else None,
                        }
                    )
    return CalibrationStudy(
        study=study,
        human=human,
        judge_outputs=pd.DataFrame(outputs),
        judges=sorted(judges),
        families=dict(JUDGE_FAMILIES),
        excluded_comparison=excluded,
    )
