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


def human_references(*, study: Study) -> tuple[dict[str, float], dict[str, Any] | None]:
    """``{comparison id: h_i}`` over comparisons with ≥ 1 valid main vote
    (docs/protocol.md "Human reference and agreement"), and the ``exclusions`` object of the rules that chose
    the votes (None when none apply).

    Main votes only (hidden repeats excluded), voided assignments excluded; valid = A, TIE, B.
    The study's saved exclusion rules apply as in the agreement and calibration reports (issue 30:
    by default, ``calibration.services.exclusion_rules.effective_rules``).
    """
    # Imported here: pandas and the votes frame are needed only with --use-human-labels.
    import numpy as np

    from annotation.selectors.votes import votes_frame
    from calibration.services.agreement import reference_votes_filtered
    from calibration.services.exclusion_rules import effective_rules
    from stats.preference import human_preferences

    votes = votes_frame(study=study, include_voided=False)
    exclusions = None
    rules, by_default = effective_rules(study, None)
    if rules is not None:
        votes, exclusions = reference_votes_filtered(study=study, votes=votes, rules=rules)
        exclusions["applied_by_default"] = by_default
    if votes.empty:
        return {}, exclusions
    main = votes[~votes["is_repeat"].to_numpy(dtype=bool)]
    main = main[main["label"].isin(VALID_HUMAN_LABELS)]
    if main.empty:
        return {}, exclusions
    ids = sorted(set(main["comparison"].astype(str)))
    _, h = human_preferences(main["label"].to_numpy(), main["comparison"].astype(str).to_numpy(), ids)
    return {cid: float(value) for cid, value in zip(ids, h, strict=True) if np.isfinite(value)}, exclusions


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
    rows = list(
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
    # docs/protocol.md "Failed renders in the leaderboard": a comparison where either candidate
    # failed to render (a candidate replaced by a failed render after it was scheduled) is never
    # scored from its votes, under either rule.
    failed_side = np.fromiter((not (row[5] and row[6]) for row in rows), dtype=bool, count=len(rows))
    judged = np.isfinite(p) & ~failed_side
    scored = np.flatnonzero(judged)
    system_rows = list(
        System.objects.filter(study=study)
        .order_by("position", "external_id")
        .values_list("id", "external_id", "name")
    )
    summary, extra = _render_failures(study=study, system_rows=system_rows, n_left_out=int(failed_side.sum()))
    used = {rows[k][3] for k in scored} | {rows[k][4] for k in scored}
    used |= {system_rows[m][0] for m in (*extra.a.tolist(), *extra.b.tolist())}
    kept = [row for row in system_rows if row[0] in used]
    index = {row[0]: m for m, row in enumerate(kept)}
    by_position = [index.get(row[0], -1) for row in system_rows]
    return LeaderboardInputs(
        systems=tuple(row[1] for row in kept),
        names=tuple(row[2] for row in kept),
        comparisons=tuple(rows[k][1] for k in scored)
        + tuple(f"render failure {page}" for page in extra.pages),
        pages=tuple(rows[k][2] for k in scored) + extra.pages,
        a=np.concatenate(
            [
                np.fromiter((index[rows[k][3]] for k in scored), dtype=np.int64, count=len(scored)),
                np.asarray([by_position[m] for m in extra.a.tolist()], dtype=np.int64),
            ]
        ),
        b=np.concatenate(
            [
                np.fromiter((index[rows[k][4]] for k in scored), dtype=np.int64, count=len(scored)),
                np.asarray([by_position[m] for m in extra.b.tolist()], dtype=np.int64),
            ]
        ),
        p=np.concatenate([p[scored], extra.p]),
        from_human=np.concatenate([from_human[scored], np.zeros(len(extra.pages), dtype=bool)]),
        n_skipped=int(len(rows) - len(scored) - failed_side.sum()),
        judges=tuple(judges),
        coefficients=tuple(float(x) for x in beta),
        exclusions=exclusions,
        render_failures=summary,
        from_render_failure=np.concatenate(
            [np.zeros(len(scored), dtype=bool), np.ones(len(extra.pages), dtype=bool)]
        ),
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
