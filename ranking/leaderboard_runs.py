"""The stored, queued leaderboard behind the researcher page and the REST endpoint
(docs/protocol.md "Deployment leaderboard"), and its publication.

``leaderboard_create`` records a queued run (``ranking.tasks.leaderboard_start`` queues it).
``leaderboard_run`` claims it, snapshots its inputs and splits the bootstrap into seeded chunks
(rows ``start..stop`` of one count matrix); each ``leaderboard_chunk_run`` stores its resamples,
and the one that stores the last merges them (``merge_bootstrap_results``): bit-identical to one
``bootstrap_bradley_terry`` call, and the same report as ``ranking.leaderboard.leaderboard_compute``.
``leaderboard_publish`` publishes or unpublishes a finished one (audited).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict
from annotation.models import Study
from annotation.services.audit import audit_record
from calibration.models import CoefficientSet
from ranking.leaderboard import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PROGRESS_PREPARED,
    add_judge_allocation,
    bootstrap_chunk,
    check_davidson_identified,
    check_leaderboard_options,
    check_objective,
    check_objective_coverage,
    check_ranking_model,
    chunk_bounds,
    coefficient_set_exclusions,
    davidson_bootstrap_chunk,
    inputs_from_snapshot,
    inputs_snapshot,
    leaderboard_prepare,
    leaderboard_report,
    leaderboard_source,
    objective_correlations,
)
from ranking.models import Leaderboard, LeaderboardChunk, RankingModel
from ranking.versions import scoring_provenance

if TYPE_CHECKING:
    from stats.bradley_terry import BootstrapResult
    from stats.davidson import DavidsonBootstrap

# Resamples per bootstrap chunk task (ARBITER_LEADERBOARD_CHUNK_RESAMPLES overrides).
DEFAULT_CHUNK_RESAMPLES = 500


def _chunk_resamples() -> int:
    return int(getattr(settings, "ARBITER_LEADERBOARD_CHUNK_RESAMPLES", DEFAULT_CHUNK_RESAMPLES))


def leaderboard_create(
    *,
    study: Study,
    coefficient_set: CoefficientSet | str | None,
    resamples: Any = DEFAULT_RESAMPLES,
    seed: Any = DEFAULT_SEED,
    use_human_labels: bool = False,
    objective: Mapping[str, Any] | None = None,
    user: Any = None,
    model: Any = RankingModel.BRADLEY_TERRY,
) -> Leaderboard:
    """Create a queued Leaderboard (audited); ``ranking.tasks.leaderboard_start`` queues its run on commit.
    ``coefficient_set=None``: a leaderboard of the study's human votes (docs/protocol.md "Human
    leaderboard")."""
    resamples, seed = check_leaderboard_options(resamples, seed)
    model = check_ranking_model(model)
    cset = leaderboard_source(study=study, coefficient_set=coefficient_set)
    use_human_labels = bool(use_human_labels) and cset is not None
    checked = check_objective(study=study, objective=objective)
    leaderboard = Leaderboard.objects.create(
        study=study,
        coefficient_set=cset,
        resamples=resamples,
        seed=seed,
        use_human_labels=bool(use_human_labels),
        ranking_model=model,
        objective=checked,
        created_by=user if getattr(user, "is_authenticated", False) else None,
    )
    audit_record(
        action="leaderboard.compute",
        user=user,
        study=study,
        target=f"leaderboard {leaderboard.pk}",
        coefficients=leaderboard.source_name,
        resamples=resamples,
        seed=seed,
        use_human_labels=bool(use_human_labels),
        model=model,
    )
    return leaderboard


def leaderboard_fail(leaderboard_id: int, message: str) -> None:
    """Mark a leaderboard failed with a one-line reason (unless it already finished)."""
    Leaderboard.objects.filter(pk=leaderboard_id).exclude(status=Leaderboard.Status.DONE).update(
        status=Leaderboard.Status.FAILED, error=" ".join(message.split())[:2000], finished_at=timezone.now()
    )


def leaderboard_run(*, leaderboard_id: int, queue_chunk: Callable[[int, int], None]) -> str:
    """Claim a queued leaderboard, snapshot its inputs, and run or queue its bootstrap chunks.

    One chunk runs here; more are handed to ``queue_chunk(leaderboard_id, index)`` (the task
    module queues ``leaderboard_chunk_task``: the services do not import the tasks).
    """
    # A run whose worker died before it queued its chunks (chunks_total still 0) may be taken
    # over once the task time limit has passed; a finished or chunked run never is.
    stale = timezone.now() - timedelta(seconds=int(getattr(settings, "CELERY_TASK_TIME_LIMIT", 900)))
    claimed = (
        Leaderboard.objects.filter(pk=leaderboard_id)
        .filter(
            Q(status=Leaderboard.Status.QUEUED)
            | Q(status=Leaderboard.Status.RUNNING, chunks_total=0, started_at__lt=stale)
        )
        .update(status=Leaderboard.Status.RUNNING, started_at=timezone.now(), progress=0.0, error="")
    )
    if not claimed:
        return "not queued"
    leaderboard = Leaderboard.objects.select_related("study", "coefficient_set").get(pk=leaderboard_id)
    try:
        inputs = leaderboard_prepare(
            study=leaderboard.study,
            coefficient_set=leaderboard.coefficient_set,
            use_human_labels=leaderboard.use_human_labels,
        )
        if leaderboard.objective:
            # Fails early (before any bootstrap) when too few ranked systems have an objective score.
            check_objective_coverage(list(inputs.systems), leaderboard.objective)
        if leaderboard.ranking_model == RankingModel.DAVIDSON:
            check_davidson_identified(inputs)
        # Scores missing from the cache are computed here, in the background (docs/protocol.md
        # "Objective scores beside the rankings"); the merge reads them.
        from annotation.services.objective_scores import objective_scores_refresh, study_has_truth

        if study_has_truth(study=leaderboard.study):
            objective_scores_refresh(study=leaderboard.study)
    except (ArbiterError, ValueError) as exc:
        leaderboard_fail(leaderboard_id, str(exc))
        return "failed"
    bounds = chunk_bounds(leaderboard.resamples, _chunk_resamples())
    with transaction.atomic():
        LeaderboardChunk.objects.filter(leaderboard_id=leaderboard_id).delete()
        LeaderboardChunk.objects.bulk_create(
            LeaderboardChunk(leaderboard_id=leaderboard_id, index=k, start=lo, stop=hi)
            for k, (lo, hi) in enumerate(bounds)
        )
        snapshot = inputs_snapshot(inputs)
        if leaderboard.coefficient_set is not None:
            snapshot["judge_outputs"] = scoring_provenance(study=leaderboard.study, inputs=snapshot)
        Leaderboard.objects.filter(pk=leaderboard_id).update(
            inputs=snapshot, chunks_total=len(bounds), progress=PROGRESS_PREPARED
        )
    if len(bounds) == 1:
        return leaderboard_chunk_run(leaderboard_id=leaderboard_id, index=0)
    for k in range(len(bounds)):
        queue_chunk(leaderboard_id, k)
    return f"queued {len(bounds)} chunks"


def _chunk_document(part: BootstrapResult | DavidsonBootstrap) -> dict[str, Any]:
    from stats.davidson import DavidsonBootstrap

    if isinstance(part, DavidsonBootstrap):
        return {**_chunk_document(part.result), "tie_parameters": part.tie_parameters.tolist()}
    return {
        "scores": part.scores.tolist(),
        "ranks": part.ranks.tolist(),
        "max_iterations": part.max_iterations,
        "max_gradient_norm": part.max_gradient_norm,
    }


def _chunk_result(chunk: LeaderboardChunk, *, resamples: int, seed: int, n_systems: int) -> BootstrapResult:
    import numpy as np

    from stats.bradley_terry import BootstrapResult

    data = chunk.result
    scores = np.asarray(data["scores"], dtype=np.float64).reshape(chunk.stop - chunk.start, n_systems)
    ranks = np.asarray(data["ranks"], dtype=np.int64).reshape(chunk.stop - chunk.start, n_systems)
    # Per-chunk summaries are not stored: merge_bootstrap_results recomputes them from all rows.
    unknown = np.full((n_systems, 2), np.nan)
    return BootstrapResult(
        resamples=resamples,
        seed=seed,
        start=chunk.start,
        stop=chunk.stop,
        scores=scores,
        ranks=ranks,
        ci95=unknown,
        rank_ci95=unknown,
        rank1_share=np.full(n_systems, np.nan),
        max_iterations=int(data["max_iterations"]),
        max_gradient_norm=float(data["max_gradient_norm"]),
    )


def leaderboard_chunk_run(*, leaderboard_id: int, index: int) -> str:
    """Compute one bootstrap chunk of a running leaderboard, store it; the last one merges.

    Idempotent: a chunk already stored (a re-delivered task) is not recomputed; the merge happens
    once, under a row lock on the leaderboard.
    """
    leaderboard = Leaderboard.objects.filter(pk=leaderboard_id).select_related("coefficient_set").first()
    if leaderboard is None or leaderboard.status != Leaderboard.Status.RUNNING:
        return "not running"
    chunk = LeaderboardChunk.objects.filter(leaderboard_id=leaderboard_id, index=index).first()
    if chunk is None:
        return "no such chunk"
    if chunk.status != LeaderboardChunk.Status.DONE:
        try:
            inputs = inputs_from_snapshot(leaderboard.inputs)
            run_chunk = (
                davidson_bootstrap_chunk
                if leaderboard.ranking_model == RankingModel.DAVIDSON
                else bootstrap_chunk
            )
            part = run_chunk(
                inputs,
                resamples=leaderboard.resamples,
                seed=leaderboard.seed,
                start=chunk.start,
                stop=chunk.stop,
            )
        except (ArbiterError, ValueError, KeyError) as exc:
            leaderboard_fail(leaderboard_id, f"bootstrap chunk {index}: {exc}")
            return "failed"
        LeaderboardChunk.objects.filter(pk=chunk.pk, status=LeaderboardChunk.Status.PENDING).update(
            status=LeaderboardChunk.Status.DONE, result=_chunk_document(part), finished_at=timezone.now()
        )
    return _leaderboard_merge_if_complete(leaderboard_id)


def _leaderboard_merge_if_complete(leaderboard_id: int) -> str:
    import numpy as np

    from stats.bradley_terry import merge_bootstrap_results
    from stats.davidson import DavidsonBootstrap, merge_davidson_bootstraps

    with transaction.atomic():
        leaderboard = (
            # of=self: the coefficient set is an outer join (null for human votes), which PostgreSQL cannot lock.
            Leaderboard.objects.select_for_update(of=("self",))
            .select_related("coefficient_set")
            .filter(pk=leaderboard_id)
            .first()
        )
        if leaderboard is None or leaderboard.status != Leaderboard.Status.RUNNING:
            return "not running"
        chunks = list(LeaderboardChunk.objects.filter(leaderboard_id=leaderboard_id).order_by("index"))
        done = [c for c in chunks if c.status == LeaderboardChunk.Status.DONE]
        if len(done) < leaderboard.chunks_total:
            leaderboard.progress = PROGRESS_PREPARED + (1 - PROGRESS_PREPARED) * len(done) / max(
                1, leaderboard.chunks_total
            )
            leaderboard.save(update_fields=["progress"])
            return f"chunk stored ({len(done)}/{leaderboard.chunks_total})"
        try:
            inputs = inputs_from_snapshot(leaderboard.inputs)
            m = len(inputs.systems)
            results = [
                _chunk_result(c, resamples=leaderboard.resamples, seed=leaderboard.seed, n_systems=m)
                for c in done
            ]
            boot: BootstrapResult | DavidsonBootstrap = merge_bootstrap_results(results)
            if leaderboard.ranking_model == RankingModel.DAVIDSON:
                boot = merge_davidson_bootstraps(
                    [
                        DavidsonBootstrap(
                            result=r, tie_parameters=np.asarray(c.result["tie_parameters"], dtype=float)
                        )
                        for r, c in zip(results, done, strict=True)
                    ]
                )
            report = leaderboard_report(
                inputs=inputs,
                coefficient_set_name=leaderboard.coefficient_set.name if leaderboard.coefficient_set else None,
                boot=boot,
                use_human_labels=leaderboard.use_human_labels,
                objective=leaderboard.objective or None,
                coefficient_exclusions=coefficient_set_exclusions(leaderboard.coefficient_set)
                if leaderboard.coefficient_set
                else None,
            )
            from ranking.objective_scores import objective_section

            objective_scores = objective_section(
                study=leaderboard.study,
                systems=report["systems"],
                resamples=leaderboard.resamples,
                seed=leaderboard.seed,
                correlate=objective_correlations,
                refresh=False,
            )
            if objective_scores is not None:
                report["objective_scores"] = objective_scores
            if "judge_outputs" in leaderboard.inputs:
                report["judge_outputs"] = leaderboard.inputs["judge_outputs"]
            if leaderboard.coefficient_set is not None:
                add_judge_allocation(report, study=leaderboard.study, judges=leaderboard.inputs.get("judges"))
        except (ArbiterError, ValueError, KeyError) as exc:
            leaderboard.status = Leaderboard.Status.FAILED
            leaderboard.error = f"merging the bootstrap: {' '.join(str(exc).split())}"
            leaderboard.finished_at = timezone.now()
            leaderboard.save(update_fields=["status", "error", "finished_at"])
            return "failed"
        leaderboard.result = report
        leaderboard.status = Leaderboard.Status.DONE
        leaderboard.progress = 1.0
        leaderboard.finished_at = timezone.now()
        leaderboard.save(update_fields=["result", "status", "progress", "finished_at"])
        # The chunks' resamples are merged into the result's intervals; keep only the summary.
        LeaderboardChunk.objects.filter(leaderboard_id=leaderboard_id).update(result={})
    return "done"


def leaderboard_publish(*, leaderboard: Leaderboard, published: bool, user: Any = None) -> Leaderboard:
    """Publish (public link, no login) or unpublish a finished leaderboard; audited."""
    if published and leaderboard.status != Leaderboard.Status.DONE:
        raise Conflict(
            f"leaderboard {leaderboard.pk} is {leaderboard.status}; only a finished leaderboard can be published"
        )
    with transaction.atomic():
        changed = Leaderboard.objects.filter(pk=leaderboard.pk, published=not published).update(
            published=published, published_at=timezone.now() if published else None
        )
        if changed:
            audit_record(
                action="leaderboard.publish" if published else "leaderboard.unpublish",
                user=user,
                study=leaderboard.study,
                target=f"leaderboard {leaderboard.pk}",
                coefficients=leaderboard.source_name,
                public_token=leaderboard.public_token,
            )
    leaderboard.refresh_from_db(fields=["published", "published_at"])
    return leaderboard
