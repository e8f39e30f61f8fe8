"""A rater's trials and answers: the next trial to show, and the central vote write
(docs/protocol.md "Canonical answers", "Planning the human study").

``trial_next`` shows an assignment's current trial (its response clock starts then), chosen by
``next_trial_choose``; ``vote_submit`` stores an answer canonically, once, in steps. Votes are idempotent: the assignment row is
locked, the ``Vote.trial`` one-to-one guarantees one row, and a retry with the same key and body
answers the same; the same key with another body is a conflict. What differs between the kinds
(the fields a trial shows, how an answer is cleaned) is the kind's design (``annotation.kinds``).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, router, transaction
from django.db.models import Count, F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotation.errors import Conflict, Forbidden, NotFound, ValidationFailed
from annotation.kinds import StudyDesign, design_of
from annotation.kinds.answer import VoteAnswer
from annotation.metrics import VOTES_STORED
from annotation.models import (
    GOLD_EXPECTED,
    Assignment,
    AssignmentState,
    Axis,
    Candidate,
    Study,
    Trial,
    Vote,
    rater_page_options,
)
from annotation.selectors.axes import StudyAxesRows, axes_of_rows
from annotation.services.candidate_versions import (
    VERSION_ANNOTATIONS,
    displayed_versions,
    trials_record_versions,
    versions_now,
)
from annotation.services.participants import LIVE_STATES, completion_code_new

# --- trials -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialView:
    """What a rater is shown for one trial. Carries no system, candidate or repeat information.

    Other kinds (docs/study-kinds.md "Running the other study kinds"): ``brief`` is the brief's text (may be
    empty), ``question`` and ``boxes`` a checklist predicate's, ``dimensions`` and ``scale`` a rating study's,
    and ``attention`` the instruction line of an attention check (empty on data trials).
    """

    trial: Trial
    number: int
    total: int
    answered: int
    axes: list[dict[str, Any]]
    idempotency_key: str
    kind: str = "pairwise_reference"
    brief: str = ""
    question: str = ""
    boxes: tuple[tuple[float, ...], ...] = ()
    dimensions: tuple[str, ...] = ()
    scale: tuple[int, ...] = ()
    attention: str = ""


def attention_instruction(trial: Trial, study: Study, design: StudyDesign | None = None) -> str:
    """The instructed-response line of an attention check (docs/study-kinds.md "Scheduling"), empty on a data
    trial."""
    expected = trial.attention_expected
    if expected == GOLD_EXPECTED:  # a gold trial looks like any data trial
        return ""
    return (design or design_of(study)).attention_instruction(expected) if expected else ""


def _trial_page(trial: Trial) -> Any:
    if trial.comparison_id:
        return trial.comparison.page  # type: ignore[union-attr]
    if trial.predicate_id:
        return trial.predicate.candidate.page  # type: ignore[union-attr]
    return trial.candidate.page  # type: ignore[union-attr]


def _axes_query(study_id: int) -> Any:
    return Axis.objects.filter(study_id=study_id).order_by("position")


def _assignment_locked_query(assignment_id: int) -> Any:
    return Assignment.objects.select_for_update().filter(pk=assignment_id).order_by()[:2]


def _shown_now_update(trial_id: int, now: datetime) -> tuple[Any, dict[str, Any]]:
    """The next trial marked shown, with the candidate versions it displays (read in the UPDATE)."""
    return Trial.objects.filter(pk=trial_id, shown_at__isnull=True), {"shown_at": now, **versions_now()}


_AXES_READ = "_arbiter_axes"  # where a Study instance keeps its axes once read (study_axes, vote_trial)


def study_axes(study: Study) -> list[Axis]:
    """A study's axes in order, read once per Study instance (a request's answer and next trial share it)."""
    cached: list[Axis] | None = study.__dict__.get(_AXES_READ)
    if cached is None:
        cached = list(_axes_query(study.pk))
        study.__dict__[_AXES_READ] = cached
    return cached


def trial_active_axes(trial: Trial, axes: list[Axis] | None = None) -> list[dict[str, Any]]:
    """The page's active axes (docs/protocol.md "The study model"), each with its description and its
    targets."""
    page = _trial_page(trial)
    if axes is None:
        axes = list(Axis.objects.filter(study_id=page.study_id).order_by("position"))
    active = page.active_axis_ids(axes)
    out = []
    for axis in axes:
        if axis.axis_id not in active:
            continue
        targets = [
            {"role": str(t.get("role", "")), "description": str(t.get("description", "")),
             "bbox_1000": [float(v) for v in t.get("bbox_1000", [])][:4]}
            for t in page.targets
            if t.get("axis") == axis.axis_id and len(t.get("bbox_1000") or []) == 4
        ]
        out.append({"id": axis.axis_id, "title": axis.display_title, "scope": axis.scope,
                    "description": axis.description, "targets": targets})
    return out


def assignment_counts(assignment: Assignment) -> tuple[int, int]:
    """(answered, total) trials of an assignment."""
    rows = list(_counts_query(assignment.pk))
    return (int(rows[0]["answered"]), int(rows[0]["total"])) if rows else (0, 0)


def _counts_query(assignment_id: int) -> Any:
    return (
        Trial.objects.filter(assignment_id=assignment_id).order_by().values("assignment_id")
        .annotate(total=Count("id"), answered=Count("vote"))
    )


def trial_current(
    assignment: Assignment, study: Study, *, trial_id: int | None = None, design: StudyDesign | None = None
) -> Trial | None:
    """The assignment's current trial (``next_trial_choose``), with its unit, its candidate versions
    and its slots' files.

    The files (``trial_shown_files``) come in the same query, so giving the trial's image pass
    costs no query of its own. ``trial_id``: the trial the caller's vote chose
    (``Progress.next_trial_id``), read by its key while it is still unanswered; else (or when
    another tab answered it meanwhile) the trial is chosen again. ``design``: the study's design
    when the caller looked it up (the kind is looked up once).
    """
    return _trial_current(assignment, study, design or design_of(study), trial_id)[0]


def _trial_current(
    assignment: Assignment, study: Study, design: StudyDesign, trial_id: int | None
) -> tuple[Trial | None, Progress | None]:
    """The current trial, and the progress when it had to be chosen here (None: ``trial_id`` was it)."""
    related, item = design.trial_unit_related, not design.pairwise

    def by_id(pk: int) -> Trial | None:
        # What a trial page needs of its unit (joining only those keeps the hot query small).
        trials = Trial.objects.filter(pk=pk, vote__isnull=True).select_related(*related)
        found = list(trials.annotate(**VERSION_ANNOTATIONS, **_file_annotations(item)).order_by()[:1])
        return found[0] if found else None

    trial = by_id(trial_id) if trial_id is not None else None
    if trial is not None:
        return trial, None
    progress = next_trial_choose(study=study, assignment_id=assignment.pk, pairwise=design.pairwise)
    return (by_id(progress.next_trial_id) if progress.next_trial_id is not None else None), progress


def trial_next(
    *, assignment: Assignment, study: Study | None = None, progress: Progress | None = None,
    design: StudyDesign | None = None,
) -> TrialView | None:
    """The assignment's current trial, marked shown (response time starts now).

    ``study`` is the assignment's study when the caller already has it (saves two queries);
    ``progress``: what the caller's vote counted and chose under the assignment's row lock
    (``VoteResult.progress``): the counts and the next trial are not looked up again.
    """
    if assignment.state not in LIVE_STATES:
        raise Forbidden("This assignment is no longer open.")
    if study is None:
        study = assignment.block.study
    design = design or design_of(study)
    if progress is not None and progress.next_trial_id is None:
        return None  # the caller's vote finished the block
    trial, chosen = _trial_current(assignment, study, design, progress.next_trial_id if progress else None)
    progress = chosen or progress
    if trial is None or progress is None:
        return None
    now = timezone.now()
    if trial.shown_at is None:
        # The candidate versions displayed are recorded with the first showing (paper B.5).
        version_a, version_b = displayed_versions(trial)
        Trial.objects.filter(pk=trial.pk, shown_at__isnull=True).update(
            shown_at=now, version_a=version_a, version_b=version_b
        )
        trial.shown_at = now
        trial.version_a, trial.version_b = version_a, version_b
    if assignment.started_at is None:
        Assignment.objects.filter(pk=assignment.pk, started_at__isnull=True).update(started_at=now)
        assignment.started_at = now
    answered, total = progress.answered, progress.total
    return trial_view_of(trial, study=study, number=answered + 1, answered=answered, total=total, design=design)


def trial_view_of(
    trial: Trial, *, study: Study, number: int, answered: int, total: int, design: StudyDesign | None = None
) -> TrialView:
    """What the rater is shown for ``trial`` (a fresh idempotency key for its answer)."""
    design = design or design_of(study)
    page = _trial_page(trial)
    predicate = trial.predicate
    return TrialView(
        trial=trial,
        number=number,
        total=total,
        answered=answered,
        axes=trial_active_axes(trial, study_axes(study)) if design.has_axes else [],
        idempotency_key=secrets.token_urlsafe(16),
        kind=study.kind,
        brief="" if design.has_reference else page.text,
        question=predicate.question if predicate else "",
        boxes=tuple(tuple(float(v) for v in box) for box in (predicate.boxes if predicate else [])),
        attention=attention_instruction(trial, study, design),
        **design.trial_view_fields(study),
    )


@dataclass(frozen=True)
class Progress:
    """An assignment's progress and the trial chosen next (``next_trial_choose``); after a new
    vote, counted under the assignment's row lock."""

    answered: int
    total: int
    response_times: tuple[int, ...]  # every stored response time of the assignment, ms (the pace estimate)
    next_trial_id: int | None  # the trial shown next (None: every trial is answered)
    next_shown: bool = False  # the choice itself marked that trial shown (a serve-time fill)


@dataclass(frozen=True)
class VoteResult:
    vote: Vote
    replayed: bool
    finished: bool
    completion_code: str
    progress: Progress | None = None  # a new vote's: what the next trial's page shows


def _finish(assignment: Assignment) -> str:
    """Mark an assignment finished; its completion code is the study's, or a new one."""
    study_code = (
        Study.objects.filter(blocks__assignments__id=assignment.pk).order_by().values_list("completion_code", flat=True).first()
    )
    code = study_code or completion_code_new()
    Assignment.objects.filter(pk=assignment.pk, state=AssignmentState.ACTIVE).update(
        state=AssignmentState.FINISHED, finished_at=timezone.now(), completion_code=code
    )
    return code


# What serving a serve-time block's next trial needs of each trial (annotation.services.serve_time.Slot),
# read with the progress rows: no join, a few columns.
SLOT_FIELDS = ("comparison_id", "swapped", "is_repeat", "repeat_of_id", "attention_expected")


def _progress_query(assignment_id: int) -> Any:
    """Every trial of an assignment in order, each with its vote's response time: -1 for a vote
    without one, None for no vote.

    The vote is looked up per trial in the SELECT list (one index probe each), never joined: a join
    lets PostgreSQL hash the whole vote table, which costs more the more votes a study holds. No
    ordering in the probe: the vote's default ordering would join its trial's assignment, block and
    study into each probe.
    """
    vote = Vote.objects.filter(trial_id=OuterRef("pk")).order_by().annotate(ms=Coalesce("response_ms", -1)).values("ms")[:1]
    return Trial.objects.filter(assignment_id=assignment_id).order_by("position").values("id", *SLOT_FIELDS).annotate(
        vote_ms=Subquery(vote)
    )


def next_trial_choose(
    *, study: Study, assignment_id: int, pairwise: bool, rows: Sequence[Mapping[str, Any]] | None = None,
    answering: int | None = None, response_ms: int | None = None, shown_at: datetime | None = None,
) -> Progress:
    """The one place an assignment's next trial is chosen, uniform or serve-time; the vote under the
    assignment's row lock, the trial page, the rater API and Undo all ask it.

    The next trial is the first unanswered one in position order; in a serve-time block a data trial
    with no comparison yet gets one now (``serve_next``, docs/protocol.md "Serve-time choice"), or
    is removed when nothing is left for it. ``rows``: the assignment's ``_progress_query`` rows when
    the caller read them (a vote, under its lock); ``answering``: the trial that vote answers, counted
    as answered with its ``response_ms``; ``shown_at``: the chosen trial is shown now (a serve-time
    fill marks it shown in its own statement: ``Progress.next_shown``).
    """
    if rows is None:
        rows = list(_progress_query(assignment_id))
    unanswered = [r["id"] for r in rows if r["vote_ms"] is None and r["id"] != answering]
    times = [int(r["vote_ms"]) for r in rows if r["vote_ms"] is not None and r["vote_ms"] >= 0]
    if answering is not None and response_ms is not None:
        times.append(response_ms)
    next_id, shown, total = (unanswered[0] if unanswered else None), False, len(rows)
    first = next((r for r in rows if r["id"] == next_id), None)
    if first is not None and pairwise and first["comparison_id"] is None and not first["attention_expected"]:
        from annotation.services.serve_time import serve_next, slot_of

        next_id, shown = serve_next(study=study, assignment_id=assignment_id, trial_ids=unanswered,
                                    slots={r["id"]: slot_of(r) for r in rows}, shown_at=shown_at)
        if next_id != unanswered[0]:  # open trials were removed (nothing left for them)
            total = Trial.objects.filter(assignment_id=assignment_id).count()
    return Progress(answered=len(rows) - len(unanswered), total=total, response_times=tuple(times),
                    next_trial_id=next_id, next_shown=shown)


def _vote_trial_query(trial_token: str) -> Any:
    trials = Trial.objects.select_related(
        "assignment__block__study", "comparison__page", "candidate__page", "predicate__candidate__page"
    ).filter(token=trial_token)
    if connection.vendor in StudyAxesRows.vendors:  # the study's axes in the same statement
        trials = trials.annotate(study_axes_rows=StudyAxesRows("assignment__block__study_id"))
    return trials.order_by()[:1]  # the token is unique: no ordering to resolve against the wide select list


def vote_trial(trial_token: str) -> Trial | None:
    """A trial with what answering it needs: its study (with its axes) and its unit's page."""
    found = list(_vote_trial_query(trial_token))
    if not found:
        return None
    trial: Trial = found[0]
    if hasattr(trial, "study_axes_rows"):
        study = trial.assignment.block.study
        study.__dict__[_AXES_READ] = axes_of_rows(study.pk, trial.study_axes_rows, using=connection.alias)
    return trial


def vote_answers(
    *, study: Study, ratings: Mapping[str, object] | None, scores: Mapping[str, object], axes_defaulted: Sequence[str]
) -> dict[str, Any]:
    """``Vote.answers``: a rating's ratings; and, when the study marks them (issue 30,
    ``rater_page.mark_defaulted_axes``), the axes the rater set with the verdict key and left so."""
    out: dict[str, Any] = {"ratings": ratings} if ratings is not None else {}
    if axes_defaulted and scores and rater_page_options(study)["mark_defaulted_axes"]:
        defaulted = sorted(set(axes_defaulted) & set(scores))
        if defaulted:
            out["axes_defaulted"] = defaulted
    return out


@dataclass(frozen=True)
class VoteInput:
    """An answer to a trial as posted, before it is checked: the arguments of the vote write
    (``vote_submit``) and of a revision (``vote_revise``), travelling together."""

    trial_token: str
    rater_id: int | None
    verdict: object
    confidence: object
    axes: Mapping[str, object]
    rationale: object
    idempotency_key: str
    ratings: Mapping[str, object] | None = None
    axes_defaulted: Sequence[str] = ()


@dataclass(frozen=True)
class CheckedVote:
    """A vote whose key, trial, owner and answer are checked (``answer_for_trial``), before any lock."""

    key: str
    trial: Trial
    answer: VoteAnswer
    digest: str  # the answer's request hash: the same key with another answer is a conflict
    design: StudyDesign

    @property
    def study(self) -> Study:
        return self.trial.assignment.block.study


def answer_for_trial(vote: VoteInput, *, trial: Trial | None = None, design: StudyDesign | None = None) -> CheckedVote:
    """The checked key, the rater's own trial and the validated answer (before any lock).

    ``trial``: the caller's ``vote_trial(trial_token)`` when it already read it (saves a query).
    """
    key = (vote.idempotency_key or "").strip()
    if not (8 <= len(key) <= 80):
        raise ValidationFailed("missing or malformed idempotency key (reload the page)", field="idempotency_key")
    if trial is None or trial.token != vote.trial_token:
        trial = vote_trial(vote.trial_token)
    if trial is None:
        raise NotFound("no such trial")
    if vote.rater_id is None or trial.assignment.rater_id != vote.rater_id:
        raise Forbidden("this trial is not yours")
    study = trial.assignment.block.study
    design = design or design_of(study)
    answer = design.answer_clean(
        study=study,
        active_axes=[a["id"] for a in trial_active_axes(trial, study_axes(study))] if design.has_axes else [],
        verdict=vote.verdict, confidence=vote.confidence, axes=vote.axes, ratings=vote.ratings,
        rationale=vote.rationale,
    )
    return CheckedVote(key=key, trial=trial, answer=answer, digest=answer.request_hash(), design=design)


def vote_submit(
    vote: VoteInput, *, trial: Trial | None = None, design: StudyDesign | None = None, show_next: bool = False
) -> VoteResult:
    """Store the answer to a trial canonically, once (docs/protocol.md "Canonical answers",
    "Planning the human study"): Zulip's one ``do_*`` function for the action, in steps.

    The check before any lock (``answer_for_trial``); under the assignment's row lock: the replay
    check (``_vote_replayed``), the state checks (``_vote_state_check``), the insert
    (``_vote_insert``), the candidate versions (``_vote_versions``), the next trial's choice,
    serve-time included (``next_trial_choose``), and the finishing (``_vote_finish``).

    Runs in the caller's transaction (the rater's flow), or in one of its own. Foreign trial →
    Forbidden (403); answered with another key, not the current trial, or a finished assignment →
    Conflict (409); same key and same body → the stored vote again. Submissions to one assignment
    are serialized by its row lock (only that row: a vote never locks the block or the study, so
    raters do not wait for each other). A new vote is counted in ``VOTES_STORED`` once the
    transaction commits.

    ``trial``: the caller's ``vote_trial(trial_token)`` when it already read it (saves a query).
    ``show_next``: the caller shows the next trial in its response (the htmx and JSON answers), so
    that trial's response clock starts in the vote's transaction (one commit instead of two).
    ``design``: the study's design when the caller looked it up.
    """
    checked = answer_for_trial(vote, trial=trial, design=design)
    alias = router.db_for_write(Vote)
    # The caller's transaction when it has one: a refused vote (a conflict) leaves it usable for the
    # screen the caller shows instead.
    joined = transaction.get_connection(alias).in_atomic_block
    with nullcontext() if joined else transaction.atomic(using=alias):
        result = _vote_locked_steps(checked, axes_defaulted=vote.axes_defaulted, show_next=show_next)
        if not result.replayed:
            transaction.on_commit(VOTES_STORED.inc, using=alias)
    return result


def _vote_locked_steps(checked: CheckedVote, *, axes_defaulted: Sequence[str], show_next: bool) -> VoteResult:
    """What ``vote_submit`` does under the assignment's row lock, step by step."""
    assignment = _assignment_locked(checked.trial.assignment_id)
    rows = list(_progress_query(assignment.pk))
    unanswered = [r["id"] for r in rows if r["vote_ms"] is None]
    # The current trial has no vote by definition: only another trial needs the vote looked up.
    current = bool(unanswered) and unanswered[0] == checked.trial.pk
    replayed = None if current else _vote_replayed(checked, assignment)
    if replayed is not None:
        return replayed
    _vote_state_check(assignment, current=current)
    stored, response_ms = _vote_insert(checked, axes_defaulted=axes_defaulted)
    _vote_versions(checked.trial)
    progress = next_trial_choose(
        study=checked.study, assignment_id=assignment.pk, pairwise=checked.design.pairwise, rows=rows,
        answering=checked.trial.pk, response_ms=response_ms, shown_at=timezone.now() if show_next else None,
    )
    code = _vote_finish(assignment, progress, show_next=show_next)
    return VoteResult(vote=stored, replayed=False, finished=progress.next_trial_id is None, completion_code=code,
                      progress=progress)


def _assignment_locked(assignment_id: int) -> Assignment:
    locked = list(_assignment_locked_query(assignment_id))
    if not locked:
        raise Assignment.DoesNotExist(f"assignment {assignment_id} is gone")
    return locked[0]


def _vote_replayed(checked: CheckedVote, assignment: Assignment) -> VoteResult | None:
    """The stored vote again when this is the same submission (a retry), None when the trial has no
    vote; a conflict when the key or the answer differs."""
    existing = Vote.objects.filter(trial_id=checked.trial.pk).order_by().first()
    if existing is None:
        return None
    key, digest = checked.key, checked.digest
    # A late retry of an answer since revised with Undo is the same submission, not a new one.
    earlier = {h.get("idempotency_key"): h.get("request_hash") for h in existing.history or []}
    if key in earlier and key != existing.idempotency_key:
        if earlier[key] != digest:
            raise Conflict("this submission key was already used with a different answer")
    else:
        if existing.idempotency_key != key:
            raise Conflict("this trial was already answered")
        if existing.request_hash != digest:
            raise Conflict("this submission key was already used with a different answer")
    return VoteResult(vote=existing, replayed=True, finished=assignment.state == AssignmentState.FINISHED,
                      completion_code=assignment.completion_code)


def _vote_state_check(assignment: Assignment, *, current: bool) -> None:
    """A new vote needs an active assignment and the current trial."""
    if assignment.state == AssignmentState.FINISHED:
        raise Conflict("this assignment is finished; it cannot be answered again")
    if assignment.state != AssignmentState.ACTIVE:
        raise Forbidden("this assignment is no longer open")
    if not current:
        raise Conflict("this is not the current trial (reload the page)")


def _vote_insert(checked: CheckedVote, *, axes_defaulted: Sequence[str]) -> tuple[Vote, int | None]:
    """The vote row, canonical (docs/protocol.md "Canonical answers"), with its response time."""
    trial, answer = checked.trial, checked.answer
    label, scores = answer.canonical(swapped=trial.swapped)
    response_ms = None
    if trial.shown_at is not None:
        response_ms = max(int((timezone.now() - trial.shown_at).total_seconds() * 1000), 0)
    vote = Vote.objects.create(
        trial_id=trial.pk, label=label, confidence=answer.confidence, axis_scores=scores,
        rationale=answer.rationale, response_ms=response_ms, idempotency_key=checked.key,
        request_hash=checked.digest,
        answers=vote_answers(study=checked.study, ratings=answer.ratings, scores=scores, axes_defaulted=axes_defaulted),
    )
    return vote, response_ms


def _vote_versions(trial: Trial) -> None:
    """The candidate versions the answered trial displayed, when it was answered without having been
    shown through ``trial_next`` (docs/candidate-versions.md)."""
    if trial.version_a is None:
        trials_record_versions(trial_ids=[trial.pk])


def _vote_finish(assignment: Assignment, progress: Progress, *, show_next: bool) -> str:
    """The block finished (its completion code), or the next trial's clock started when it is shown now."""
    if progress.next_trial_id is None:
        return _finish(assignment)
    if show_next and not progress.next_shown:
        # Shown now: its clock starts and the candidate versions it displays are recorded (B.5).
        shown, values = _shown_now_update(progress.next_trial_id, timezone.now())
        shown.update(**values)
    return ""


# --- images -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialImage:
    """Who may see a trial's image and which stored file it is (nothing else is looked up)."""

    rater_id: int | None
    study_id: int
    live: bool
    file: str | None


@dataclass(frozen=True)
class TrialImages:
    """Who may see a trial's images and the stored file behind each of its slots."""

    rater_id: int | None
    study_id: int
    live: bool
    slots: tuple[str, ...]  # the trial's slots (an image may still be missing from ``files``)
    files: dict[str, str]


_PAIR_HOLDERS = ("comparison__page", "comparison__candidate_a", "comparison__candidate_b")
_ITEM_HOLDERS = ("candidate", "predicate__candidate")


_VARIANTS = ("image", "neutralized_image")
_GOLD_ALIAS = "slot_file_gold_image"
_GOLD_MATCH_ALIAS = "slot_file_gold_match_image"


def _file_alias(holder: str, variant: str) -> str:
    return f"slot_file_{holder.replace('__', '_')}_{variant}"


def _file_annotations(item: bool) -> dict[str, F]:
    """The stored file names of every image a trial of this shape may show (``trial_current``), and
    a pair's candidates' blocks (``trial_blocks``)."""
    holders = _ITEM_HOLDERS if item else _PAIR_HOLDERS
    gold = {} if item else {_GOLD_ALIAS: F("gold_image__file"), _GOLD_MATCH_ALIAS: F("gold_match_image__file")}
    blocks = {} if item else {f"slot_blocks_{side}": F(f"comparison__candidate_{side}__blocks") for side in "ab"}
    return {**{_file_alias(h, v): F(f"{h}__{v}__file") for h in holders for v in _VARIANTS}, **gold, **blocks}


def trial_blocks(trial: Trial) -> dict[str, list[Any]]:
    """slot → the blocks of the page it shows (``ref`` / ``left`` / ``right``; docs/rendering.md "The
    JSON of a render"), for the trial page's aligned scrolling. A gold trial's two sides carry its
    comparison's candidates' blocks, as a data trial of that pair would: its markup is the same.
    Read with the trial by ``trial_current``, else in one query."""
    comparison = trial.comparison
    if comparison is None:
        return {}
    if hasattr(trial, "slot_blocks_a"):
        a, b = trial.slot_blocks_a, trial.slot_blocks_b  # type: ignore[attr-defined]
    else:
        found = dict(Candidate.objects.filter(pk__in=[comparison.candidate_a_id, comparison.candidate_b_id])
                     .values_list("pk", "blocks"))
        a, b = found.get(comparison.candidate_a_id), found.get(comparison.candidate_b_id)
    left, right = (b, a) if trial.swapped else (a, b)
    return {"ref": comparison.page.blocks or [], "left": left or [], "right": right or []}


def _slot_files(
    file: Any, *, item: bool, swapped: bool, predicate: bool, neutralize: bool, gold: str | None = None,
    gold_match: str | None = None,
) -> dict[str, str | None]:
    """slot → stored file, from ``file(holder, variant)``: ``ref`` / ``left`` / ``right``, or ``item``.

    The neutralized variant is served when the study neutralizes media and the variant exists.
    ``left`` is what the rater sees as "A": canonical B when the trial is swapped
    (docs/protocol.md "Canonical answers").
    """

    def file_of(holder: str) -> str | None:
        neutralized = file(holder, "neutralized_image") if neutralize else None
        return neutralized or file(holder, "image") or None

    if item:
        return {"item": file_of("predicate__candidate" if predicate else "candidate")}
    ref = file_of("comparison__page")
    if gold:  # a gold trial: canonical A is the reference copy (older trials: the reference), B the degraded one
        a, b = gold_match or ref, gold
        return {"ref": ref, "left": b if swapped else a, "right": a if swapped else b}
    first, second = ("candidate_b", "candidate_a") if swapped else ("candidate_a", "candidate_b")
    return {"ref": ref, "left": file_of(f"comparison__{first}"),
            "right": file_of(f"comparison__{second}")}


def trial_shown_files(trial: Trial, study: Study, design: StudyDesign | None = None) -> dict[str, str] | None:
    """The files of a trial read by ``trial_current`` (None for a trial read another way)."""
    item = not (design or design_of(study)).pairwise
    if not hasattr(trial, _file_alias((_ITEM_HOLDERS if item else _PAIR_HOLDERS)[0], "image")):
        return None
    slots = _slot_files(lambda h, v: getattr(trial, _file_alias(h, v)), item=item, swapped=trial.swapped,
                        predicate=trial.predicate_id is not None, neutralize=study.neutralize_media,
                        gold=getattr(trial, _GOLD_ALIAS, None), gold_match=getattr(trial, _GOLD_MATCH_ALIAS, None))
    return {k: v for k, v in slots.items() if v}


def _images_query(item: bool) -> Any:
    holders = _ITEM_HOLDERS if item else _PAIR_HOLDERS
    shape = Q(candidate__isnull=False) | Q(predicate__isnull=False) if item else Q(comparison__isnull=False)
    return lambda token: (
        Trial.objects.filter(shape, token=token).order_by()
        .values(
            "swapped", "predicate_id", "assignment__rater_id", "assignment__state",
            "assignment__block__study_id", "assignment__block__study__neutralize_media",
            *(f"{h}__{variant}__file" for h in holders for variant in _VARIANTS),
            *(() if item else ("gold_image__file", "gold_match_image__file")),
        )[:1]
    )


def trial_images(*, trial_token: str, item: bool) -> TrialImages | None:
    """Every image slot of a trial in one query (``_slot_files`` for the rules); None when the
    trial is not of that shape (``item``: a rating or checklist trial,
    docs/study-kinds.md "Running the other study kinds")."""
    rows = list(_images_query(item)(trial_token))
    if not rows:
        return None
    row = rows[0]
    slots = _slot_files(lambda h, v: row[f"{h}__{v}__file"], item=item, swapped=row["swapped"],
                        predicate=row["predicate_id"] is not None,
                        neutralize=row["assignment__block__study__neutralize_media"],
                        gold=None if item else row["gold_image__file"],
                        gold_match=None if item else row["gold_match_image__file"])
    return TrialImages(
        rater_id=row["assignment__rater_id"], study_id=row["assignment__block__study_id"],
        live=row["assignment__state"] in LIVE_STATES, slots=tuple(slots),
        files={k: v for k, v in slots.items() if v},
    )


def trial_image(*, trial_token: str, slot: str) -> TrialImage | None:
    """The stored image behind one slot of a trial (``trial_images`` for the rules)."""
    if slot not in ("ref", "left", "right", "item"):
        return None
    found = trial_images(trial_token=trial_token, item=slot == "item")
    if found is None or slot not in found.slots:
        return None
    return TrialImage(rater_id=found.rater_id, study_id=found.study_id, live=found.live,
                      file=found.files.get(slot))
