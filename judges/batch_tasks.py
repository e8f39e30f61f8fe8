"""The Celery task that polls provider batches (Celery beat ``judges.poll_batches``).

Not in :mod:`judges.tasks`: the batch service starts runs (``judges.services.runs``), which queue
``judges.tasks.call_judge``; here the imports only go one way. The worker imports this module
through ``CELERY_IMPORTS`` (autodiscovery finds ``tasks`` modules only).
"""

from __future__ import annotations

from celery import shared_task

from judges.services.batches import judge_batches_poll


@shared_task(name="judges.poll_batches", ignore_result=True)
def poll_batches() -> dict[str, int]:
    """Store the results of provider batches that have finished (Celery beat)."""
    return judge_batches_poll()
