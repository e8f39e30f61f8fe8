"""Fitting an adaptive study's serve-time pair weights (``ServeWeights``; docs/protocol.md
"Serve-time choice"): what ``annotation.tasks.refit_serve_weights`` runs. Apart from
``annotation.services.serve_time``, which queues that task, so the imports do not circle."""

from __future__ import annotations

from annotation.models import ServeWeights, Study, System


def serve_weights_refit(*, study_id: int) -> ServeWeights | None:
    """Fit the study's valid main votes and store the allocation rule's shares per pair (floor
    excluded; None: fewer than 2 systems, or a top-k target that names them all).

    Only what the shares need: the votes per pair (``study_pair_votes``, one query), the fit and the
    rule, with ``allocation_state``'s generator seed, so the shares are those the study page shows
    (no stopping rule, no estimate of the votes still needed)."""
    import numpy as np

    from annotation.selectors.allocation import allocation_target, study_pair_votes
    from stats.allocation import UNIFORM_FLOOR, adaptive_rule, allocation_weights, fit_pairs

    study = Study.objects.get(pk=study_id)
    systems, votes, points = study_pair_votes(study)
    target = allocation_target(study)
    if len(systems) < 2 or (target.kind == "top_k" and target.k >= len(systems)):
        return None
    n_votes = int(votes.sum())
    rule = adaptive_rule(target.kind)
    fit = fit_pairs(votes[None, :], points[None, :])
    shares = allocation_weights(rule, fit, target, rng=np.random.default_rng([int(study.seed), n_votes, 31]))[0]
    pks = dict(System.objects.filter(study=study).values_list("external_id", "pk"))
    weights, _ = ServeWeights.objects.update_or_create(
        study=study,
        defaults={"votes": n_votes, "systems": list(systems), "system_ids": [pks[s] for s in systems],
                  "rule_shares": [float(x) for x in shares], "floor": UNIFORM_FLOOR, "rule": rule},
    )
    return weights
