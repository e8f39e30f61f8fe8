"""Reads that assemble the docs/protocol.md "Judges and calibration" calibration inputs of a study (the
adapter in front of ``stats.judge_weights.calibrate``).

- the human table: one row per human-set comparison — ``comparison, page, block, h, n_valid,
  n_A, n_T, n_B, system_a, system_b`` — from the main (non-repeat) votes of non-voided
  assignments (``annotation.selectors.votes.votes_frame``), counted and turned into ``h`` by
  ``stats.preference.human_preferences`` (docs/protocol.md "Human reference and agreement");
- the judge outputs of the human set (``judges.selectors.judge_outputs_frame``);
- each judge's vendor family (``Judge.family``, docs/protocol.md "Judges and calibration" committee
eligibility).

No writes. Identifiers are the bundle's external ids (comparison, page, system) and block names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from annotation.errors import ValidationFailed
from annotation.models import BlockItem, Comparison, ComparisonSet, Study
from annotation.selectors.votes import votes_frame
from judges.models import Judge

if TYPE_CHECKING:
    import pandas as pd

HUMAN_TABLE_COLUMNS: tuple[str, ...] = (
    "comparison",
    "page",
    "block",
    "h",
    "n_valid",
    "n_A",
    "n_T",
    "n_B",
    "system_a",
    "system_b",
)


@dataclass(frozen=True, eq=False)
class CalibrationInputs:
    """Everything ``calibrate`` needs for one study (docs/protocol.md "Judges and calibration")."""

    human: pd.DataFrame
    judge_outputs: pd.DataFrame
    judges: tuple[str, ...]
    families: Mapping[str, str] | None
    missing_families: tuple[str, ...]
    #: Judges with outputs on the human set that were left out, with why (audit F2).
    dropped_judges: tuple[Mapping[str, object], ...] = ()


def human_reference_table(*, study: Study, votes: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per human-set comparison, sorted by comparison id
    (docs/protocol.md "Human reference and agreement" ``h_i``).

    Comparisons without a valid main vote keep ``n_valid = 0`` and ``h = NaN`` (``calibrate``
    counts and ignores them). The block is the comparison's schedule block; a comparison that is
    in no block but has votes takes the block of its votes; otherwise the block is empty.
    """
    import numpy as np
    import pandas as pd

    from stats.preference import human_preferences

    comps = list(
        Comparison.objects.filter(study=study, set=ComparisonSet.HUMAN)
        .order_by("external_id")
        .values_list(
            "external_id",
            "page__external_id",
            "candidate_a__system__external_id",
            "candidate_b__system__external_id",
        )
    )
    ids = [c[0] for c in comps]
    block_of: dict[str, str] = dict(
        BlockItem.objects.filter(block__study=study, comparison__set=ComparisonSet.HUMAN).values_list(
            "comparison__external_id", "block__name"
        )
    )
    if votes is None:  # ``votes``: a votes frame already filtered (exclusion rules, issue 17)
        votes = votes_frame(study=study, include_voided=False)
    main = votes[~votes["is_repeat"].to_numpy(dtype=bool) & votes["comparison"].isin(ids)]
    counts, h = human_preferences(main["label"].to_numpy(), main["comparison"].to_numpy(), ids)  # B, TIE, A
    for cid, blk in main.groupby("comparison", sort=False)["block"].first().items():
        block_of.setdefault(str(cid), str(blk))
    n_valid = counts.sum(axis=1)
    return pd.DataFrame(
        {
            "comparison": pd.Series(ids, dtype=object),
            "page": pd.Series([c[1] for c in comps], dtype=object),
            "block": pd.Series([block_of.get(c, "") for c in ids], dtype=object),
            "h": h if len(ids) else np.zeros(0),
            "n_valid": n_valid.astype(np.int64),
            "n_A": counts[:, 2].astype(np.int64),
            "n_T": counts[:, 1].astype(np.int64),
            "n_B": counts[:, 0].astype(np.int64),
            "system_a": pd.Series([c[2] for c in comps], dtype=object),
            "system_b": pd.Series([c[3] for c in comps], dtype=object),
        },
        columns=list(HUMAN_TABLE_COLUMNS),
    )


def human_set_judge_outputs(*, study: Study) -> pd.DataFrame:
    """Judge outputs on the study's human-set comparisons (docs/protocol.md "Judges and calibration"
    calibration input).

    On a comparison whose candidate was replaced after its votes (paper B.5) these are the outputs
    on the versions the raters saw, so the calibration set does not change.
    """
    from judges.selectors import judge_outputs_frame_as_labelled

    return judge_outputs_frame_as_labelled(study=study)


def judge_families(*, judges: Sequence[str]) -> dict[str, str]:
    """``{judge name: vendor family}`` for the judges that have a family recorded."""
    rows = Judge.objects.filter(name__in=list(judges)).values_list("name", "family")
    return {name: family.strip() for name, family in rows if family and family.strip()}


def calibration_inputs(
    *, study: Study, judges: Sequence[str] | None = None, votes: pd.DataFrame | None = None
) -> CalibrationInputs:
    """The human table, the human-set judge outputs and the judges' families of ``study``.

    ``judges=None`` takes every judge with at least one *valid* output on the human set and no
    call still pending or running there (a run in progress would silently shrink the fit),
    sorted by name. A named judge with no valid output, or with calls still unfinished, is
    refused with one line.
    """
    import pandas as pd

    human = human_reference_table(study=study, votes=votes)
    outputs = human_set_judge_outputs(study=study)
    status = outputs["status"].astype(str) if len(outputs) else pd.Series([], dtype=str)
    present = sorted(set(outputs.loc[status == "valid", "judge"].astype(str))) if len(outputs) else []
    unfinished = (
        sorted(set(outputs.loc[status.isin(["pending", "running"]), "judge"].astype(str)))
        if len(outputs)
        else []
    )
    n_outputs = outputs["judge"].astype(str).value_counts().to_dict() if len(outputs) else {}
    n_invalid = (
        outputs.loc[~status.isin(["valid", "pending", "running"]), "judge"]
        .astype(str)
        .value_counts()
        .to_dict()
        if len(outputs)
        else {}
    )

    def no_valid_reason(judge: str) -> str:
        return (
            f"no valid output on the human set: all {n_outputs.get(judge, 0)} of its outputs are invalid "
            f"({n_invalid.get(judge, 0)} failed validation or transport)"
        )

    dropped: list[dict[str, object]] = []
    if judges is None:
        chosen = [j for j in present if j not in unfinished]
        for judge in sorted(n_outputs):
            if judge in chosen:
                continue
            reason = (
                "calls still pending or running on the human set"
                if judge in unfinished
                else no_valid_reason(judge)
            )
            dropped.append({"judge": judge, "n_outputs": int(n_outputs[judge]), "reason": reason})
    else:
        chosen = [str(j).strip() for j in judges if str(j).strip()]
        if len(set(chosen)) != len(chosen):
            raise ValidationFailed("a judge is listed twice", field="judges")
        busy = [j for j in chosen if j in unfinished]
        if busy:
            raise ValidationFailed(
                f"judge(s) {', '.join(busy)} still have calls pending or running on the human set of "
                f"study {study.slug}: wait for the run to finish",
                field="judges",
            )
        invalid_only = [j for j in chosen if j not in present and j in n_outputs]
        if invalid_only:
            raise ValidationFailed(
                f"no valid output on the human-set comparisons of study {study.slug} for judge(s) "
                + "; ".join(f"{j}: {no_valid_reason(j)}" for j in invalid_only)
                + f" (judges with valid outputs: {', '.join(present) or 'none'})",
                field="judges",
            )
        unknown = [j for j in chosen if j not in present]
        if unknown:
            raise ValidationFailed(
                f"no output on the human-set comparisons of study {study.slug} for judge(s) "
                f"{', '.join(unknown)} (judges with valid outputs: {', '.join(present) or 'none'})",
                field="judges",
            )
    if not chosen:
        if dropped:
            raise ValidationFailed(
                f"study {study.slug} has no judge with a valid output on its human-set comparisons: "
                + "; ".join(f"{d['judge']}: {d['reason']}" for d in dropped)
            )
        raise ValidationFailed(
            f"study {study.slug} has no judge output on its human-set comparisons: import or run judges first"
        )
    if len(outputs):
        outputs = outputs[outputs["judge"].astype(str).isin(chosen)].reset_index(drop=True)
    families = judge_families(judges=chosen)
    missing = tuple(j for j in chosen if j not in families)
    return CalibrationInputs(
        human=human,
        judge_outputs=outputs,
        judges=tuple(chosen),
        families=None if missing else families,
        missing_families=missing,
        dropped_judges=tuple(dropped),
    )
