"""A rater's trials and answers: the next trial to show, and the central vote write
(docs/protocol.md "Canonical answers", "Planning the human study").

``trial_next`` shows an assignment's current trial (its response clock starts then), chosen by
``next_trial_choose`` from one read of the assignment's trials, which brings the chosen trial's
stored screen (``annotation.services.trial_screens``, decision 0079): ``trial_view_of`` builds
what the rater sees from it, with no join. ``vote_submit`` stores an answer canonically, once, in steps. Votes are idempotent: the assignment row is
locked, the ``Vote.trial`` one-to-one guarantees one row, and a retry with the same key and body
answers the same; the same key with another body is a conflict. What differs between the kinds
(the fields a trial shows, how an answer is cleaned) is the kind's design (``annotation.kinds``).
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.db import connections, router, transaction
from django.db.models import Count
from django.utils import timezone

from annotation.errors import Conflict, Forbidden, NotFound, ValidationFailed
from annotation.kinds import StudyDesign, design_of
from annotation.kinds.answer import VoteAnswer
from annotation.metrics import VOTES_STORED
from annotation.models import (
    GOLD_EXPECTED,
    Assignment,
    AssignmentState,
    Block,
    Candidate,
    Comparison,
    Predicate,
    Study,
    Trial,
    Vote,
    rater_page_options,
)
from annotation.services.candidate_versions import trials_record_versions
from annotation.services.participants import LIVE_STATES, completion_code_new
from annotation.services.trial_screens import SCREEN_VERSION, trial_screen_build, trial_screen_ensure

# --- trials -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialView:
    """What a rater is shown for one trial, built from the trial's row alone (``trial_view_of``).
    Carries no system, candidate or repeat information.

    ``files``: the stored file of each image slot, for the image pass (never sent to the rater);
    ``blocks``: each slot's block geometry (``data-blocks``); ``ref_size``: the reference's size.
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
    files: Mapping[str, str] = field(default_factory=dict)
    blocks: Mapping[str, str] = field(default_factory=dict)
    ref_size: tuple[int, int] | None = None

    @property
    def token(self) -> str:
        return self.trial.token


def attention_instruction(trial: Trial, study: Study, design: StudyDesign | None = None) -> str:
    """The instructed-response line of an attention check (docs/study-kinds.md "Scheduling"), empty on a data
    trial."""
    expected = trial.attention_expected
    if expected == GOLD_EXPECTED:  # a gold trial looks like any data trial
        return ""
    return (design or design_of(study)).attention_instruction(expected) if expected else ""


# The trial marked shown with the candidate versions it displays, read in the UPDATE itself, so
# recording them costs no query of its own: a comparison's two candidates, else the rated
# candidate, else the checklist predicate's candidate. SQL of its own, as the progress read below
# (decision 0086).
_SHOWN_NOW_SQL = """
UPDATE {trial} SET shown_at = %s,
    version_a = COALESCE(
        (SELECT ca.version FROM {comparison} c JOIN {candidate} ca ON ca.id = c.candidate_a_id
         WHERE c.id = {trial}.comparison_id),
        (SELECT ca.version FROM {candidate} ca WHERE ca.id = {trial}.candidate_id),
        (SELECT ca.version FROM {predicate} p JOIN {candidate} ca ON ca.id = p.candidate_id
         WHERE p.id = {trial}.predicate_id)),
    version_b = (SELECT cb.version FROM {comparison} c JOIN {candidate} cb ON cb.id = c.candidate_b_id
                 WHERE c.id = {trial}.comparison_id)
WHERE id = %s AND shown_at IS NULL
"""


@functools.cache
def _shown_now_sql() -> str:
    return _SHOWN_NOW_SQL.format(trial=Trial._meta.db_table, comparison=Comparison._meta.db_table,
                                 candidate=Candidate._meta.db_table, predicate=Predicate._meta.db_table)


def _shown_now(trial_id: int, now: datetime) -> None:
    """The trial marked shown now (its response clock starts), with the candidate versions it
    displays (docs/candidate-versions.md); a trial already shown keeps its time."""
    connection = connections[router.db_for_write(Trial)]
    when = Trial._meta.get_field("shown_at").get_db_prep_value(now, connection)
    with connection.cursor() as cursor:
        cursor.execute(_shown_now_sql(), [when, trial_id])


def assignment_counts(assignment: Assignment) -> tuple[int, int]:
    """(answered, total) trials of an assignment."""
    rows = list(_counts_query(assignment.pk))
    return (int(rows[0]["answered"]), int(rows[0]["total"])) if rows else (0, 0)


def _counts_query(assignment_id: int) -> Any:
    return (
        Trial.objects.filter(assignment_id=assignment_id).order_by().values("assignment_id")
        .annotate(total=Count("id"), answered=Count("vote"))
    )


def trial_next(
    *, assignment: Assignment, study: Study | None = None, progress: Progress | None = None,
    design: StudyDesign | None = None,
) -> TrialView | None:
    """The assignment's current trial, marked shown (response time starts now).

    ``study`` is the assignment's study when the caller already has it (saves two queries);
    ``progress``: what the caller's vote counted and chose under the assignment's row lock
    (``VoteResult.progress``): the counts and the next trial (its row, with its stored screen) are
    not looked up again. Otherwise one read (``next_trial_choose``) brings them.
    """
    if assignment.state not in LIVE_STATES:
        raise Forbidden("This assignment is no longer open.")
    if study is None:
        study = assignment.block.study
    design = design or design_of(study)
    if progress is None:
        progress = next_trial_choose(study=study, assignment_id=assignment.pk, pairwise=design.pairwise)
    row = progress.next_row
    if progress.next_trial_id is None or row is None:
        return None
    now = timezone.now()
    row, screen = _screen_of_row(row)
    if screen is None:
        return None
    trial = _trial_of_row(row)
    if trial.shown_at is None and not progress.next_shown:
        # Shown now: its clock starts and the candidate versions it displays are recorded (B.5).
        _shown_now(trial.pk, now)
        trial.shown_at = now
    if assignment.started_at is None:
        Assignment.objects.filter(pk=assignment.pk, started_at__isnull=True).update(started_at=now)
        assignment.started_at = now
    answered, total = progress.answered, progress.total
    return trial_view_of(trial, study=study, number=answered + 1, answered=answered, total=total, design=design,
                         screen=screen)


def trial_view_of(
    trial: Trial, *, study: Study, number: int, answered: int, total: int, design: StudyDesign | None = None,
    screen: Mapping[str, Any] | None = None,
) -> TrialView:
    """What the rater is shown for ``trial``, from its stored screen (``screen``: when the caller has
    it; a fresh idempotency key for its answer). The one function that builds a trial's screen
    model: the page, the htmx fragment and the rater API render what it returns."""
    design = design or design_of(study)
    if screen is None:
        screen = trial_screen_ensure(trial.pk, trial.screen) or {}
    files = screen.get("neutralized_files" if study.neutralize_media else "files") or {}
    ref_size = screen.get("ref_size")
    return TrialView(
        trial=trial,
        number=number,
        total=total,
        answered=answered,
        axes=list(screen.get("axes") or []) if design.has_axes else [],
        idempotency_key=secrets.token_urlsafe(16),
        kind=study.kind,
        brief=str(screen.get("brief") or ""),
        question=str(screen.get("question") or ""),
        boxes=tuple(tuple(float(v) for v in box) for box in screen.get("boxes") or []),
        attention=attention_instruction(trial, study, design),
        files={str(k): str(v) for k, v in files.items()},
        blocks=dict(screen.get("blocks") or {}),
        ref_size=(int(ref_size[0]), int(ref_size[1])) if ref_size else None,
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
    next_row: Mapping[str, Any] | None = None  # that trial's progress row, with its stored screen


@dataclass(frozen=True)
class VoteResult:
    vote: Vote
    replayed: bool
    finished: bool
    completion_code: str
    progress: Progress | None = None  # a new vote's: what the next trial's page shows


def _finish(assignment: Assignment, study: Study) -> str:
    """Mark an assignment finished; its completion code is the study's, or a new one."""
    code = study.completion_code or completion_code_new()
    Assignment.objects.filter(pk=assignment.pk, state=AssignmentState.ACTIVE).update(
        state=AssignmentState.FINISHED, finished_at=timezone.now(), completion_code=code
    )
    return code


# What serving a serve-time block's next trial needs of each trial (annotation.services.serve_time.Slot),
# read with the progress rows: no join, a few columns.
SLOT_FIELDS = ("comparison_id", "swapped", "is_repeat", "repeat_of_id", "attention_expected")
# What showing or answering a trial reads of its own row besides (its screen comes as ``open_screen``).
ROW_FIELDS = ("token", "assignment_id", "position", "shown_at", "version_a", "version_b")


# Every trial of an assignment in position order, each with its vote's response time (-1 for a vote
# without one, None for no vote) and, for the first two unanswered trials, their stored screens as
# JSON text: a vote needs the screen of the trial it answers and of the one it shows next, a page
# the first one's (``_screen_of_row`` decodes them; another trial's screen is read when needed).
# The vote is looked up per trial in the SELECT list (one index probe each), never joined: a join
# lets PostgreSQL hash the whole vote table, which costs more the more votes a study holds.
_PROGRESS_SQL = """
SELECT p.id, p.comparison_id, p.swapped, p.is_repeat, p.repeat_of_id, p.attention_expected,
       p.token, p.assignment_id, p.position, p.shown_at, p.version_a, p.version_b, p.vote_ms,
       CASE WHEN p.vote_ms IS NULL AND SUM(CASE WHEN p.vote_ms IS NULL THEN 1 ELSE 0 END)
                 OVER (ORDER BY p.position ROWS UNBOUNDED PRECEDING) <= 2
            THEN CAST(p.screen AS TEXT) END
FROM (SELECT t.id, t.comparison_id, t.swapped, t.is_repeat, t.repeat_of_id, t.attention_expected,
             t.token, t.assignment_id, t.position, t.shown_at, t.version_a, t.version_b, t.screen,
             (SELECT COALESCE(v.response_ms, -1) FROM {vote} v WHERE v.trial_id = t.id) AS vote_ms
      FROM {trial} t WHERE t.assignment_id = %s) p
ORDER BY p.position
"""
# The names of its columns, as the rows carry them.
PROGRESS_COLUMNS = ("id", *SLOT_FIELDS, *ROW_FIELDS, "vote_ms", "open_screen")


@functools.cache
def _progress_sql() -> str:
    return _PROGRESS_SQL.format(trial=Trial._meta.db_table, vote=Vote._meta.db_table)


def _progress_query(assignment_id: int) -> list[dict[str, Any]]:
    """Every trial of an assignment in order with its vote's response time and, for the first two
    unanswered, their stored screens: the one read a vote or a trial page makes of the trials (the
    next trial's screen comes with it). SQL of its own (decision 0086): Django compiling this query
    cost more CPU than PostgreSQL running it."""
    connection = connections[router.db_for_read(Trial)]
    with connection.cursor() as cursor:
        cursor.execute(_progress_sql(), [assignment_id])
        fetched = cursor.fetchall()
    shown_at = Trial._meta.get_field("shown_at")
    rows = []
    for values in fetched:
        row = dict(zip(PROGRESS_COLUMNS, values, strict=True))
        # SQLite answers booleans as 0/1 and times in UTC without a zone; PostgreSQL's driver
        # converts both.
        if type(row["swapped"]) is not bool or type(row["is_repeat"]) is not bool:
            row["swapped"], row["is_repeat"] = bool(row["swapped"]), bool(row["is_repeat"])
        when = row["shown_at"]
        if when is not None and (not isinstance(when, datetime) or when.tzinfo is None):
            row["shown_at"] = _aware(shown_at.to_python(when))
        rows.append(row)
    return rows


def _aware(value: datetime) -> datetime:
    """A time as SQLite stores it (UTC, no zone when ``USE_TZ``), aware."""
    return timezone.make_aware(value, UTC) if timezone.is_naive(value) else value


def _trial_of_row(row: Mapping[str, Any]) -> Trial:
    """The trial of a progress row, as a model instance (no query; its other fields are deferred)."""
    # Model.from_db takes the values in the model's field order.
    names = [f.attname for f in Trial._meta.concrete_fields if f.attname in row and f.attname != "screen"]
    return Trial.from_db(router.db_for_read(Trial), names, [row[n] for n in names])


def _screen_of_row(row: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[str, Any] | None]:
    """A progress row's trial's stored screen, and the row: read again for an answered trial; built
    (``trial_screen_build``) when it has none or its unit was just chosen (``stale``), the row then
    as the build read it."""
    stored = row.get("open_screen")
    if isinstance(stored, str):
        stored = json.loads(stored)
    if stored is None and not row.get("stale") and row.get("vote_ms") is not None:
        stored = Trial.objects.filter(pk=row["id"]).values_list("screen", flat=True).first()
    if stored is not None and not row.get("stale") and stored.get("v") == SCREEN_VERSION:
        return row, dict(stored)
    trial, screen = trial_screen_build(int(row["id"]))
    if trial is None:
        return row, None
    return {**row, **{n: getattr(trial, n) for n in ("id", *SLOT_FIELDS, *ROW_FIELDS)}, "stale": False}, screen


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
    served = False
    if first is not None and pairwise and first["comparison_id"] is None and not first["attention_expected"]:
        from annotation.services.serve_time import serve_next, slot_of

        next_id, shown = serve_next(study=study, assignment_id=assignment_id, trial_ids=unanswered,
                                    slots={r["id"]: slot_of(r) for r in rows}, shown_at=shown_at)
        served = True
        if next_id != unanswered[0]:  # open trials were removed (nothing left for them)
            total = Trial.objects.filter(assignment_id=assignment_id).count()
    row = next((r for r in rows if r["id"] == next_id), None)
    if served and row is not None:  # its unit was chosen now: its screen is built (and its row read) when shown
        row = {**row, "open_screen": None, "stale": True}
    return Progress(answered=len(rows) - len(unanswered), total=total, response_times=tuple(times),
                    next_trial_id=next_id, next_shown=shown, next_row=row)


# The vote's lock: the assignment of a trial, its row locked (only that row), read with its block
# and study in the same statement. SQL of its own (decision 0086): the ORM compiled its 44 columns
# for longer than the rest of the vote's reads together.
_LOCK_SQL = """
SELECT {columns} FROM {assignment} a
JOIN {block} b ON b.id = a.block_id
JOIN {study} s ON s.id = b.study_id
WHERE a.id = (SELECT t.assignment_id FROM {trial} t WHERE t.token = %s){lock}
"""
_LOCKED = (("a", Assignment), ("b", Block), ("s", Study))


@functools.cache
def _lock_sql(alias: str) -> str:
    connection = connections[alias]
    features = connection.features
    lock = (" FOR UPDATE OF a" if features.has_select_for_update_of
            else " FOR UPDATE" if features.has_select_for_update else "")
    columns = ", ".join(f"{name}.{connection.ops.quote_name(str(f.column))}"
                        for name, model in _LOCKED for f in model._meta.concrete_fields)
    tables = {name: connection.ops.quote_name(model._meta.db_table)
              for name, model in (("assignment", Assignment), ("block", Block), ("study", Study), ("trial", Trial))}
    return _LOCK_SQL.format(columns=columns, lock=lock, **tables)


def vote_lock(trial_token: str) -> Assignment | None:
    """The assignment of the trial ``trial_token``, locked (its row only), with its block and study:
    the vote's lock, and all it reads of them."""
    alias = router.db_for_write(Assignment)
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(_lock_sql(alias), [trial_token])
        values = cursor.fetchone()
    if values is None:
        return None
    instances: list[Any] = []
    start = 0
    for _name, model in _LOCKED:
        fields = model._meta.concrete_fields
        row = [_from_db(f, v, connection) for f, v in zip(fields, values[start:start + len(fields)], strict=True)]
        instances.append(model.from_db(alias, [f.attname for f in fields], row))
        start += len(fields)
    assignment: Assignment
    assignment, block, study = instances
    block.study = study
    assignment.block = block
    return assignment


def _from_db(field: Any, value: Any, connection: Any) -> Any:
    """A column's value as the ORM loads it: a field's own conversion (a JSON field decodes its
    text), a time aware (SQLite keeps UTC without a zone); SQLite's driver already answers its
    booleans as such (Django declares them ``bool``)."""
    if value is None:
        return None
    if hasattr(field, "from_db_value"):
        return field.from_db_value(value, None, connection)
    if isinstance(value, datetime):
        return _aware(value)
    return value


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
    """A vote whose key, trial, owner and answer are checked (``answer_checked``)."""

    key: str
    trial: Trial
    study: Study
    answer: VoteAnswer
    digest: str  # the answer's request hash: the same key with another answer is a conflict
    design: StudyDesign


def _key_checked(vote: VoteInput) -> str:
    key = (vote.idempotency_key or "").strip()
    if not (8 <= len(key) <= 80):
        raise ValidationFailed("missing or malformed idempotency key (reload the page)", field="idempotency_key")
    return key


def answer_checked(
    vote: VoteInput, *, key: str, trial: Trial, study: Study, rater_id: int | None, screen: Mapping[str, Any] | None,
    design: StudyDesign | None = None,
) -> CheckedVote:
    """The rater's own trial and the validated answer (its active axes are the trial's stored screen's)."""
    if vote.rater_id is None or rater_id != vote.rater_id:
        raise Forbidden("this trial is not yours")
    design = design or design_of(study)
    answer = design.answer_clean(
        study=study,
        active_axes=[a["id"] for a in (screen or {}).get("axes") or []] if design.has_axes else [],
        verdict=vote.verdict, confidence=vote.confidence, axes=vote.axes, ratings=vote.ratings,
        rationale=vote.rationale,
    )
    return CheckedVote(key=key, trial=trial, study=study, answer=answer, digest=answer.request_hash(), design=design)


def answer_for_trial(vote: VoteInput, *, design: StudyDesign | None = None) -> CheckedVote:
    """The checked key, the rater's own trial and the validated answer, read by the trial's token
    (a revision's check, before its lock)."""
    key = _key_checked(vote)
    trial = Trial.objects.select_related("assignment__block__study").filter(token=vote.trial_token).order_by().first()
    if trial is None:
        raise NotFound("no such trial")
    study = trial.assignment.block.study
    screen = trial_screen_ensure(trial.pk, trial.screen)
    return answer_checked(vote, key=key, trial=trial, study=study, rater_id=trial.assignment.rater_id, screen=screen,
                          design=design)


def vote_submit(
    vote: VoteInput, *, locked: Assignment | None = None, design: StudyDesign | None = None, show_next: bool = False
) -> VoteResult:
    """Store the answer to a trial canonically, once (docs/protocol.md "Canonical answers",
    "Planning the human study"): Zulip's one ``do_*`` function for the action, in steps.

    The key's check before any lock (``_key_checked``); the assignment's row lock with its study
    (``vote_lock``); then under it: the assignment's trials read once (``_progress_query``, the
    answered trial's stored screen with them), the trial and answer checks (``answer_checked``),
    the replay check (``_vote_replayed``), the state checks (``_vote_state_check``), the insert
    (``_vote_insert``), the candidate versions (``_vote_versions``), the next trial's choice,
    serve-time included (``next_trial_choose``), and the finishing (``_vote_finish``).

    Runs in the caller's transaction (the rater's flow), or in one of its own. Foreign trial →
    Forbidden (403); answered with another key, not the current trial, or a finished assignment →
    Conflict (409); same key and same body → the stored vote again. Submissions to one assignment
    are serialized by its row lock (only that row: a vote never locks the block or the study, so
    raters do not wait for each other). A new vote is counted in ``VOTES_STORED`` once the
    transaction commits.

    ``locked``: the caller's ``vote_lock(trial_token)``, taken in its transaction (it read the
    study from it). ``show_next``: the caller shows the next trial in its response (the htmx and
    JSON answers), so that trial's response clock starts in the vote's transaction (one commit
    instead of two). ``design``: the study's design when the caller looked it up.
    """
    key = _key_checked(vote)
    alias = router.db_for_write(Vote)
    # The caller's transaction when it has one: a refused vote (a conflict) leaves it usable for the
    # screen the caller shows instead.
    joined = transaction.get_connection(alias).in_atomic_block
    with nullcontext() if joined else transaction.atomic(using=alias):
        assignment = locked or vote_lock(vote.trial_token)
        if assignment is None:
            raise NotFound("no such trial")
        result = _vote_locked_steps(vote, key, assignment, design=design, show_next=show_next)
        if not result.replayed:
            transaction.on_commit(VOTES_STORED.inc, using=alias)
    return result


def _vote_locked_steps(
    vote: VoteInput, key: str, assignment: Assignment, *, design: StudyDesign | None, show_next: bool
) -> VoteResult:
    """What ``vote_submit`` does under the assignment's row lock, step by step."""
    study = assignment.block.study
    rows = list(_progress_query(assignment.pk))
    row: Mapping[str, Any] | None = next((r for r in rows if r["token"] == vote.trial_token), None)
    if row is None:
        raise NotFound("no such trial")
    row, screen = _screen_of_row(row)
    checked = answer_checked(vote, key=key, trial=_trial_of_row(row), study=study, rater_id=assignment.rater_id,
                             screen=screen, design=design)
    unanswered = [r["id"] for r in rows if r["vote_ms"] is None]
    # The current trial has no vote by definition: only another trial needs the vote looked up.
    current = bool(unanswered) and unanswered[0] == checked.trial.pk
    replayed = None if current else _vote_replayed(checked, assignment)
    if replayed is not None:
        return replayed
    _vote_state_check(assignment, current=current)
    stored, response_ms = _vote_insert(checked, axes_defaulted=vote.axes_defaulted)
    _vote_versions(checked.trial)
    progress = next_trial_choose(
        study=study, assignment_id=assignment.pk, pairwise=checked.design.pairwise, rows=rows,
        answering=checked.trial.pk, response_ms=response_ms, shown_at=timezone.now() if show_next else None,
    )
    code, progress = _vote_finish(assignment, study, progress, show_next=show_next)
    return VoteResult(vote=stored, replayed=False, finished=progress.next_trial_id is None, completion_code=code,
                      progress=progress)


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


def _vote_finish(assignment: Assignment, study: Study, progress: Progress, *, show_next: bool) -> tuple[str, Progress]:
    """The block finished (its completion code), or the next trial's clock started when it is shown
    now; the progress as it then stands."""
    if progress.next_trial_id is None:
        return _finish(assignment, study), progress
    if show_next and not progress.next_shown:
        # Shown now: its clock starts and the candidate versions it displays are recorded (B.5).
        _shown_now(progress.next_trial_id, timezone.now())
        progress = replace(progress, next_shown=True)
    return "", progress


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


def trial_images(*, trial_token: str) -> TrialImages | None:
    """Who may see a trial's images and the stored file behind each of its slots, from the trial's
    stored screen (one query, joining its assignment and study; None: no such trial)."""
    row = (Trial.objects.filter(token=trial_token).order_by()
           .values("id", "screen", "assignment__rater_id", "assignment__state", "assignment__block__study_id",
                   "assignment__block__study__neutralize_media").first())
    if row is None:
        return None
    screen = row["screen"] or {}
    files = screen.get("neutralized_files" if row["assignment__block__study__neutralize_media"] else "files") or {}
    return TrialImages(
        rater_id=row["assignment__rater_id"], study_id=row["assignment__block__study_id"],
        live=row["assignment__state"] in LIVE_STATES, slots=tuple(files),
        files={str(k): str(v) for k, v in files.items() if v},
    )


def trial_image(*, trial_token: str, slot: str) -> TrialImage | None:
    """The stored image behind one slot of a trial (``trial_images``)."""
    if slot not in ("ref", "left", "right", "item"):
        return None
    found = trial_images(trial_token=trial_token)
    if found is None or slot not in found.slots:
        return None
    return TrialImage(rater_id=found.rater_id, study_id=found.study_id, live=found.live,
                      file=found.files.get(slot))
