"""Celery tasks of the annotation app: thin, take an id, call one service."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="annotation.refit_serve_weights", ignore_result=True)
def refit_serve_weights(study_id: int) -> int:
    """Refit an adaptive study's serve-time pair weights from its stored votes; the votes fitted."""
    from annotation.services.serve_weights import serve_weights_refit

    weights = serve_weights_refit(study_id=int(study_id))
    return weights.votes if weights is not None else 0
