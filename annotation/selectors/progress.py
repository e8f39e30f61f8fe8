"""Live progress of a study's human schedule and per-rater quality signals (researcher pages).

Voided assignments are counted apart and never in votes, coverage or quality: their votes stay in
the database but are excluded from analysis. Coverage here is schedule coverage: the share of a
block's comparisons that already have at least one valid (A / B / TIE) main vote — for the
docs/study-kinds.md "Running the other study kinds" kinds, of its comparisons (A / B / TIE), predicates (YES /
NO) or items (any rating). Attention checks are never data: they count as planned and answered trials, never
toward coverage, and get their own pass rate in the quality table.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from django.db.models import Count, Q

from annotation.kinds import design_of
from annotation.models import (
    GOLD_ANSWER,
    GOLD_EXPECTED,
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Label,
    Study,
    Trial,
    Vote,
)
from stats.defaults import GOLD_HONEST_ERROR

LIVE = (AssignmentState.OPEN, AssignmentState.ACTIVE, AssignmentState.FINISHED)


@dataclass(frozen=True)
class BlockProgress:
    block: Block
    size: int
    target: int
    open: int
    active: int
    started: int
    finished: int
    voided: int
    planned_trials: int
    votes: int
    covered: int

    @property
    def claimed(self) -> int:
        return self.active + self.finished

    @property
    def vote_share(self) -> float:
        return self.votes / self.planned_trials if self.planned_trials else 0.0

    @property
    def coverage(self) -> float:
        return self.covered / self.size if self.size else 0.0

    @property
    def vote_percent(self) -> int:
        return round(100 * self.vote_share)


@dataclass(frozen=True)
class StudyProgress:
    blocks: list[BlockProgress]

    @property
    def totals(self) -> dict[str, float]:
        b = self.blocks
        size = sum(x.size for x in b)
        planned = sum(x.planned_trials for x in b)
        votes = sum(x.votes for x in b)
        return {
            "size": size, "target": sum(x.target for x in b), "claimed": sum(x.claimed for x in b),
            "started": sum(x.started for x in b), "finished": sum(x.finished for x in b),
            "voided": sum(x.voided for x in b), "planned_trials": planned, "votes": votes,
            "vote_percent": round(100 * votes / planned) if planned else 0,
            "coverage": (sum(x.covered for x in b) / size) if size else 0.0,
        }


def study_progress(study: Study, *, block: Block | None = None) -> StudyProgress:
    """Per block: assignments by state, votes against planned trials, comparison coverage."""
    blocks = Block.objects.filter(study=study).order_by("position", "name")
    if block is not None:
        blocks = blocks.filter(pk=block.pk)
    blocks = blocks.annotate(
        size=Count("items", distinct=True),
        n_open=Count("assignments", filter=Q(assignments__state=AssignmentState.OPEN), distinct=True),
        n_active=Count("assignments", filter=Q(assignments__state=AssignmentState.ACTIVE), distinct=True),
        n_finished=Count("assignments", filter=Q(assignments__state=AssignmentState.FINISHED), distinct=True),
        n_voided=Count("assignments", filter=Q(assignments__state=AssignmentState.VOIDED), distinct=True),
        n_started=Count(
            "assignments",
            filter=Q(assignments__started_at__isnull=False) & ~Q(assignments__state=AssignmentState.VOIDED),
            distinct=True,
        ),
    )
    trials = (
        Trial.objects.filter(assignment__block__study=study, assignment__state__in=LIVE)
        .values("assignment__block_id")
        .annotate(planned=Count("id"), votes=Count("vote"))
    )
    per_block = {row["assignment__block_id"]: row for row in trials}
    # The trial field naming the unit, and the labels that make a valid answer (None: any).
    design = design_of(study)
    unit, valid = f"trial__{design.unit_field}", design.valid_labels
    answered = Vote.objects.filter(
        trial__assignment__block__study=study, trial__assignment__state__in=LIVE,
        trial__is_repeat=False, trial__attention_expected="",
    )
    if valid is not None:
        answered = answered.filter(label__in=valid)
    covered_rows = answered.values("trial__assignment__block_id").annotate(covered=Count(unit, distinct=True))
    covered = {row["trial__assignment__block_id"]: row["covered"] for row in covered_rows}
    rows = []
    for b in blocks:
        t: dict[str, Any] = dict(per_block.get(b.pk, {}))
        rows.append(BlockProgress(
            block=b, size=b.size, target=b.target_raters, open=b.n_open, active=b.n_active,
            started=b.n_started, finished=b.n_finished, voided=b.n_voided,
            planned_trials=int(t.get("planned", 0)), votes=int(t.get("votes", 0)), covered=covered.get(b.pk, 0),
        ))
    return StudyProgress(blocks=rows)


@dataclass(frozen=True)
class RaterQuality:
    """Quality signals of one assignment: speed, consistency, position bias, abstention."""

    assignment: Assignment
    votes: int
    trials: int
    median_seconds: float | None
    repeat_agree: int
    repeat_pairs: int
    left_share: float | None
    decisive: int
    cannot_judge_share: float | None
    attention_passed: int = 0
    attention_checks: int = 0
    gold_passed: int = 0  # gold trials (issue 30): the identical side chosen / answered
    gold_trials: int = 0
    # Share of the data answers that are the rater's most frequent displayed answer (straight-lining).
    modal_share: float | None = None
    # Exclusion rules this rater is beyond (``quality_flags``), in the rules' words.
    flags: tuple[str, ...] = ()

    @property
    def repeat_agreement(self) -> float | None:
        return self.repeat_agree / self.repeat_pairs if self.repeat_pairs else None


def rater_quality(study: Study, *, block: Block | None = None) -> list[RaterQuality]:
    """One row per claimed assignment (voided ones included, flagged by their state).

    - median seconds per trial: median server-measured response time;
    - hidden-repeat agreement: original and repeat answered with the same canonical label
    (docs/protocol.md "Human reference and agreement");
    - left share: of the A/B answers, the share that chose the candidate shown on the left (a
      position-bias signal: about 0.5 for an unbiased rater, since sides alternate);
    - CANNOT_JUDGE share: of all answers (UNCLEAR for a checklist study);
    - attention checks (other study kinds (docs/study-kinds.md "Scheduling")): passed / answered; checks are
    left out of the other signals.
    """
    assignments = (
        Assignment.objects.filter(block__study=study, rater__isnull=False)
        .select_related("block", "rater__user")
        .order_by("block__position", "slot", "id")
    )
    if block is not None:
        assignments = assignments.filter(block=block)
    assignments = assignments.annotate(n_trials=Count("trials"))
    ids = [a.pk for a in assignments]
    votes = (
        Vote.objects.filter(trial__assignment_id__in=ids)
        .values_list("trial__assignment_id", "trial_id", "label", "response_ms", "trial__swapped",
                     "trial__is_repeat", "trial__repeat_of_id", "trial__attention_expected", "answers")
    )
    abstain = design_of(study).abstain_label
    by_assignment: dict[int, list[tuple]] = defaultdict(list)
    checks_of: dict[int, list[bool]] = defaultdict(list)
    gold_of: dict[int, list[bool]] = defaultdict(list)
    for row in votes:
        answer = _answer_key(row[2], row[8])
        if row[7] == GOLD_EXPECTED:  # known canonical answer; never a data answer
            gold_of[row[0]].append(row[2] == GOLD_ANSWER)
            continue
        if row[7]:
            checks_of[row[0]].append(_displayed(answer, swapped=bool(row[4])) == _expected_key(row[7], row[8]))
            continue
        by_assignment[row[0]].append((*row[:2], answer, *row[3:7]))
    out = []
    for a in assignments:
        rows = by_assignment.get(a.pk, [])
        checks = checks_of.get(a.pk, [])
        label_of = {r[1]: r[2] for r in rows}
        times = [r[3] for r in rows if r[3] is not None]
        pairs = [(label_of.get(r[6]), r[2]) for r in rows if r[5] and r[6] in label_of]
        decisive = [r for r in rows if r[2] in (Label.A, Label.B)]
        left = sum(1 for r in decisive if (r[2] == Label.A) != bool(r[4]))
        cannot = sum(1 for r in rows if r[2] == abstain)
        shown = [_displayed(r[2], swapped=bool(r[4])) for r in rows]
        modal = max((shown.count(v) for v in set(shown)), default=0)
        out.append(RaterQuality(
            # Answered counts every answered trial, attention checks included, as ``trials`` does
            # (issue 17: a finished assignment read 50 / 52).
            assignment=a, votes=len(rows) + len(checks) + len(gold_of.get(a.pk, [])), trials=a.n_trials,
            median_seconds=statistics.median(times) / 1000 if times else None,
            repeat_agree=sum(1 for o, r in pairs if o == r), repeat_pairs=len(pairs),
            left_share=left / len(decisive) if decisive else None, decisive=len(decisive),
            cannot_judge_share=cannot / len(rows) if rows else None,
            attention_passed=sum(checks), attention_checks=len(checks),
            gold_passed=sum(gold_of.get(a.pk, [])), gold_trials=len(gold_of.get(a.pk, [])),
            modal_share=modal / len(rows) if rows else None,
        ))
    rules = quality_rules(study)
    return [replace(q, flags=quality_flags(q, rules)) for q in out]


# The defaults of the exclusion rules the quality page flags: those of
# ``stats.hygiene.HygieneRules`` (annotation imports no other app; a test keeps them
# equal). A study's ``options["exclusion_rules"]`` overrides them, ``null`` turns a rule off.
QUALITY_RULE_DEFAULTS: dict[str, float | int | None] = {
    "min_median_response_ms": 1000.0,
    "straightline_share": 0.9,
    "straightline_min_trials": 10,
    "min_repeat_agreement": None,
    "max_position_bias": None,
    "position_min_trials": 10,
    "max_attention_failures": 0,
    "gold_false_exclusion": 0.01,
    "gold_honest_error": 0.05,
}


def quality_rules(study: Study) -> dict[str, float | int | None]:
    stored = (study.options or {}).get("exclusion_rules") or {}
    if not isinstance(stored, dict):
        return dict(QUALITY_RULE_DEFAULTS)
    rules = {k: stored.get(k, v) for k, v in QUALITY_RULE_DEFAULTS.items()}
    # Settings saved before issue 39: a null gold share switched the gold rule off (as
    # calibration.services.exclusion_rules reads them).
    if "max_gold_failure_share" in stored and stored["max_gold_failure_share"] is None \
            and "gold_false_exclusion" not in stored:
        rules["gold_false_exclusion"] = None
    return rules


def quality_flags(q: RaterQuality, rules: dict[str, float | int | None]) -> tuple[str, ...]:
    """The exclusion rules a rater's signals are beyond (issue 17: flagged on the quality page)."""
    flags = []
    fast = rules["min_median_response_ms"]
    if fast is not None and q.median_seconds is not None and q.median_seconds * 1000 < float(fast):
        flags.append(f"too fast (median under {float(fast) / 1000:g} s)")
    share, min_trials = rules["straightline_share"], int(rules["straightline_min_trials"] or 1)
    if share is not None and q.modal_share is not None and q.votes >= min_trials and q.modal_share >= float(share) - 1e-12:
        flags.append(f"straight-lining (one answer on ≥ {float(share):.0%})")
    agree = rules["min_repeat_agreement"]
    if agree is not None and q.repeat_pairs and (q.repeat_agreement or 0.0) < float(agree) - 1e-12:
        flags.append(f"hidden repeats (agreement under {float(agree):.0%})")
    bias, min_decisive = rules["max_position_bias"], int(rules["position_min_trials"] or 1)
    if bias is not None and q.left_share is not None and q.decisive >= min_decisive \
            and abs(q.left_share - 0.5) > float(bias) + 1e-12:
        flags.append(f"position bias (left share beyond 0.5 ± {float(bias):g})")
    failures = rules["max_attention_failures"]
    if failures is not None and q.attention_checks and q.attention_checks - q.attention_passed > int(failures):
        flags.append("failed attention checks")
    from stats.gold_rule import gold_excludes  # SciPy's binomial tail: loaded by the quality figures only

    level, honest = rules["gold_false_exclusion"], float(rules["gold_honest_error"] or GOLD_HONEST_ERROR)
    if level is not None and q.gold_trials and gold_excludes(
        q.gold_trials - q.gold_passed, q.gold_trials, honest_error=honest, false_exclusion=float(level)
    ):
        flags.append(
            f"failed gold trials ({q.gold_trials - q.gold_passed} of {q.gold_trials}: "
            f"improbable at {honest:.0%} honest error)"
        )
    return tuple(flags)


def _answer_key(label: str, answers: dict[str, Any]) -> str:
    """One comparable value per answer: the label, or a rating's values in dimension-name order."""
    ratings = (answers or {}).get("ratings")
    if ratings:
        return "|".join(f"{k}={ratings[k]}" for k in sorted(ratings))
    return label


def _displayed(answer: str, *, swapped: bool) -> str:
    """The canonical answer as the rater saw it (docs/protocol.md "Canonical answers"): a swapped display
    exchanges A and B."""
    return {"A": "B", "B": "A"}.get(answer, answer) if swapped else answer


def _expected_key(expected: str, answers: dict[str, Any]) -> str:
    """What an attention check asked for, in ``_answer_key`` form (a rating: every dimension)."""
    ratings = (answers or {}).get("ratings")
    if ratings:
        return "|".join(f"{k}={expected}" for k in sorted(ratings))
    return expected


def block_assignments(block: Block) -> list[Assignment]:
    """A block's assignments with their answered-trial counts, slot order (voided ones too)."""
    return list(
        Assignment.objects.filter(block=block)
        .select_related("rater")
        .annotate(n_trials=Count("trials", distinct=True), n_votes=Count("trials__vote", distinct=True))
        .order_by("slot", "id")
    )


def block_size(block: Block) -> int:
    return BlockItem.objects.filter(block=block).count()
