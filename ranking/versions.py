"""Which judge outputs a leaderboard scored, and how a candidate update moved it (paper B.5).

Two reports, both read-only:

- ``scoring_provenance``: of the outputs a leaderboard scores (one primary-order, repeat-0 valid
  output per judge of the set per scored comparison), how many were *reused* — they existed before
  the deployment schedule was made, e.g. from the calibration runs — and how many are *new*.
  ``run_judges`` is idempotent per (judge, comparison, order, repeat), so a reused output is never
  called again; this counts it.
- ``version_sensitivity``: an earlier leaderboard against a later one (or against now): the
  comparisons whose candidate versions changed in between (*touched*), the scoring outputs
  *refreshed* (on touched comparisons) vs *retained* (made before the earlier leaderboard) vs
  *new* (made since on untouched ones), the earlier outputs superseded, the human-study
  comparisons that changed version (their labels no longer validate them), and per system the rank
  change and score delta. Pair identities, quotas and coefficients are the update's invariants
  (``annotation.services.bundles.update``), so what moves is the candidates only.
- ``leaderboard_earlier`` / ``leaderboard_version_sensitivity``: the earlier leaderboard a report
  is compared to (``--compare-to ID``, the page's choice), and the page's ``version_sensitivity``
  of a stored leaderboard.

An output judged the candidate versions in force when it was made: ``import_study --update``
refuses while judge calls run on a comparison it touches.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import BooleanField, Count, ExpressionWrapper, Min, Q, Value

from annotation.errors import ArbiterError, NotFound, ValidationFailed
from annotation.models import Comparison, ComparisonSet, Study
from annotation.selectors.candidate_versions import VersionTimeline, labelled_versions, version_timeline
from judges.models import Judge, JudgeOutput, Order, OutputStatus
from ranking.models import Leaderboard

MAX_LISTED = 200  # comparisons named in a report; the counts are always complete


def _scored_keys(inputs: Mapping[str, Any]) -> list[str]:
    """Bundle ids of the comparisons a leaderboard scored from judge outputs (not from h_i, nor a
    failed render's loss added by the ``aescode`` rule)."""
    from_human = list(inputs.get("from_human") or [])
    from_failure = list(inputs.get("from_render_failure") or [])
    comparisons = list(inputs.get("comparisons") or [])
    return [
        c
        for k, c in enumerate(comparisons)
        if not (k < len(from_human) and from_human[k]) and not (k < len(from_failure) and from_failure[k])
    ]


def deployment_started_at(*, study: Study) -> datetime | None:
    """When the deployment schedule was made: its first comparison's creation (None: no schedule)."""
    value = Comparison.objects.filter(study=study, set=ComparisonSet.DEPLOYMENT).aggregate(
        first=Min("created_at")
    )
    return value["first"]


def _outputs_in_force(
    *,
    study: Study,
    comparisons: Sequence[str],
    judges: Sequence[str],
    at: datetime | None,
    made_before: datetime | None,
    inclusive: bool,
) -> dict[str, tuple[int, int]]:
    """{comparison: (outputs, of which made before ``made_before``)} over the scoring outputs in force at ``at``.

    ``at`` None: now. ``made_before`` None: every output counts as made before. The flag is
    counted by the database (no datetime conversion of 50,000 rows); only the outputs of
    comparisons whose candidates were ever replaced are read with their times, to tell which
    version they judged.
    """
    wanted = set(comparisons)
    ids: dict[int, tuple[str, int, int, bool]] = {
        pk: (ext, a, b, va > 1 or vb > 1)
        for pk, ext, a, b, va, vb in Comparison.objects.filter(study=study).values_list(
            "pk",
            "external_id",
            "candidate_a_id",
            "candidate_b_id",
            "candidate_a__version",
            "candidate_b__version",
        )
        if ext in wanted
    }
    judge_ids = list(Judge.objects.filter(name__in=list(judges)).values_list("pk", flat=True))
    manager = JudgeOutput.objects if at is None else JudgeOutput.all_versions
    rows = manager.filter(
        comparison__study=study,
        judge_id__in=judge_ids,
        order=Order.PRIMARY,
        repeat=0,
        status=OutputStatus.VALID,
    )
    if at is not None:
        rows = rows.filter(created_at__lte=at)
    if made_before is None:
        early: Any = Value(True)
    else:
        early = ExpressionWrapper(
            Q(created_at__lte=made_before) if inclusive else Q(created_at__lt=made_before),
            output_field=BooleanField(),
        )
    replaced = [pk for pk, (_, _, _, changed) in ids.items() if changed] if at is not None else []
    # Per comparison: outputs in force (one per judge) and how many of them were made early.
    found: dict[str, tuple[int, int]] = {}
    plain = rows.exclude(comparison_id__in=replaced) if replaced else rows
    counted = (
        plain.annotate(early=early)
        .values("comparison_id")
        .annotate(n=Count("pk"), n_early=Count("pk", filter=Q(early=True)))
        .values_list("comparison_id", "n", "n_early")
    )
    for comparison_id, n, n_early in counted:
        if comparison_id in ids:
            found[ids[comparison_id][0]] = (n, n_early)
    if replaced and at is not None:
        timeline = version_timeline(candidate_ids=[x for pk in replaced for x in ids[pk][1:3]])
        latest: dict[tuple[int, int], datetime] = {}
        for comparison_id, judge_id, created_at in rows.filter(comparison_id__in=replaced).values_list(
            "comparison_id", "judge_id", "created_at"
        ):
            _, a, b, _ = ids[comparison_id]
            if (timeline.at(a, created_at), timeline.at(b, created_at)) != (
                timeline.at(a, at),
                timeline.at(b, at),
            ):
                continue  # judged a version no longer in force at ``at``
            key = (comparison_id, judge_id)
            if key not in latest or created_at > latest[key]:
                latest[key] = created_at
        for (comparison_id, _), created_at in latest.items():
            ext = ids[comparison_id][0]
            n, n_early = found.get(ext, (0, 0))
            made = made_before is None or (
                created_at <= made_before if inclusive else created_at < made_before
            )
            found[ext] = (n + 1, n_early + int(made))
    return found


def scoring_provenance(*, study: Study, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Reused vs new among the outputs the leaderboard scores (see the module docstring)."""
    since = deployment_started_at(study=study)
    found = _outputs_in_force(
        study=study,
        comparisons=_scored_keys(inputs),
        judges=list(inputs.get("judges") or []),
        at=None,
        made_before=since,
        inclusive=False,
    )
    total = sum(n for n, _ in found.values())
    reused = sum(n_early for _, n_early in found.values())
    return {
        "scoring_outputs": total,
        "reused": reused,
        "new": total - reused,
        "deployment_scheduled_at": since.isoformat() if since else None,
    }


def _versions(
    timeline: VersionTimeline, a: int, b: int, at: datetime | None, now: tuple[int, int]
) -> tuple[int, int]:
    return now if at is None else (timeline.at(a, at), timeline.at(b, at))


def leaderboard_moment(leaderboard: Leaderboard) -> datetime:
    """When the leaderboard read its inputs."""
    return leaderboard.started_at or leaderboard.created_at


def version_sensitivity(
    *,
    study: Study,
    earlier: Leaderboard,
    inputs: Mapping[str, Any],
    result: Mapping[str, Any],
    at: datetime | None = None,
) -> dict[str, Any]:
    """The paper B.5 report of ``result`` (computed from ``inputs`` at ``at``; None: now) against ``earlier``."""
    if earlier.study_id != study.pk:
        raise ValueError("the earlier leaderboard belongs to another study")
    before = leaderboard_moment(earlier)
    rows = list(
        Comparison.objects.filter(study=study)
        .order_by("pk")
        .values_list(
            "pk",
            "external_id",
            "set",
            "candidate_a_id",
            "candidate_b_id",
            "candidate_a__version",
            "candidate_b__version",
            "created_at",
        )
    )
    replaced = [r for r in rows if r[5] > 1 or r[6] > 1]
    timeline = version_timeline(candidate_ids=[x for r in replaced for x in (r[3], r[4])])
    touched = []
    for pk, ext, set_, a, b, va, vb, created_at in replaced:
        if created_at > before:
            continue  # scheduled after the earlier leaderboard: new, not touched
        then = (timeline.at(a, before), timeline.at(b, before))
        later = _versions(timeline, a, b, at, (va, vb))
        if then != later:
            touched.append((pk, ext, set_, then, later))
    touched_ids = {ext for _, ext, _, _, _ in touched}

    found = _outputs_in_force(
        study=study,
        comparisons=_scored_keys(inputs),
        judges=list(inputs.get("judges") or []),
        at=at,
        made_before=before,
        inclusive=True,
    )
    refreshed = sum(n for ext, (n, _) in found.items() if ext in touched_ids)
    retained = sum(n_early for ext, (_, n_early) in found.items() if ext not in touched_ids)
    new = sum(n for n, _ in found.values()) - refreshed - retained

    superseded = 0
    touched_pks = [pk for pk, *_ in touched]
    sides = {r[0]: (r[3], r[4]) for r in replaced}
    for comparison_id, created_at in JudgeOutput.all_versions.filter(
        comparison_id__in=touched_pks, superseded=True, created_at__lte=before
    ).values_list("comparison_id", "created_at"):
        a, b = sides[comparison_id]
        if (timeline.at(a, created_at), timeline.at(b, created_at)) == (
            timeline.at(a, before),
            timeline.at(b, before),
        ):
            superseded += 1

    human = [t for t in touched if t[2] == ComparisonSet.HUMAN]
    votes = labelled_versions(comparison_ids=[pk for pk, *_ in human])
    human_rows = []
    for pk, ext, _, then, later in human:
        counts: Mapping[tuple[int, int], int] = votes.get(pk, {})
        human_rows.append(
            {
                "comparison": ext,
                "versions_before": list(then),
                "versions_now": list(later),
                "votes_on_current_versions": int(sum(n for pair, n in counts.items() if pair == later)),
                "votes_on_earlier_versions": int(sum(n for pair, n in counts.items() if pair != later)),
            }
        )
    systems = system_changes(
        earlier.result.get("systems", []), result.get("systems", []), earlier=f"leaderboard {earlier.pk}"
    )
    removed = removed_systems(earlier.result.get("systems", []), result.get("systems", []), earlier=earlier.pk)
    unchanged, unchanged_reason = ranks_unchanged(systems, removed, earlier=earlier.pk)
    return {
        "compared_to": {
            "leaderboard": earlier.pk,
            "computed_at": before.isoformat(),
            "coefficients": earlier.result.get("coefficients"),
        },
        "comparisons_touched": len(touched),
        "touched": [
            {"comparison": ext, "set": set_, "versions_before": list(then), "versions_now": list(later)}
            for _, ext, set_, then, later in touched[:MAX_LISTED]
        ],
        "outputs": {"refreshed": refreshed, "retained": retained, "new": new, "superseded": superseded},
        "n_human_comparisons_changed": len(human_rows),
        # Their earlier human labels do not validate the replacement candidates.
        "human_comparisons_changed": human_rows[:MAX_LISTED],
        "ranks_unchanged": unchanged,
        "ranks_unchanged_reason": unchanged_reason,
        "systems": systems,
        "removed_systems": removed,
    }


def ranks_unchanged(
    systems: Sequence[Mapping[str, Any]], removed: Sequence[Mapping[str, Any]], *, earlier: int
) -> tuple[bool | None, str | None]:
    """Whether every point rank is unchanged, and why not when it is false or undefined.

    True only when both leaderboards rank the same systems and none moved; false when a system
    moved, was added or was removed; null when there is no system to compare.
    """
    if not systems and not removed:
        return None, f"neither this leaderboard nor leaderboard {earlier} ranks a system: nothing to compare"
    moved = [row["system"] for row in systems if row["rank_change"] not in (None, 0)]
    added = [row["system"] for row in systems if row["rank_change"] is None]
    parts = []
    if moved:
        parts.append(f"{len(moved)} system(s) changed rank: {', '.join(moved)}")
    if added:
        parts.append(f"{len(added)} system(s) not in leaderboard {earlier}: {', '.join(added)}")
    if removed:
        parts.append(
            f"{len(removed)} system(s) of leaderboard {earlier} not ranked now: "
            + ", ".join(str(row["system"]) for row in removed)
        )
    return (False, "; ".join(parts)) if parts else (True, None)


def removed_systems(
    before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]], *, earlier: int | str
) -> list[dict[str, Any]]:
    """The systems of ``before`` that ``after`` does not rank (in their earlier rank order), each with a note."""
    now = {row["system"] for row in after}
    return [
        {
            "system": row["system"],
            "rank_before": int(row["rank"]),
            "score_before": float(row["score"]),
            "note": f"ranked by leaderboard {earlier}, not by this one (it has no scored comparison now)",
        }
        for row in sorted(before, key=lambda r: r["rank"])
        if row["system"] not in now
    ]


def system_changes(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    *,
    earlier: str = "the earlier leaderboard",
) -> list[dict[str, Any]]:
    """Per system of ``after`` (in its rank order): rank and score before and now, and the changes.

    ``rank_change`` is positive when the system moved up (rank 3 → 1 is +2); a system absent from
    ``before`` has null earlier values and changes, with a ``reason`` saying so (null otherwise).
    """
    by_system = {row["system"]: row for row in before}
    out = []
    for row in sorted(after, key=lambda r: r["rank"]):
        old = by_system.get(row["system"])
        out.append(
            {
                "system": row["system"],
                "rank_before": None if old is None else int(old["rank"]),
                "rank": int(row["rank"]),
                "rank_change": None if old is None else int(old["rank"]) - int(row["rank"]),
                "score_before": None if old is None else float(old["score"]),
                "score": float(row["score"]),
                "score_delta": None if old is None else float(row["score"]) - float(old["score"]),
                "reason": None
                if old is not None
                else f"not ranked by {earlier}: new since then, so it has no earlier rank or score to compare",
            }
        )
    return out


def leaderboard_version_sensitivity(
    *, study: Study, leaderboard: Leaderboard, compare_to: Leaderboard | int | str
) -> dict[str, Any]:
    """``version_sensitivity`` of a stored, finished leaderboard against an earlier one (the page)."""
    earlier = leaderboard_earlier(study=study, leaderboard=compare_to)
    full = Leaderboard.objects.get(pk=leaderboard.pk)  # with its input snapshot
    if earlier.pk == leaderboard.pk or leaderboard_moment(earlier) >= leaderboard_moment(full):
        raise ValidationFailed(
            f"leaderboard {earlier.pk} is not older than this one; compare with an earlier leaderboard",
            field="compare_to",
        )
    return version_sensitivity(
        study=study, earlier=earlier, inputs=full.inputs, result=full.result, at=leaderboard_moment(full)
    )


def leaderboard_earlier(*, study: Study, leaderboard: Leaderboard | int | str) -> Leaderboard:
    """A finished leaderboard of the study to compare with (``--compare-to ID``); one-line errors."""
    if isinstance(leaderboard, Leaderboard):
        found: Leaderboard | None = leaderboard if leaderboard.study_id == study.pk else None
        shown = str(leaderboard.pk)
    else:
        shown = str(leaderboard).strip()
        if not re.fullmatch(r"[0-9]{1,18}", shown):
            raise ValidationFailed(
                f"expected a leaderboard id (a whole number), got {shown[:40]!r}", field="--compare-to"
            )
        found = Leaderboard.objects.filter(study=study, pk=int(shown)).first()
    if found is None:
        raise NotFound(f"study {study.slug} has no leaderboard {shown} to compare to")
    if found.status != Leaderboard.Status.DONE or not found.result.get("systems"):
        raise ArbiterError(
            f"leaderboard {shown} is {found.status}; only a finished leaderboard can be compared to"
        )
    return found
