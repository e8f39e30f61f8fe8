"""Fitting an adaptive study's serve-time pair weights (``ServeWeights``; docs/protocol.md
"Serve-time choice"): what ``annotation.tasks.refit_serve_weights`` runs. Apart from
``annotation.services.serve_time``, which queues that task, so the imports do not circle."""

from __future__ import annotations

from typing import TYPE_CHECKING

from annotation.models import ServeWeights, Study

if TYPE_CHECKING:
    from annotation.selectors.allocation import AllocationState


def serve_weights_refit(*, study_id: int, state: AllocationState | None = None) -> ServeWeights | None:
    """Fit the study's votes (or take ``state``, a fit the caller just made) and store the rule's
    shares per pair (None: fewer than 2 systems)."""
    from annotation.selectors.allocation import allocation_state

    study = Study.objects.get(pk=study_id)
    state = state or allocation_state(study=study)
    if state is None:
        return None
    k = len(state.shares)
    floor = float(state.floor)
    rule = [max((float(x) - floor / k) / (1.0 - floor), 0.0) if floor < 1 else 1.0 / k for x in state.shares]
    total = sum(rule)
    rule = [x / total for x in rule] if total > 0 else [1.0 / k] * k
    weights, _ = ServeWeights.objects.update_or_create(
        study=study,
        defaults={"votes": state.votes, "systems": list(state.systems), "rule_shares": rule, "floor": floor,
                  "rule": state.rule},
    )
    return weights
