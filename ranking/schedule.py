"""The deployment schedule written to the study (docs/protocol.md "Deployment leaderboard",
"Commands": ``make_schedule``).

``deployment_schedule_create`` checks the request, asks the pure ``ranking.deployment_schedule``
for the comparisons, and writes them as the study's ``deployment`` set in one audited
transaction; what it reads comes from ``ranking.selectors``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from django.db import transaction

from annotation.errors import ArbiterError, Conflict, ValidationFailed
from annotation.models import Candidate, Comparison, ComparisonSet, Page, Study, System
from annotation.services.audit import audit_record
from ranking.deployment_schedule import DeploymentSchedule, make_deployment_schedule
from ranking.leaderboard import DEFAULT_SEED
from ranking.selectors import deployment_external_ids, schedule_eligible_pages, schedule_existing_human


@dataclass(frozen=True)
class DeploymentScheduleOutcome:
    """What ``deployment_schedule_create`` wrote: ids of the new comparisons and the quotas."""

    created: int
    replaced: int
    first_id: str
    last_id: str
    schedule: DeploymentSchedule

    def lines(self) -> list[str]:
        q = self.schedule.quota
        ids = f" ({self.first_id}–{self.last_id})" if self.created else ""
        return [
            f"created {self.created} deployment comparisons{ids}, seed {self.schedule.seed}"
            + (f"; replaced {self.replaced}" if self.replaced else ""),
            f"total {q.n_total} comparisons ({q.n_existing} human-study kept and counted)",
            f"pair counts {q.pair_count_min}–{q.pair_count_max} over {q.n_pairs} pairs ({q.pairs_at_max} at {q.pair_count_max})",
            f"appearances {q.appearances_min}–{q.appearances_max} per system",
            f"pages used {q.n_pages_used} (comparisons per page {q.page_load_min}–{q.page_load_max})",
        ]


_D_ID = re.compile(r"^d(\d+)$")


def deployment_schedule_create(
    *, study: Study, comparisons: Any, seed: Any = DEFAULT_SEED, replace: bool = False, user: Any = None
) -> DeploymentScheduleOutcome:
    """docs/protocol.md "Deployment leaderboard" deployment comparisons for ``study``: N in total, the
    human-study ones included.

    Eligible pages only (both candidates rendered with an image); pair counts and appearances
    balanced to within one; seeded. Writes the new Comparison rows (set ``deployment``, ids
    ``d00001``… after any existing ``d<n>`` id) in one transaction. Refused when the study already
    has deployment comparisons, unless ``replace`` and none of them has judge outputs or trials.
    """
    try:
        n = int(str(comparisons).strip())
    except ValueError:
        raise ValidationFailed(
            f"expected a positive integer, got {comparisons!r}", field="comparisons"
        ) from None
    if n < 1:
        raise ValidationFailed(f"expected a positive integer, got {n}", field="comparisons")
    try:
        seed = int(str(seed).strip())
    except ValueError:
        raise ValidationFailed(f"expected a non-negative integer, got {seed!r}", field="seed") from None
    if seed < 0:
        raise ValidationFailed(f"expected a non-negative integer, got {seed}", field="seed")
    existing_deployment = Comparison.objects.filter(study=study, set=ComparisonSet.DEPLOYMENT)
    n_existing_deployment = existing_deployment.count()
    if n_existing_deployment:
        if not replace:
            raise Conflict(
                f"study {study.slug} already has {n_existing_deployment} deployment comparisons; "
                f"use --replace to replace them (allowed only while none has judge outputs or trials)"
            )
        in_use = existing_deployment.filter(judge_outputs__isnull=False).distinct().count()
        in_use += existing_deployment.filter(trials__isnull=False).distinct().count()
        if in_use:
            raise Conflict(
                f"study {study.slug} already has {n_existing_deployment} deployment comparisons and some have judge "
                f"outputs or trials; a schedule in use cannot be replaced"
            )
    systems = list(
        System.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("external_id", flat=True)
    )
    pages = schedule_eligible_pages(study=study)
    existing = schedule_existing_human(study=study)
    try:
        schedule = make_deployment_schedule(systems, pages, existing, n, seed=seed)
    except ValueError as exc:
        raise ArbiterError(f"cannot schedule {n} comparisons for study {study.slug}: {exc}") from None
    page_ids = dict(Page.objects.filter(study=study).values_list("external_id", "id"))
    candidate_ids = {
        (page, system): cid
        for cid, page, system in Candidate.objects.filter(
            page__study=study, rendered=True, image__isnull=False
        ).values_list("id", "page__external_id", "system__external_id")
    }
    with transaction.atomic():
        # Serialize schedule writes per study; a concurrent run that got here first wins.
        Study.objects.select_for_update().filter(pk=study.pk).first()
        if (
            Comparison.objects.filter(study=study, set=ComparisonSet.DEPLOYMENT).count()
            != n_existing_deployment
        ):
            raise Conflict(
                f"the deployment comparisons of study {study.slug} changed meanwhile; run the command again"
            )
        replaced = 0
        if n_existing_deployment:
            Comparison.objects.filter(study=study, set=ComparisonSet.DEPLOYMENT).delete()
            replaced = n_existing_deployment
        numbers = [
            int(match.group(1)) for x in deployment_external_ids(study=study) if (match := _D_ID.match(x))
        ]
        first = max(numbers, default=0) + 1
        width = max(5, len(str(first + len(schedule.comparisons) - 1)))
        rows = [
            Comparison(
                study=study,
                external_id=f"d{first + k:0{width}d}",
                page_id=page_ids[page],
                candidate_a_id=candidate_ids[(page, a)],
                candidate_b_id=candidate_ids[(page, b)],
                set=ComparisonSet.DEPLOYMENT,
            )
            for k, (page, a, b) in enumerate(schedule.comparisons)
        ]
        Comparison.objects.bulk_create(rows, batch_size=2000)
        audit_record(
            action="schedule.deployment",
            user=user,
            study=study,
            target=f"{len(rows)} deployment comparisons",
            comparisons=n,
            seed=seed,
            replaced=replaced,
            quota=asdict(schedule.quota),
        )
    return DeploymentScheduleOutcome(
        created=len(rows),
        replaced=replaced,
        first_id=rows[0].external_id if rows else "",
        last_id=rows[-1].external_id if rows else "",
        schedule=schedule,
    )
