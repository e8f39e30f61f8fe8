"""Reads of the ranking app: the docs/protocol.md "Deployment leaderboard" leaderboard inputs and the
deployment schedule state.

``leaderboard_inputs`` is the adapter in front of ``stats.bradley_terry``: it turns the stored
comparisons, judge outputs and (optionally) human votes into arrays. Three queries, all
``values_list`` (no per-row lookups): the study's comparisons with their page and systems, the
judges' primary-order, repeat-0 valid outputs, and, with ``use_human_labels``, the votes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet

from annotation.models import Candidate, Comparison, ComparisonSet, Study, System
from calibration.models import CoefficientSet
from judges.models import Judge, JudgeOutput, Order, OutputStatus
from ranking.models import Leaderboard

if TYPE_CHECKING:
    import numpy as np

    from stats.render_failures import FailureOutcomes

VALID_HUMAN_LABELS = ("A", "TIE", "B")


@dataclass(frozen=True, eq=False)
class LeaderboardInputs:
    """The scored comparisons of a study's schedule (docs/protocol.md "Deployment leaderboard" (Proxy
    outcome)).

    ``systems``/``names``: bundle ids and names of the systems that appear in a scored comparison,
    in the study's system order; ``a``/``b`` index them. ``p[i]`` is comparison i's outcome for
    canonical A: the proxy ``p̂_i = clip(Σ_j β_j v_ij, 0, 1)`` or, when ``from_human[i]``, the
    human reference ``h_i`` (docs/protocol.md "Human reference and agreement"). ``n_skipped`` counts the
    comparisons left out (some judge of the set without a valid primary-order, repeat-0 output, and no human
    label in use).
    """

    systems: tuple[str, ...]
    names: tuple[str, ...]
    comparisons: tuple[str, ...]
    pages: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    p: np.ndarray
    from_human: np.ndarray
    n_skipped: int
    judges: tuple[str, ...]
    coefficients: tuple[float, ...]
    #: With human labels: what the study's exclusion rules removed from their votes (None: no rules).
    exclusions: dict[str, Any] | None = None
    #: docs/protocol.md "Failed renders in the leaderboard": the rule, the outcomes it added, the
    #: comparisons it left out and each system's failure rate (None: a study with neither HTML
    #: render settings nor a failed render). ``from_render_failure[i]``: outcome i is a failed
    #: render's loss added by the ``aescode`` rule, not a judged comparison.
    render_failures: dict[str, Any] | None = None
    from_render_failure: np.ndarray | None = None
    #: A serve-time adaptive study's human votes: each outcome's allocation probability, for the
    #: debiased fit of docs/protocol.md "Scores of an adaptive study" (None: every other leaderboard).
    propensity: np.ndarray | None = None
    #: The seed of the debiased fit's parametric bootstrap (the study's seed, as on its page).
    debias_seed: int = 0
    #: The estimator's name when it is not the model's own (an adaptive study of whole blocks).
    estimator: str = ""

    @property
    def n_comparisons(self) -> int:
        return len(self.comparisons)

    @property
    def n_pages(self) -> int:
        return len(set(self.pages))


def coefficient_judges(coefficient_set: CoefficientSet) -> tuple[list[str], np.ndarray]:
    """The set's judges (in fit order when recorded, else sorted) and their β."""
    import numpy as np

    order = (coefficient_set.report or {}).get("judges")
    names = [str(name) for name in coefficient_set.coefficients]
    if isinstance(order, list) and sorted(map(str, order)) == sorted(names):
        names = [str(name) for name in order]
    else:
        names = sorted(names)
    beta = np.array([float(coefficient_set.coefficients[name]) for name in names], dtype=float)
    return names, beta


def kept_main_votes(*, study: Study) -> tuple[Any, dict[str, Any] | None]:
    """The valid main votes (A, TIE, B; no hidden repeat, voided assignment, gold or attention
    trial) the study's saved exclusion rules keep, as a ``votes_frame``, and the ``exclusions``
    object of those rules (None when none apply; issue 30: by default,
    ``calibration.services.exclusion_rules.effective_rules``)."""
    # Imported here: pandas and the votes frame are needed only when human votes are read.
    from annotation.selectors.votes import votes_frame
    from calibration.services.agreement import reference_votes_filtered
    from calibration.services.exclusion_rules import effective_rules

    votes = votes_frame(study=study, include_voided=False)
    exclusions = None
    rules, by_default = effective_rules(study, None)
    if rules is not None:
        votes, exclusions = reference_votes_filtered(study=study, votes=votes, rules=rules)
        exclusions["applied_by_default"] = by_default
    if votes.empty:
        return votes, exclusions
    votes = votes[~votes["is_repeat"].to_numpy(dtype=bool)]
    return votes[votes["label"].isin(VALID_HUMAN_LABELS)], exclusions


def human_references(*, study: Study) -> tuple[dict[str, float], dict[str, Any] | None]:
    """``{comparison id: h_i}`` over comparisons with ≥ 1 valid main vote
    (docs/protocol.md "Human reference and agreement"), and the ``exclusions`` object of the rules that chose
    the votes (None when none apply).

    Main votes only (hidden repeats excluded), voided assignments excluded; valid = A, TIE, B.
    The study's saved exclusion rules apply as in the agreement and calibration reports (issue 30:
    by default, ``calibration.services.exclusion_rules.effective_rules``).
    """
    import numpy as np

    from stats.preference import human_preferences

    main, exclusions = kept_main_votes(study=study)
    if main.empty:
        return {}, exclusions
    ids = sorted(set(main["comparison"].astype(str)))
    _, h = human_preferences(main["label"].to_numpy(), main["comparison"].astype(str).to_numpy(), ids)
    return {cid: float(value) for cid, value in zip(ids, h, strict=True) if np.isfinite(value)}, exclusions


def _comparison_rows(*, study: Study) -> list[tuple[Any, ...]]:
    """The study's comparisons (both sets): id, external id, page, system ids of A and B, and
    whether each candidate rendered. One query."""
    return list(
        Comparison.objects.filter(study=study)
        .order_by("id")
        .values_list(
            "id",
            "external_id",
            "page__external_id",
            "candidate_a__system_id",
            "candidate_b__system_id",
            "candidate_a__rendered",
            "candidate_b__rendered",
        )
    )


def _failed_side(rows: list[tuple[Any, ...]]) -> np.ndarray:
    """docs/protocol.md "Failed renders in the leaderboard": a comparison where either candidate
    failed to render (a candidate replaced by a failed render after it was scheduled) is never
    scored from its votes, under either rule."""
    import numpy as np

    return np.fromiter((not (row[5] and row[6]) for row in rows), dtype=bool, count=len(rows))


def leaderboard_inputs(
    *, study: Study, coefficient_set: CoefficientSet, use_human_labels: bool = False
) -> LeaderboardInputs:
    """Every comparison of the study's schedule (both sets), scored as
    docs/protocol.md "Deployment leaderboard" says.

    One canonical vote per judge of the set: its ``primary``-order, repeat-0 output, valid only
    (v = 1 / 0.5 / 0 for A / TIE / B). A comparison lacking it for any judge of the set is skipped
    and counted, unless ``use_human_labels`` and it has a human reference ``h_i``, which then
    replaces p̂ (whether or not the judges answered).
    """
    import numpy as np

    from stats.preference import VOTE_VALUE
    from stats.proxy import proxy_outcomes

    judges, beta = coefficient_judges(coefficient_set)
    rows = _comparison_rows(study=study)
    position = {row[0]: k for k, row in enumerate(rows)}
    judge_column = {
        judge_id: judges.index(name)
        for judge_id, name in Judge.objects.filter(name__in=judges).values_list("id", "name")
    }
    votes = np.full((len(rows), len(judges)), np.nan)
    if judge_column and rows:
        outputs = JudgeOutput.objects.filter(
            comparison__study=study,
            judge_id__in=list(judge_column),
            order=Order.PRIMARY,
            repeat=0,
            status=OutputStatus.VALID,
        ).values_list("comparison_id", "judge_id", "winner")
        for comparison_id, judge_id, winner in outputs.iterator(chunk_size=10_000):
            value = VOTE_VALUE.get(winner)
            if value is not None:
                votes[position[comparison_id], judge_column[judge_id]] = value
    complete = np.all(np.isfinite(votes), axis=1) if judges else np.zeros(len(rows), dtype=bool)
    p = np.full(len(rows), np.nan)
    if complete.any():
        p[complete] = proxy_outcomes(votes[complete], beta)
    from_human = np.zeros(len(rows), dtype=bool)
    exclusions = None
    if use_human_labels:
        h, exclusions = human_references(study=study)
        for k, row in enumerate(rows):
            value = h.get(row[1])
            if value is not None:
                p[k] = value
                from_human[k] = True
    failed_side = _failed_side(rows)
    scored = np.flatnonzero(np.isfinite(p) & ~failed_side)
    return _assemble_inputs(
        study=study,
        rows=rows,
        outcome_rows=scored,
        p=p[scored],
        from_human=from_human[scored],
        n_skipped=int((~np.isfinite(p) & ~failed_side).sum()),
        judges=tuple(judges),
        coefficients=tuple(float(x) for x in beta),
        exclusions=exclusions,
    )


def human_leaderboard_inputs(*, study: Study, debiased: bool = False) -> LeaderboardInputs:
    """The study's valid main votes as outcomes (docs/protocol.md "Human leaderboard"): one per
    vote, 1 / ½ / 0 for canonical A's A / TIE / B, on its comparison's page.

    The study's saved exclusion rules choose the votes as in the agreement and calibration
    reports (``exclusions`` says whom they left out); hidden repeats, ``CANNOT_JUDGE``, gold and
    attention trials and voided assignments are never outcomes; a comparison with a failed render
    is never scored, and the ``aescode`` rule's losses of failed outputs each weigh as many votes
    as a voted comparison has on average. ``n_skipped`` counts the comparisons without a kept vote.
    With ``debiased`` (a serve-time adaptive study), ``propensity`` holds each vote's allocation
    probability (1 / K for a vote not chosen at serve time, and for a failure's loss).
    """
    import numpy as np

    from stats.preference import VOTE_VALUE

    rows = _comparison_rows(study=study)
    position = {row[1]: k for k, row in enumerate(rows)}
    votes, exclusions = kept_main_votes(study=study)
    if not votes.empty:
        votes = votes[votes["comparison"].isin(list(position))]
    labels = votes["label"].tolist() if not votes.empty else []
    vote_rows = np.fromiter(
        (position[c] for c in (votes["comparison"].tolist() if labels else [])), dtype=np.int64, count=len(labels)
    )
    points = np.array([VOTE_VALUE[label] for label in labels], dtype=np.float64)
    failed_side = _failed_side(rows)
    keep = ~failed_side[vote_rows]
    voted = np.zeros(len(rows), dtype=bool)
    voted[vote_rows[keep]] = True
    n_voted = int(voted.sum())
    propensity = None
    if debiased:
        raw = votes["allocation_probability"].to_numpy(dtype=float) if labels else np.zeros(0)
        propensity = raw[keep]
    return _assemble_inputs(
        study=study,
        rows=rows,
        outcome_rows=vote_rows[keep],
        p=points[keep],
        from_human=np.ones(int(keep.sum()), dtype=bool),
        n_skipped=int((~voted & ~failed_side).sum()),
        judges=(),
        coefficients=(),
        exclusions=exclusions,
        failure_repeat=max(1, round(int(keep.sum()) / n_voted)) if n_voted else 1,
        propensity=propensity,
        debias_seed=int(study.seed or 0),
    )


def _assemble_inputs(
    *,
    study: Study,
    rows: list[tuple[Any, ...]],
    outcome_rows: np.ndarray,
    p: np.ndarray,
    from_human: np.ndarray,
    n_skipped: int,
    judges: tuple[str, ...],
    coefficients: tuple[float, ...],
    exclusions: dict[str, Any] | None,
    failure_repeat: int = 1,
    propensity: np.ndarray | None = None,
    debias_seed: int = 0,
) -> LeaderboardInputs:
    """The inputs from scored outcomes (``outcome_rows``: each outcome's index in ``rows``, none
    with a failed render) plus the failure rule's outcomes, each ``failure_repeat`` times
    (docs/protocol.md "Failed renders in the leaderboard")."""
    import numpy as np

    scored = np.asarray(outcome_rows, dtype=np.int64)
    system_rows = list(
        System.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("id", "external_id", "name")
    )
    summary, extra = _render_failures(
        study=study, system_rows=system_rows, n_left_out=int(_failed_side(rows).sum())
    )
    extra_pages = tuple(page for page in extra.pages for _ in range(failure_repeat))
    extra_a = np.repeat(extra.a, failure_repeat).tolist()
    extra_b = np.repeat(extra.b, failure_repeat).tolist()
    extra_p = np.repeat(extra.p, failure_repeat)
    used = {rows[k][3] for k in scored.tolist()} | {rows[k][4] for k in scored.tolist()}
    used |= {system_rows[m][0] for m in (*extra_a, *extra_b)}
    kept = [row for row in system_rows if row[0] in used]
    index = {row[0]: m for m, row in enumerate(kept)}
    by_position = [index.get(row[0], -1) for row in system_rows]
    if summary is not None and failure_repeat > 1:
        summary["votes_per_failure_outcome"] = failure_repeat
    k_pairs = len(kept) * (len(kept) - 1) // 2
    return LeaderboardInputs(
        systems=tuple(row[1] for row in kept),
        names=tuple(row[2] for row in kept),
        comparisons=tuple(rows[k][1] for k in scored.tolist())
        + tuple(f"render failure {page}" for page in extra_pages),
        pages=tuple(rows[k][2] for k in scored.tolist()) + extra_pages,
        a=np.concatenate(
            [
                np.fromiter((index[rows[k][3]] for k in scored.tolist()), dtype=np.int64, count=len(scored)),
                np.asarray([by_position[m] for m in extra_a], dtype=np.int64),
            ]
        ),
        b=np.concatenate(
            [
                np.fromiter((index[rows[k][4]] for k in scored.tolist()), dtype=np.int64, count=len(scored)),
                np.asarray([by_position[m] for m in extra_b], dtype=np.int64),
            ]
        ),
        p=np.concatenate([np.asarray(p, dtype=np.float64), extra_p]),
        from_human=np.concatenate([np.asarray(from_human, dtype=bool), np.zeros(len(extra_pages), dtype=bool)]),
        n_skipped=n_skipped,
        judges=judges,
        coefficients=coefficients,
        exclusions=exclusions,
        render_failures=summary,
        from_render_failure=np.concatenate(
            [np.zeros(len(scored), dtype=bool), np.ones(len(extra_pages), dtype=bool)]
        ),
        propensity=None
        if propensity is None
        else np.concatenate(
            [
                np.where(np.isfinite(propensity), propensity, 1.0 / max(1, k_pairs)),
                np.full(len(extra_pages), 1.0 / max(1, k_pairs)),
            ]
        ),
        debias_seed=debias_seed,
    )


def _render_failures(
    *, study: Study, system_rows: list[tuple[int, str, str]], n_left_out: int
) -> tuple[dict[str, Any] | None, FailureOutcomes]:
    """The study's failed renders for the leaderboard
    (docs/protocol.md "Failed renders in the leaderboard"): the report's ``render_failures`` (None
    for a study with neither render settings nor a failed render) and the outcomes its rule adds
    (``stats.render_failures``; system indices are positions in ``system_rows``). One query over
    the candidates."""
    from annotation.render.settings import failure_rule_of
    from annotation.selectors.studies import RenderFailureRate
    from stats.render_failures import failure_outcomes

    rule = failure_rule_of(study.options)
    position = {row[0]: m for m, row in enumerate(system_rows)}
    rendered: dict[str, dict[int, bool]] = {}
    for page, system_id, ok in Candidate.objects.filter(page__study=study).values_list(
        "page__external_id", "system_id", "rendered"
    ):
        if system_id in position:
            rendered.setdefault(page, {})[position[system_id]] = bool(ok)
    extra = failure_outcomes(rendered, rule=rule)
    outputs = Counter(m for flags in rendered.values() for m in flags)
    failed = Counter(m for flags in rendered.values() for m, ok in flags.items() if not ok)
    if not (study.options or {}).get("render") and not failed:
        return None, extra
    rates = [
        RenderFailureRate(system=row[1], name=row[2], outputs=outputs[m], failed=failed[m]).to_json()
        for m, row in enumerate(system_rows)
    ]
    return {
        "rule": rule,
        "n_failure_outcomes": len(extra.pages),
        "n_left_out": n_left_out,
        "systems": rates,
    }, extra


# --------------------------------------------------------------------------- leaderboard rows


def leaderboards_for_study(*, study: Study) -> QuerySet[Leaderboard]:
    """The study's leaderboards, newest first, without the (large) input snapshot."""
    return (
        Leaderboard.objects.filter(study=study)
        .select_related("coefficient_set")
        .defer("inputs")
        .order_by("-created_at", "-id")
    )


def leaderboard_get(*, study: Study, leaderboard_id: int) -> Leaderboard | None:
    return leaderboards_for_study(study=study).filter(pk=leaderboard_id).first()


def leaderboard_published(*, public_token: str) -> Leaderboard | None:
    """A published, finished leaderboard by its public token (None otherwise: the page is a 404)."""
    return (
        Leaderboard.objects.filter(public_token=public_token, published=True, status=Leaderboard.Status.DONE)
        .select_related("study", "coefficient_set")
        .defer("inputs")
        .first()
    )


# --------------------------------------------------------------------------- deployment schedule


@dataclass(frozen=True)
class ScheduleState:
    """What the study's comparisons achieve against the docs/protocol.md "Deployment leaderboard" quotas (both
    sets counted)."""

    n_human: int
    n_deployment: int
    n_systems: int
    pair_count_min: int
    pair_count_max: int
    appearances_min: int
    appearances_max: int
    n_eligible_pages: int
    deployment_with_outputs: int


def schedule_existing_human(*, study: Study) -> list[tuple[str, str, str]]:
    """The human-study comparisons ``(page, system_a, system_b)`` (kept and counted,
    docs/protocol.md "Deployment leaderboard")."""
    return list(
        Comparison.objects.filter(study=study, set=ComparisonSet.HUMAN)
        .order_by("id")
        .values_list(
            "page__external_id", "candidate_a__system__external_id", "candidate_b__system__external_id"
        )
    )


def schedule_eligible_pages(*, study: Study) -> dict[str, list[str]]:
    """``{page id: systems rendered on it}`` for pages where at least two systems rendered
    (docs/protocol.md "Deployment leaderboard")."""
    rendered: dict[str, list[str]] = {}
    for page, system in (
        Candidate.objects.filter(page__study=study, rendered=True, image__isnull=False)
        .order_by("page__external_id", "system__position", "system__external_id")
        .values_list("page__external_id", "system__external_id")
    ):
        rendered.setdefault(page, []).append(system)
    return {page: systems for page, systems in rendered.items() if len(systems) >= 2}


def schedule_state(*, study: Study) -> ScheduleState:
    """Pair counts and appearances over all of the study's comparisons (human-study ones included)."""
    systems = list(
        System.objects.filter(study=study).order_by("position", "external_id").values_list("id", flat=True)
    )
    rows = list(
        Comparison.objects.filter(study=study).values_list(
            "set", "candidate_a__system_id", "candidate_b__system_id"
        )
    )
    pairs: Counter[tuple[int, int]] = Counter()
    appear: Counter[int] = Counter()
    for _set, a, b in rows:
        pairs[(min(a, b), max(a, b))] += 1
        appear[a] += 1
        appear[b] += 1
    pair_values = [pairs[(min(s, t), max(s, t))] for s, t in combinations(systems, 2)] or [0]
    appearance_values = [appear[s] for s in systems] or [0]
    n_deployment = sum(1 for row in rows if row[0] == ComparisonSet.DEPLOYMENT)
    return ScheduleState(
        n_human=len(rows) - n_deployment,
        n_deployment=n_deployment,
        n_systems=len(systems),
        pair_count_min=min(pair_values),
        pair_count_max=max(pair_values),
        appearances_min=min(appearance_values),
        appearances_max=max(appearance_values),
        n_eligible_pages=len(schedule_eligible_pages(study=study)),
        deployment_with_outputs=Comparison.objects.filter(study=study, set=ComparisonSet.DEPLOYMENT)
        .filter(Q(judge_outputs__isnull=False) | Q(trials__isnull=False))
        .distinct()
        .count(),
    )


def deployment_external_ids(*, study: Study) -> Sequence[str]:
    """External ids of the study's comparisons of the form ``d<digits>`` (for numbering)."""
    return list(
        Comparison.objects.filter(study=study, external_id__regex=r"^d[0-9]+$").values_list(
            "external_id", flat=True
        )
    )


def study_system_ids(*, study: Study) -> frozenset[str]:
    """The study's system ids (bundle ids)."""
    return frozenset(System.objects.filter(study=study).values_list("external_id", flat=True))
