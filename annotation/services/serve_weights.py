"""Fitting an adaptive study's serve-time pair weights (``ServeWeights``; docs/protocol.md
"Serve-time choice"): what ``annotation.tasks.refit_serve_weights`` runs. Apart from
``annotation.services.serve_time``, which queues that task, so the imports do not circle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from annotation.models import AssignmentState, ServeWeights, Study, System, Vote

if TYPE_CHECKING:
    from annotation.selectors.allocation import AllocationState


def serve_weights_refit(*, study_id: int, state: AllocationState | None = None) -> ServeWeights | None:
    """Fit the study's votes (or take ``state``, a fit the caller just made) and store the rule's
    shares per pair (None: fewer than 2 systems).

    Without ``state`` only what the shares need is computed: the valid main votes per pair in one
    query, the fit and the rule (no stopping rule, no estimate of the votes still needed), so a
    refit stays cheap however often the serves ask for it."""
    import numpy as np

    from annotation.selectors.allocation import allocation_target
    from stats.allocation import UNIFORM_FLOOR, adaptive_rule, allocation_weights, fit_pairs, pair_column

    study = Study.objects.get(pk=study_id)
    systems = list(System.objects.filter(study=study).order_by("position", "external_id").values_list("pk", "external_id"))
    m = len(systems)
    target = allocation_target(study)
    if m < 2 or (target.kind == "top_k" and target.k >= m):
        return None
    k = m * (m - 1) // 2
    if state is not None:
        shares, floor, rule_name, n_votes = [float(x) for x in state.shares], float(state.floor), state.rule, state.votes
    else:
        index = {pk: i for i, (pk, _) in enumerate(systems)}
        votes, points = np.zeros(k), np.zeros(k)
        for a, b, label in valid_main_votes(study):
            if a in index and b in index:
                i, j = index[a], index[b]
                column = int(pair_column(np.array(i), np.array(j), m))
                y = {"A": 1.0, "TIE": 0.5, "B": 0.0}[label]
                votes[column] += 1
                points[column] += y if i < j else 1.0 - y
        fit = fit_pairs(votes[None, :], points[None, :])
        n_votes = int(votes.sum())
        rule_name = adaptive_rule(target.kind)
        floor = UNIFORM_FLOOR
        rule_part = allocation_weights(rule_name, fit, target, rng=np.random.default_rng([int(study.seed), n_votes, 31]))[0]
        shares = [floor / k + (1.0 - floor) * float(x) for x in rule_part]
    rule = [max((x - floor / k) / (1.0 - floor), 0.0) if floor < 1 else 1.0 / k for x in shares]
    total = sum(rule)
    rule = [x / total for x in rule] if total > 0 else [1.0 / k] * k
    weights, _ = ServeWeights.objects.update_or_create(
        study=study,
        defaults={"votes": n_votes, "systems": [external for _, external in systems],
                  "system_ids": [pk for pk, _ in systems], "rule_shares": rule, "floor": floor, "rule": rule_name},
    )
    return weights


def valid_main_votes(study: Study) -> list[tuple[int, int, str]]:
    """(system a id, system b id, label) of the study's valid main votes: A, B or TIE, no hidden
    repeat, gold or attention trial, no voided assignment (as ``allocation_state`` fits)."""
    return list(
        Vote.objects.filter(
            trial__assignment__block__study=study, trial__is_repeat=False, trial__attention_expected="",
            label__in=["A", "B", "TIE"],
        )
        .exclude(trial__assignment__state=AssignmentState.VOIDED)
        .values_list("trial__comparison__candidate_a__system_id", "trial__comparison__candidate_b__system_id", "label")
    )
