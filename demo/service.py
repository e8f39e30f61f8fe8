"""Create the demo study through the same services real users go through (``make_demo_study``).

1. Draw a docs/protocol.md "Files" bundle (``demo.bundle``) in a temporary folder and import it with
   ``study_import_bundle`` — exactly what ``import_study`` does.
2. Record the ground truth (the systems' latent abilities, the simulated raters and judges) in
   ``study.options["demo"]``, so later analyses can be checked against it.
3. Schedule two blocks with ``blocks_schedule`` (targets: simulated raters + 3), then let each
   simulated rater claim a slot as a study-link participant (``participant_claim``) and answer
   every trial with ``trial_next`` / ``vote_submit``. Three open slots per block are left for
   people clicking through the demo (the link can be tried several times).
4. Write the simulated judges' raw replies as a docs/protocol.md "Files" JSONL file and import it with
   ``judge_outputs_import_jsonl`` (validation and canonicalization happen there).

Everything runs in one transaction: a failure leaves no study behind (image files the import
already published stay in the media folder; they are content-addressed, so a retry reuses them).

Layering: the ``demo`` app sits on top of every other app (it is a fixture of the whole
product), so it may import from all of them.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db import transaction
from django.utils import timezone

from annotation.errors import ArbiterError, Conflict
from annotation.models import Comparison, Study, Trial
from annotation.progress import progress_step
from annotation.roles import ADMIN, RESEARCHER, ensure_groups
from annotation.services.answers import VoteInput, trial_next, vote_submit
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.participants import (
    participant_claim,
    participant_rater_get_or_create,
    study_link_url,
)
from annotation.services.scheduling import blocks_schedule
from demo.bundle import DemoPlan, demo_bundle_write, demo_plan_make
from demo.simulation import (
    JUDGE_PROFILES,
    RaterProfile,
    SimulatedAnswer,
    call_rng,
    judge_outputs_jsonl_write,
    plan_evidence,
    rater_answer,
    rater_profiles,
    rater_repeat_answer,
)
from judges.models import Judge, Provider

DEMO_RESEARCHER = "researcher"
SIMULATED_RATERS_PER_BLOCK = 5
# Open places per block beyond the simulated raters, so a newcomer can try the link several times.
OPEN_PLACES_PER_BLOCK = 3
DEMO_BLOCKS = 2


@dataclass
class DemoStudyResult:
    study: Study
    counts: dict[str, int] = field(default_factory=dict)
    participant_url: str | None = None
    logins: list[tuple[str, str]] = field(default_factory=list)  # (username, password or a note)
    seconds: float = 0.0


def demo_truth_record(*, study: Study, plan: DemoPlan, raters: tuple[RaterProfile, ...]) -> None:
    """Store what the simulation knows (abilities, rater and judge profiles) in ``study.options``."""
    options = dict(study.options or {})
    options["demo"] = {
        "seed": plan.seed,
        "abilities": plan.abilities,
        "candidate_quality": {f"{c.page}/{c.system}": c.quality for c in plan.candidates.values()},
        "failed_renders": sorted(f"{c.page}/{c.system}" for c in plan.candidates.values() if not c.rendered),
        "raters": {
            r.id: {"noise": r.noise, "position_bias": r.position_bias, "tie_band": r.tie_band,
                   "repeat_consistency": r.repeat_consistency}
            for r in raters
        },
        "judges": {
            j.name: {"family": j.family, "model": j.model, "noise": j.noise, "position_bias": j.position_bias,
                     "prose_rate": j.prose_rate, "note": j.note}
            for j in JUDGE_PROFILES
        },
    }
    study.options = options
    study.save(update_fields=["options"])


def demo_schedule_and_vote(
    *, study: Study, plan: DemoPlan, raters: tuple[RaterProfile, ...], simulate: bool, seed: int
) -> dict[str, int]:
    """Blocks with ``OPEN_PLACES_PER_BLOCK`` open slots beyond the simulated raters, who answer all trials."""
    n_human = len(plan.human())
    block_size = n_human // DEMO_BLOCKS
    if block_size < 2:
        return {"blocks": 0, "votes": 0, "raters": 0}
    min_gap = max(1, min(10, block_size // 2))
    repeats = min(3, block_size - min_gap + 1)
    per_block = SIMULATED_RATERS_PER_BLOCK if simulate else 0
    blocks_schedule(
        study=study,
        blocks=DEMO_BLOCKS,
        block_size=block_size,
        repeats=repeats,
        min_gap=min_gap,
        raters=[per_block + OPEN_PLACES_PER_BLOCK] * DEMO_BLOCKS,
        seed=seed,
    )
    counts = {"blocks": DEMO_BLOCKS, "votes": 0, "raters": 0, "repeats": 0}
    if not simulate:
        return counts
    comparisons = {
        c.pk: c
        for c in Comparison.objects.filter(study=study).select_related("page", "candidate_a__system", "candidate_b__system")
    }
    simulated = raters[: per_block * DEMO_BLOCKS]
    sloppy = simulated[-1].id
    for profile in simulated:
        rater = participant_rater_get_or_create(
            study=study, external_id=profile.id, platform={"source": "demo simulation"}
        )
        assignment = participant_claim(study=study, rater=rater)
        answers: dict[int, SimulatedAnswer] = {}
        while (view := trial_next(assignment=assignment)) is not None:
            trial = view.trial
            comparison = comparisons[trial.comparison_id]  # type: ignore[index]
            evidence = plan_evidence(
                plan,
                comparison.page.external_id,
                comparison.candidate_a.system.external_id,
                comparison.candidate_b.system.external_id,
            )
            rng = call_rng(seed, "vote", profile.id, comparison.external_id, int(trial.is_repeat))
            original = answers.get(trial.repeat_of_id) if trial.repeat_of_id is not None else None
            if trial.is_repeat and original is not None:
                answer = rater_repeat_answer(
                    profile=profile, original=original, evidence=evidence, swapped=trial.swapped, rng=rng
                )
                counts["repeats"] += 1
            elif profile.id == sloppy and view.number == 3:
                # The sloppy rater always gives up on one trial: the demo shows a CANNOT_JUDGE for sure.
                answer = SimulatedAnswer("CANNOT_JUDGE", 1, {}, "image did not load", 4000)
            else:
                answer = rater_answer(profile=profile, evidence=evidence, swapped=trial.swapped, rng=rng)
            answers[trial.pk] = answer
            # Simulated time: the trial was shown response_ms ago (the server measures from shown_at).
            Trial.objects.filter(pk=trial.pk).update(shown_at=timezone.now() - timedelta(milliseconds=answer.response_ms))
            vote_submit(VoteInput(
                trial_token=trial.token,
                rater_id=rater.pk,
                verdict=answer.verdict,
                confidence=answer.confidence,
                axes=answer.axes,
                rationale=answer.rationale,
                idempotency_key=view.idempotency_key),
            )
            counts["votes"] += 1
        counts["raters"] += 1
    return counts


def demo_researcher_ensure(*, study: Study, password: str | None = None) -> tuple[str, str]:
    """Create or reset the demo researcher (group researcher, staff for the admin) on the study.

    The password comes from ``password``, else ``ARBITER_DEMO_PASSWORD``, else a new random one.
    Returns (username, what to print): a generated password is printed once; one taken from the
    environment is not echoed.
    """
    ensure_groups()
    shown: str | None = None
    if not password:
        password = os.environ.get("ARBITER_DEMO_PASSWORD") or ""
        shown = "(password from $ARBITER_DEMO_PASSWORD)" if password else None
    if not password:
        password = secrets.token_urlsafe(12)
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=DEMO_RESEARCHER)
    user.is_staff = True  # type: ignore[attr-defined]
    # The demo login is the demo's admin: every page and button it is shown (the Django admin
    # included) works for it (issue 17).
    user.is_superuser = True  # type: ignore[attr-defined]
    user.is_active = True  # type: ignore[attr-defined]
    user.set_password(password)
    user.save()
    user.groups.add(Group.objects.get(name=RESEARCHER), Group.objects.get(name=ADMIN))  # type: ignore[attr-defined]
    study.researchers.add(user)
    return DEMO_RESEARCHER, shown or password


DEMO_JUDGE = "demo-judge"


def demo_judge_ensure() -> Judge:
    """The built-in demo judge (provider ``demo``, judges.providers.demo): press "Run judges" on the
    demo study and it answers locally from the ground truth, no network or API key needed."""
    judge, _ = Judge.objects.get_or_create(
        name=DEMO_JUDGE,
        defaults={"provider": Provider.DEMO, "family": "demo", "model": "ground-truth", "concurrency": 4},
    )
    return judge


def demo_study_create(
    *,
    slug: str = "demo",
    seed: int = 1,
    n_pages: int = 40,
    n_systems: int = 6,
    votes: bool = True,
    judges: bool = True,
    with_users: bool = False,
    participant_link: bool = True,
    user: AbstractBaseUser | None = None,
) -> DemoStudyResult:
    """Create the synthetic demo study (see the module docstring). Deterministic in ``seed``.

    ``participant_link=False`` skips building the study link (it loads the whole URL
    configuration, a second or two the tests do not need).
    """
    started = time.monotonic()
    if seed < 0:
        raise ArbiterError("--seed must be a non-negative integer")
    if Study.objects.filter(slug=slug).exists():
        raise Conflict(f"a study with slug {slug!r} already exists (choose another --slug)")
    try:
        plan = demo_plan_make(slug=slug, seed=seed, n_pages=n_pages, n_systems=n_systems)
    except ValueError as exc:
        raise ArbiterError(str(exc)) from None
    raters = rater_profiles(SIMULATED_RATERS_PER_BLOCK * DEMO_BLOCKS, seed)
    result_counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="arbiter-demo-") as tmp:
        folder = Path(tmp) / "bundle"
        progress_step("drawing the pages and candidates")
        demo_bundle_write(plan, folder)
        jsonl = Path(tmp) / "judges.jsonl"
        n_lines = judge_outputs_jsonl_write(plan=plan, path=jsonl, seed=seed) if judges else 0
        with transaction.atomic():
            study = study_import_bundle(path=folder, user=user)
            demo_truth_record(study=study, plan=plan, raters=raters)
            progress_step("scheduling and simulating the raters")
            result_counts.update(demo_schedule_and_vote(study=study, plan=plan, raters=raters, simulate=votes, seed=seed))
            if judges:
                from judges.services.outputs import judge_outputs_import_jsonl

                progress_step("importing the simulated judges' outputs")
                imported = judge_outputs_import_jsonl(study=study, path=jsonl, user=user)
                result_counts["judge_outputs"] = imported["created"]
                result_counts["judge_outputs_valid"] = imported["valid"]
                result_counts["judge_outputs_invalid"] = imported["invalid"]
                result_counts["judges"] = len({j.name for j in JUDGE_PROFILES})
                if imported["created"] != n_lines:
                    raise ArbiterError(f"the demo wrote {n_lines} judge outputs but {imported['created']} were imported")
            if judges:
                demo_judge_ensure()
            logins = [demo_researcher_ensure(study=study)] if with_users else []
    result = DemoStudyResult(study=study, logins=logins)
    result.counts = {
        "pages": len(plan.pages),
        "systems": len(plan.systems),
        "candidates": len(plan.candidates),
        "failed_renders": sum(1 for c in plan.candidates.values() if not c.rendered),
        "human_comparisons": len(plan.human()),
        "deployment_comparisons": len(plan.deployment()),
        **result_counts,
    }
    result.participant_url = study_link_url(study=study) if participant_link else None
    result.seconds = time.monotonic() - started
    return result


def demo_counts_lines(result: DemoStudyResult) -> list[str]:
    """Human-readable summary lines of the reference demo, for the command."""
    c: dict[str, Any] = result.counts
    lines = [
        f"study: {result.study.slug}",
        f"pages: {c['pages']}, systems: {c['systems']}, candidates: {c['candidates']} "
        f"({c['failed_renders']} failed renders)",
        f"comparisons: {c['human_comparisons']} human, {c['deployment_comparisons']} deployment",
    ]
    if "blocks" in c:
        lines.append(
            f"blocks: {c['blocks']}, simulated raters: {c.get('raters', 0)}, votes: {c.get('votes', 0)} "
            f"(hidden repeats: {c.get('repeats', 0)}); {OPEN_PLACES_PER_BLOCK} open places per block"
        )
    if "judge_outputs" in c:
        lines.append(
            f"judge outputs: {c['judge_outputs']} from {c['judges']} judges "
            f"({c['judge_outputs_valid']} valid, {c['judge_outputs_invalid']} invalid)"
        )
        lines.append(f"built-in judge: {DEMO_JUDGE} (answers locally; press Run judges on the study's Judges page)")
    return lines + demo_access_lines(result)


def demo_access_lines(result: DemoStudyResult) -> list[str]:
    """The closing lines of every demo summary: the participant link, the logins, the time taken."""
    lines = [f"participant link: {result.participant_url}"] if result.participant_url else []
    lines += [f"login: {username} / {password}" for username, password in result.logins]
    lines.append(f"took {result.seconds:.1f} s")
    return lines
