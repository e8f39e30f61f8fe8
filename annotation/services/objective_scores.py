"""The objective scores of a study with ground truth (docs/protocol.md "Objective scores beside the
rankings"): each candidate's render scored against its page's ground truth by the objective
protocol (:func:`objective.score.score_page`), cached per candidate.

What is scored, per candidate of a page with ground truth:

- a rendered HTML output: its render's blocks (``CandidateBlocks``, kept from the render's
  ``dom.blocks`` when the study was made);
- a failed render: an empty page of the truth's size (nothing of it is visible, so nothing matches);
- an image output (a PNG system, or a render kept from before blocks existed, which ``new_study``
  renders again when it is given ground truth): not scored, and counted as such.

A score is computed once and kept (``ObjectiveScore``) with the digest of the truth and blocks it
came from: a refresh computes only the missing and the stale ones. The study page, the leaderboard
and ``new_study`` call :func:`objective_scores_refresh`; it reports its progress per candidate.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import QuerySet

from annotation.models import Candidate, CandidateBlocks, ObjectiveScore, PageTruth, Study
from annotation.progress import progress_step
from annotation.services.ground_truth import blocks_digest, page_score_json

if TYPE_CHECKING:
    from stats.objective_intervals import SystemObjective

STAGE = "scoring the renders against the ground truth"
NO_BLOCKS = "an image output (no DOM, so no blocks to score)"
FAILED_RENDER = "failed render"
BATCH = 200


@dataclass(frozen=True)
class ObjectiveTarget:
    """One candidate to score: its ids, its page's truth, and its blocks (None: a failed render,
    scored as an empty page)."""

    candidate_id: int
    page: str
    system: str
    truth: dict[str, Any]
    blocks: dict[str, Any] | None

    @property
    def digest(self) -> str:
        return blocks_digest(self.truth, self.blocks if self.blocks is not None else FAILED_RENDER)


@dataclass(frozen=True)
class ObjectiveRefresh:
    """What a refresh did: candidates scored now, kept from before, and left unscored (by reason)."""

    scored: int
    kept: int
    unscored: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.scored + self.kept


def study_has_truth(*, study: Study) -> bool:
    return PageTruth.objects.filter(page__study=study).exists()


def _candidates(study: Study) -> QuerySet[Candidate]:
    return Candidate.objects.filter(page__study=study, page__truth__isnull=False).order_by(
        "page__position", "page__external_id", "system__position", "system__external_id"
    )


def objective_targets(*, study: Study) -> tuple[list[ObjectiveTarget], dict[str, int]]:
    """The candidates the objective protocol scores, and the count of those it cannot, by reason."""
    truth = dict(PageTruth.objects.filter(page__study=study).values_list("page_id", "blocks"))
    blocks = dict(
        CandidateBlocks.objects.filter(candidate__page__study=study).values_list("candidate_id", "blocks")
    )
    targets: list[ObjectiveTarget] = []
    unscored: dict[str, int] = {}
    rows = _candidates(study).values_list(
        "pk", "page_id", "page__external_id", "system__external_id", "rendered"
    )
    for pk, page_id, page, system, rendered in rows:
        if rendered and pk not in blocks:
            unscored[NO_BLOCKS] = unscored.get(NO_BLOCKS, 0) + 1
            continue
        targets.append(
            ObjectiveTarget(
                candidate_id=pk,
                page=page,
                system=system,
                truth=truth[page_id],
                blocks=blocks.get(pk) if rendered else None,
            )
        )
    return targets, unscored


def objective_workers() -> int:
    """Processes a refresh scores in (``ARBITER_OBJECTIVE_WORKERS``; default: the machine's cores, at
    most 4). One scores in this process."""
    default = min(4, os.cpu_count() or 1)
    return max(1, int(getattr(settings, "ARBITER_OBJECTIVE_WORKERS", default)))


def objective_scores_refresh(
    *, study: Study, progress: Callable[[int, int], None] | None = None, workers: int | None = None
) -> ObjectiveRefresh:
    """Score every candidate whose score is missing or stale; keep the others. With more than one
    worker the pages are scored in a process pool (the protocol is pure Python and CPU-bound);
    the rows are written in batches as they come, so the study page's count moves. Idempotent:
    two refreshes at once write the same rows (one per candidate, the later one wins)."""
    targets, unscored = objective_targets(study=study)
    kept_digests = dict(
        ObjectiveScore.objects.filter(candidate__page__study=study).values_list("candidate_id", "digest")
    )
    todo = [t for t in targets if kept_digests.get(t.candidate_id) != t.digest]
    kept = len(targets) - len(todo)
    workers = objective_workers() if workers is None else max(1, workers)
    with ExitStack() as stack:
        pool = None
        if workers > 1 and len(todo) > 1:
            context = multiprocessing.get_context("forkserver")
            pool = stack.enter_context(ProcessPoolExecutor(max_workers=workers, mp_context=context))
        done = 0
        for start in range(0, len(todo), BATCH):
            batch = todo[start : start + BATCH]
            truths, blocks = [t.truth for t in batch], [t.blocks for t in batch]
            scores = (
                list(pool.map(page_score_json, truths, blocks, chunksize=4))
                if pool is not None
                else [page_score_json(truth, found) for truth, found in zip(truths, blocks, strict=True)]
            )
            rows = [
                ObjectiveScore(candidate_id=t.candidate_id, digest=t.digest, score=score)
                for t, score in zip(batch, scores, strict=True)
            ]
            ObjectiveScore.objects.bulk_create(
                rows,
                update_conflicts=True,
                unique_fields=["candidate"],
                update_fields=["digest", "score", "computed_at"],
            )
            done += len(batch)
            progress_step(STAGE, kept + done, len(targets))
            if progress is not None:
                progress(kept + done, len(targets))
    return ObjectiveRefresh(scored=len(todo), kept=kept, unscored=unscored)


@dataclass(frozen=True)
class ObjectiveStatus:
    """How far a study's objective scores are: pages with truth, candidates to score, scored now."""

    pages_with_truth: int
    to_score: int
    scored: int
    unscored: dict[str, int]

    @property
    def complete(self) -> bool:
        return self.scored >= self.to_score


def objective_status(*, study: Study) -> ObjectiveStatus:
    """The counts the study page shows (and polls every two seconds while a refresh runs): counted
    in the database, no blocks read. A score is dropped when its candidate is replaced
    (``import_study --update``), so the kept ones are the current ones."""
    candidates = Candidate.objects.filter(page__study=study, page__truth__isnull=False)
    image_outputs = candidates.filter(rendered=True, objective_blocks__isnull=True).count()
    return ObjectiveStatus(
        pages_with_truth=PageTruth.objects.filter(page__study=study).count(),
        to_score=candidates.count() - image_outputs,
        scored=ObjectiveScore.objects.filter(candidate__page__study=study).count(),
        unscored={NO_BLOCKS: image_outputs} if image_outputs else {},
    )


@dataclass(frozen=True)
class ObjectivePageRow:
    """One candidate's kept page scores (its page and system by their bundle ids)."""

    candidate_id: int
    page: str
    system: str
    rendered: bool
    score: dict[str, Any]


def objective_page_rows(*, study: Study, systems: Iterable[str] | None = None) -> list[ObjectivePageRow]:
    """The kept scores of the study's candidates (in page, then system order): the four page scores
    only, read from the JSON in the database (not the matches)."""
    from django.db.models.fields.json import KT

    rows = ObjectiveScore.objects.filter(candidate__page__study=study)
    if systems is not None:
        rows = rows.filter(candidate__system__external_id__in=list(systems))
    keys = ("teds", "teds_s", "d_text", "s_layout")
    found = (
        rows.order_by(
            "candidate__page__position", "candidate__page__external_id", "candidate__system__position"
        )
        .annotate(**{f"v_{k}": KT(f"score__{k}") for k in keys})
        .values_list(
            "candidate_id",
            "candidate__page__external_id",
            "candidate__system__external_id",
            "candidate__rendered",
            *(f"v_{k}" for k in keys),
        )
    )
    # The values come as text and are made numbers here: a SQL cast would turn a JSON null (a page
    # without a table has no TEDS) into 0.0 on SQLite.
    return [
        ObjectivePageRow(
            candidate_id=c,
            page=p,
            system=s,
            rendered=r,
            score={
                k: None if v is None or v == "null" else float(v) for k, v in zip(keys, values, strict=True)
            },
        )
        for c, p, s, r, *values in found
    ]


def objective_combine(teds: float | None, d_text: float, s_layout: float) -> float:
    """S_obj of a system from its three means: the objective protocol's own aggregation."""
    from objective.aggregate import objective_score

    return float(objective_score(teds, d_text, s_layout))


def system_objective_scores(
    *, study: Study, resamples: int, seed: int, systems: list[str] | None = None
) -> list[SystemObjective]:
    """Per system, the kept objective scores with their page-bootstrap intervals
    (:func:`stats.objective_intervals.objective_intervals`)."""
    from stats.objective_intervals import METRICS, objective_intervals

    scores: dict[str, dict[str, dict[str, Any]]] = {}
    pages: set[str] = set()
    for row in objective_page_rows(study=study, systems=systems):
        pages.add(row.page)
        scores.setdefault(row.system, {})[row.page] = {k: row.score.get(k) for k in METRICS[:4]}
    return objective_intervals(
        sorted(pages), scores, combine=objective_combine, resamples=resamples, seed=seed
    )
