"""ORM factories for the leaderboard and deployment-schedule tests
(docs/protocol.md "Deployment leaderboard").

``make_ranked_study`` builds a study with known system strengths, one shared StoredImage for
every rendered candidate (eligibility needs an image), human and deployment comparisons, judges
with seeded outputs (primary repeat 0, plus other orders/repeats that the leaderboard must ignore),
a frozen CoefficientSet, and optionally human votes. It returns the ground truth the tests need to
recompute everything independently: each comparison's canonical judge votes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

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
    StoredImage,
    Study,
    System,
    Trial,
    Vote,
)
from calibration.models import CoefficientSet
from judges.models import Judge, JudgeOutput, OutputStatus

LABELS = ("A", "TIE", "B")


def shared_image(tag: str = "rank") -> StoredImage:
    """One tiny StoredImage row reused by every rendered candidate (only its presence matters)."""
    sha = (tag.encode().hex() + "0" * 64)[:64]
    image, _ = StoredImage.objects.get_or_create(
        sha256=sha, defaults={"file": f"images/{sha}.png", "width": 4, "height": 4, "size_bytes": 10}
    )
    return image


@dataclass
class RankedStudy:
    study: Study
    systems: list[str]
    strengths: dict[str, float]
    judges: list[str]
    coefficients: dict[str, float]
    coefficient_set: CoefficientSet
    # comparison id -> (page, system_a, system_b, set)
    comparisons: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    # comparison id -> {judge: canonical winner of its primary-order, repeat-0 *valid* output}
    primary_votes: dict[str, dict[str, str]] = field(default_factory=dict)
    # comparison id -> human labels of valid main votes (non-voided, non-repeat)
    human_labels: dict[str, list[str]] = field(default_factory=dict)


def make_basic_study(
    slug: str,
    *,
    systems: Sequence[str],
    n_pages: int,
    failed: Iterable[tuple[int, str]] = (),
    researchers: Iterable[Any] = (),
) -> tuple[Study, dict[str, System], dict[str, Page], dict[tuple[str, str], Candidate]]:
    """A study with systems, pages p000… and candidates; ``failed`` = (page index, system) never rendered."""
    study = Study.objects.create(slug=slug, title=f"Study {slug}")
    study.researchers.add(*researchers)
    image = shared_image(slug)
    sys_rows = {
        sid: System.objects.create(study=study, external_id=sid, name=f"{sid.title()} System", position=i)
        for i, sid in enumerate(systems)
    }
    pages = {
        f"p{k:03d}": Page.objects.create(study=study, external_id=f"p{k:03d}", position=k)
        for k in range(n_pages)
    }
    failed_set = {(f"p{k:03d}", s) for k, s in failed}
    candidates: dict[tuple[str, str], Candidate] = {}
    rows = []
    for pid, page in pages.items():
        for sid, system in sys_rows.items():
            ok = (pid, sid) not in failed_set
            rows.append(Candidate(page=page, system=system, rendered=ok, image=image if ok else None))
    for cand in Candidate.objects.bulk_create(rows):
        candidates[(cand.page.external_id, cand.system.external_id)] = cand
    return study, sys_rows, pages, candidates


def make_ranked_study(
    slug: str = "ranked",
    *,
    systems: Sequence[str] = ("alpha", "beta", "gamma", "delta"),
    strengths: Sequence[float] = (1.2, 0.4, -0.3, -1.3),
    n_pages: int = 30,
    judges: Sequence[str] = ("judge-x", "judge-y", "judge-z"),
    coefficients: Sequence[float] = (0.45, 0.35, 0.3),
    seed: int = 3,
    n_human_pages: int = 8,
    researchers: Iterable[Any] = (),
    with_votes: bool = False,
    set_name: str = "frozen",
) -> RankedStudy:
    """Every page carries all pairs of systems; the first ``n_human_pages`` pages' comparisons are the
    human set, the rest deployment. Judges answer each comparison in 2 orders × 2 repeats; a few
    primary repeat-0 outputs are made invalid/failed/missing so those comparisons must be skipped."""
    rng = np.random.default_rng(seed)
    study, _sys_rows, pages, candidates = make_basic_study(
        slug, systems=systems, n_pages=n_pages, researchers=researchers
    )
    truth = dict(zip(systems, strengths, strict=True))
    judge_rows = [
        Judge.objects.get_or_create(
            name=name, defaults={"family": name.split("-")[-1], "provider": "imported"}
        )[0]
        for name in judges
    ]
    coefficient_set = CoefficientSet.objects.create(
        study=study,
        name=set_name,
        coefficients=dict(zip(judges, coefficients, strict=True)),
        report={"judges": list(judges)},
        source="import",
    )
    result = RankedStudy(
        study=study,
        systems=list(systems),
        strengths=truth,
        judges=list(judges),
        coefficients=dict(zip(judges, coefficients, strict=True)),
        coefficient_set=coefficient_set,
    )
    comparisons = []
    counter = 0
    for k, pid in enumerate(pages):
        for s, t in combinations(systems, 2):
            a, b = (s, t) if rng.random() < 0.5 else (t, s)
            counter += 1
            cset = ComparisonSet.HUMAN if k < n_human_pages else ComparisonSet.DEPLOYMENT
            cid = f"c{counter:04d}"
            comparisons.append(
                Comparison(
                    study=study,
                    external_id=cid,
                    page=pages[pid],
                    candidate_a=candidates[(pid, a)],
                    candidate_b=candidates[(pid, b)],
                    set=cset,
                )
            )
            result.comparisons[cid] = (pid, a, b, str(cset))
    created = Comparison.objects.bulk_create(comparisons)
    outputs = []
    skip_plan = {0: "invalid", 1: "failed", 2: "missing", 3: "repeat1-only"}
    for n, comp in enumerate(created):
        pid, a, b, _ = result.comparisons[comp.external_id]
        prob_a = 1.0 / (1.0 + np.exp(-(truth[a] - truth[b])))
        result.primary_votes[comp.external_id] = {}
        for j, judge in enumerate(judge_rows):
            # Comparisons 5, 17, 29, 41 lose their primary repeat-0 output from one judge (4 ways).
            broken = skip_plan.get((n - 5) // 12) if n % 12 == 5 and j == n % len(judge_rows) else None
            for order in ("primary", "swapped"):
                for repeat in (0, 1):
                    r = rng.random()
                    winner = "A" if r < prob_a * 0.85 else ("TIE" if r < prob_a * 0.85 + 0.15 else "B")
                    status = OutputStatus.VALID
                    is_canonical = order == "primary" and repeat == 0
                    if is_canonical and broken == "missing":
                        continue
                    if is_canonical and broken == "repeat1-only":
                        continue
                    if is_canonical and broken in ("invalid", "failed"):
                        status = OutputStatus.INVALID if broken == "invalid" else OutputStatus.FAILED
                    outputs.append(
                        JudgeOutput(
                            judge=judge,
                            comparison=comp,
                            order=order,
                            repeat=repeat,
                            status=status,
                            winner=winner if status == OutputStatus.VALID else "",
                            confidence=3 if status == OutputStatus.VALID else None,
                        )
                    )
                    if is_canonical and status == OutputStatus.VALID:
                        result.primary_votes[comp.external_id][judge.name] = winner
    JudgeOutput.objects.bulk_create(outputs)
    if with_votes:
        add_votes(result, rng=rng)
    return result


def add_votes(ranked: RankedStudy, *, rng: np.random.Generator, n_raters: int = 3) -> None:
    """Human votes on the human-set comparisons: ``n_raters`` finished assignments, one voided
    assignment (ignored) and one hidden repeat per rater (ignored); some CANNOT_JUDGE votes."""
    study = ranked.study
    human = [cid for cid, row in ranked.comparisons.items() if row[3] == ComparisonSet.HUMAN]
    comps = {c.external_id: c for c in Comparison.objects.filter(study=study, external_id__in=human)}
    block = Block.objects.create(study=study, name="block-1", position=0, target_raters=n_raters)
    BlockItem.objects.bulk_create(
        BlockItem(block=block, position=i, comparison=comps[cid]) for i, cid in enumerate(human)
    )
    for slot in range(n_raters + 1):
        voided = slot == n_raters
        rater = Rater.objects.create(study=study, external_id=f"r{slot:02d}")
        assignment = Assignment.objects.create(
            block=block,
            slot=slot,
            rater=rater,
            state=AssignmentState.VOIDED if voided else AssignmentState.FINISHED,
        )
        first_trial = None
        for position, cid in enumerate(human):
            _, a, b, _ = ranked.comparisons[cid]
            trial = Trial.objects.create(
                assignment=assignment, position=position, comparison=comps[cid], swapped=bool(position % 2)
            )
            first_trial = first_trial or trial
            prob_a = 1.0 / (1.0 + np.exp(-(ranked.strengths[a] - ranked.strengths[b])))
            r = rng.random()
            label = (
                "A"
                if r < prob_a * 0.8
                else ("TIE" if r < prob_a * 0.8 + 0.1 else ("CANNOT_JUDGE" if r > 0.97 else "B"))
            )
            Vote.objects.create(trial=trial, label=label, confidence=3)
            if not voided and label in LABELS:
                ranked.human_labels.setdefault(cid, []).append(label)
        repeat = Trial.objects.create(
            assignment=assignment,
            position=len(human),
            comparison=first_trial.comparison,
            swapped=first_trial.swapped,
            is_repeat=True,
            repeat_of=first_trial,
        )
        Vote.objects.create(trial=repeat, label="B", confidence=1)
