"""The poster demos through the services real users go through (``make_demo_study --kind K``).

The same road as the ``pairwise_reference`` demo (``demo.service``): draw a bundle of the kind
(docs/bundle-kinds.md) in a temporary folder, import it with ``study_import_bundle``, record the
ground truth in ``Study.options["demo"]``, schedule two blocks with ``blocks_schedule`` (targets:
simulated raters + 1, two attention checks per assignment), then let simulated study-link
participants pass the comprehension check (``comprehension_submit``), claim a slot
(``participant_claim``) and answer every trial (``trial_next`` / ``vote_submit``). One open slot
per block is left for a person clicking through the demo.

Simulated response times: the server measures a vote's ``response_ms`` from ``Trial.shown_at``;
like the reference demo, the simulation back-dates ``shown_at`` by the simulated time.

No system id or name is drawn in an image or written in a brief, question, item id or the
instructions: raters see trial tokens, the brief, the question and the pixels only.
"""

from __future__ import annotations

import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict
from annotation.models import Candidate, Comparison, Predicate, Study, Trial
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.comprehension import comprehension_question, comprehension_submit
from annotation.services.participants import (
    participant_claim,
    participant_rater_get_or_create,
    study_link_url,
)
from annotation.services.scheduling import blocks_schedule, schedule_units
from demo.kinds.base import DemoOptions, KindDemo, PosterKind
from demo.kinds.plan import KindPlan
from demo.kinds.simulation import (
    SIMULATED_RATERS_PER_BLOCK,
    KindAnswer,
    KindRater,
    StudyUnits,
    kind_raters,
    screened_out_rater,
)
from demo.service import DEMO_RESEARCHER, DemoStudyResult, demo_access_lines, demo_researcher_ensure
from demo.simulation import call_rng

DEMO_BLOCKS = 2
ATTENTION_CHECKS = 2


def _comprehension_pass(*, study: Study, rater: Any, attempts: int) -> str:
    """Answer the comprehension question: right at attempt ``attempts`` (0: wrong twice)."""
    question = comprehension_question(study)
    wrong = next(value for value, _ in question.choices if value != question.answer)
    state = "retry"
    attempt = 0
    while state == "retry":
        attempt += 1
        state = comprehension_submit(rater=rater, answer=question.answer if attempt == attempts else wrong)
    return state


def kind_simulate(
    *,
    kind: PosterKind,
    study: Study,
    plan: KindPlan,
    raters: tuple[KindRater, ...],
    screened: tuple[KindRater, ...],
    seed: int,
) -> dict[str, int]:
    """Simulated participants: comprehension check, claim, every trial answered (module docstring)."""
    counts = {
        "votes": 0,
        "raters": 0,
        "repeats": 0,
        "attention": 0,
        "attention_failed": 0,
        "comprehension_second": 0,
        "screened_out": 0,
    }
    units = StudyUnits(
        items={i.id: i for i in plan.items},
        predicates={p.id: p for p in plan.predicates},
        comparison_items={
            c.pk: (c.candidate_a.external_id, c.candidate_b.external_id)
            for c in Comparison.objects.filter(study=study).select_related("candidate_a", "candidate_b")
        },
        item_of_candidate=dict(Candidate.objects.filter(page__study=study).values_list("pk", "external_id")),
        predicate_of=dict(Predicate.objects.filter(study=study).values_list("pk", "external_id")),
    )
    for profile in screened:
        rater = participant_rater_get_or_create(
            study=study, external_id=profile.id, platform={"source": "demo simulation"}
        )
        if _comprehension_pass(study=study, rater=rater, attempts=0) == "failed":
            counts["screened_out"] += 1
    for profile in raters:
        rater = participant_rater_get_or_create(
            study=study, external_id=profile.id, platform={"source": "demo simulation"}
        )
        if _comprehension_pass(study=study, rater=rater, attempts=profile.comprehension_attempts) != "passed":
            raise ArbiterError(f"simulated rater {profile.id} did not pass the comprehension check")
        counts["comprehension_second"] += int(profile.comprehension_attempts == 2)
        assignment = participant_claim(study=study, rater=rater)
        answers: dict[int, KindAnswer] = {}
        checks_seen = 0
        while (view := trial_next(assignment=assignment)) is not None:
            trial = view.trial
            rng = call_rng(seed, plan.kind, "vote", profile.id, trial.position)
            fresh = kind.fresh_answer(rater=profile, trial=trial, units=units, rng=rng)
            original = answers.get(int(trial.repeat_of_id)) if trial.repeat_of_id is not None else None
            if trial.attention_expected:
                # The careless rater fails the first check they meet and passes the others.
                fail = profile.careless and checks_seen == 0
                answer = kind.attention_answer(
                    rater=profile,
                    expected=trial.attention_expected,
                    habit=fresh,
                    fail=fail,
                    rng=rng,
                )
                checks_seen += 1
                counts["attention"] += 1
                counts["attention_failed"] += int(fail)
            elif original is not None and rng.random() < 0.8:
                # A hidden repeat mostly gets the same answer again (test–retest consistency).
                answer = KindAnswer(
                    original.verdict,
                    original.confidence,
                    original.rationale,
                    original.ratings,
                    fresh.response_ms,
                )
                counts["repeats"] += 1
            else:
                answer = fresh
                counts["repeats"] += int(trial.is_repeat)
            answers[trial.pk] = answer
            # Simulated time: the trial was shown response_ms ago (the server measures from shown_at).
            Trial.objects.filter(pk=trial.pk).update(
                shown_at=timezone.now() - timedelta(milliseconds=answer.response_ms)
            )
            vote_submit(VoteInput(
                trial_token=trial.token,
                rater_id=rater.pk,
                verdict=answer.verdict,
                confidence=answer.confidence,
                axes={},
                rationale=answer.rationale,
                idempotency_key=view.idempotency_key,
                ratings=answer.ratings),
            )
            counts["votes"] += 1
        counts["raters"] += 1
    return counts


def kind_schedule(*, study: Study, per_block: int, seed: int) -> dict[str, int]:
    """Two blocks of half the units each; targets = simulated raters + 1 (the open slot)."""
    units = len(schedule_units(study))
    block_size = units // DEMO_BLOCKS
    if block_size < 2:
        raise ArbiterError(
            f"the demo has {units} units, too few for {DEMO_BLOCKS} blocks (give more --pages)"
        )
    min_gap = max(1, min(10, block_size // 2))
    repeats = min(2, block_size - min_gap + 1)
    blocks_schedule(
        study=study,
        blocks=DEMO_BLOCKS,
        block_size=block_size,
        repeats=repeats,
        min_gap=min_gap,
        raters=[per_block + 1] * DEMO_BLOCKS,
        seed=seed,
        checks=ATTENTION_CHECKS,
    )
    return {
        "blocks": DEMO_BLOCKS,
        "block_size": block_size,
        "hidden_repeats": repeats,
        "checks": ATTENTION_CHECKS,
        "units": units,
    }


def kind_demo_create(
    *,
    kind: PosterKind,
    slug: str,
    seed: int = 1,
    n_briefs: int | None = None,
    n_systems: int | None = None,
    votes: bool = True,
    with_users: bool = False,
    participant_link: bool = True,
    user: AbstractBaseUser | None = None,
) -> DemoStudyResult:
    """Create a demo study of ``kind`` (module docstring). Deterministic in ``seed``; one transaction."""
    started = time.monotonic()
    if seed < 0:
        raise ArbiterError("--seed must be a non-negative integer")
    if Study.objects.filter(slug=slug).exists():
        raise Conflict(f"a study with slug {slug!r} already exists (choose another --slug)")
    try:
        plan = kind.plan_make(slug=slug, seed=seed, n_briefs=n_briefs, n_systems=n_systems)
    except ValueError as exc:
        raise ArbiterError(str(exc)) from None
    per_block = SIMULATED_RATERS_PER_BLOCK if votes else 0
    raters = kind_raters(kind.kind, per_block * DEMO_BLOCKS, seed)
    screened = (screened_out_rater(),) if votes and kind.screens_out_one else ()
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix=f"arbiter-demo-{kind.kind}-") as tmp:
        folder = Path(tmp) / "bundle"
        kind.bundle_write(plan, folder)
        with transaction.atomic():
            study = study_import_bundle(path=folder, user=user)
            Study.objects.filter(pk=study.pk).update(
                options={**(study.options or {}), "demo": kind.truth(plan, raters, screened)}
            )
            study.refresh_from_db(fields=["options"])
            counts.update(kind_schedule(study=study, per_block=per_block, seed=seed))
            if votes:
                counts.update(
                    kind_simulate(
                        kind=kind, study=study, plan=plan, raters=raters, screened=screened, seed=seed
                    )
                )
            logins = [demo_researcher_ensure(study=study)] if with_users else []
            if not with_users:
                # An existing demo login (make run) also gets this study, without a new password.
                study.researchers.add(*get_user_model().objects.filter(username=DEMO_RESEARCHER))
    result = DemoStudyResult(study=study, logins=logins)
    result.counts = {
        "briefs": len(plan.briefs),
        "systems": len(plan.systems),
        "items": len(plan.items),
        "predicates": len(plan.predicates),
        "comparisons": plan.n_comparisons(),
        **counts,
    }
    result.participant_url = study_link_url(study=study) if participant_link else None
    result.seconds = time.monotonic() - started
    return result


def kind_counts_lines(kind: PosterKind, result: DemoStudyResult) -> list[str]:
    """Human-readable summary lines for the command."""
    c: dict[str, int] = result.counts
    units = kind.units_word
    made = f"briefs: {c['briefs']}, systems: {c['systems']}, items: {c['items']}" + kind.made_line(c)
    lines = [f"study: {result.study.slug} (kind {kind.kind})", made]
    if "blocks" in c:
        lines.append(
            f"blocks: {c['blocks']} of {c['block_size']} {units} ({c['hidden_repeats']} hidden repeats and "
            f"{c['checks']} attention checks per assignment); one open slot per block"
        )
    if "votes" in c:
        lines.append(
            f"simulated raters: {c['raters']}, votes: {c['votes']} (hidden repeats: {c['repeats']}, "
            f"attention checks: {c['attention']}, {c['attention_failed']} failed by the careless rater)"
        )
        lines.append(
            f"comprehension check: {c['raters']} passed ({c['comprehension_second']} at the second attempt), "
            f"{c['screened_out']} screened out"
        )
    return lines + demo_access_lines(result)


class PosterDemo(KindDemo):
    """``make_demo_study --kind K`` for a poster kind."""

    def __init__(self, poster: PosterKind) -> None:
        self.poster = poster
        self.kind = poster.kind

    def create(self, options: DemoOptions) -> DemoStudyResult:
        return kind_demo_create(
            kind=self.poster,
            slug=options.slug,
            seed=options.seed,
            n_briefs=options.pages,
            n_systems=options.systems,
            votes=options.votes,
            with_users=options.with_users,
        )

    def counts_lines(self, result: DemoStudyResult) -> list[str]:
        return kind_counts_lines(self.poster, result)
