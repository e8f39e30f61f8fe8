"""Exclusion rules for the reference kind (``pairwise_reference``; issue 17). Pure: no Django.

The votes frame of ``annotation.selectors.votes.votes_frame`` (one row per answered trial, voided
assignments left out) becomes the input of ``stats.hygiene.apply_hygiene``:

- participant = rater, trial = position, no attention checks (the reference kind has none);
- gold trials (issue 30), given apart, become ``is_gold`` rows (``gold_passed``: the identical
  side was chosen), never data: they feed the ``gold`` rule only;
- answer = the label as displayed (a swapped display exchanges A and B, docs/protocol.md "Canonical answers"),
so
  straight-lining is the habit of pressing the same key;
- ``repeat_agreed`` on a hidden repeat whose original the same rater answered: the canonical
  labels are equal (docs/protocol.md "Human reference and agreement" hidden-repeat agreement; CANNOT_JUDGE
  counts as a label);
- ``chose_left`` on an A/B answer: the displayed A (left) was chosen (position bias).

``reference_rules_apply`` returns the votes the rules keep (repeats included: the agreement
report still pairs them) and the hygiene result with the counts removed per rule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from stats.hygiene import HygieneResult, HygieneRules, apply_hygiene

FLIP = {"A": "B", "B": "A"}


def reference_hygiene_frame(votes: pd.DataFrame, gold: pd.DataFrame | None = None) -> pd.DataFrame:
    """The hygiene input of a reference-kind votes frame (module docstring), with the gold rows
    (``rater, position, swapped, label, response_ms, passed``) appended as ``is_gold`` rows."""
    labels = votes["label"].astype(str).to_numpy()
    swapped = votes["swapped"].to_numpy(dtype=bool)
    displayed = np.array([FLIP.get(lab, lab) if s else lab for lab, s in zip(labels, swapped, strict=True)],
                         dtype=object)
    repeat = votes["is_repeat"].to_numpy(dtype=bool)
    original = {
        (str(r), str(c)): str(lab)
        for r, c, lab, rep in zip(votes["rater"], votes["comparison"], labels, repeat, strict=True)
        if not rep
    }
    agreed: list[object] = []
    for r, c, lab, rep in zip(votes["rater"], votes["comparison"], labels, repeat, strict=True):
        first = original.get((str(r), str(c))) if rep else None
        agreed.append(None if first is None else first == lab)
    chose_left = [True if d == "A" else False if d == "B" else None for d in displayed]
    frame = pd.DataFrame({
        "participant": votes["rater"].astype(str).to_numpy(),
        "trial": votes["position"].to_numpy(dtype=np.int64),
        "is_attention_check": np.zeros(len(votes), dtype=bool),
        "attention_passed": [None] * len(votes),
        "response_ms": votes["response_ms"].to_numpy(dtype=float),
        "answer": displayed,
        "repeat_agreed": agreed,
        "chose_left": chose_left,
        "is_gold": np.zeros(len(votes), dtype=bool),
        "gold_passed": [None] * len(votes),
    })
    if gold is None or gold.empty:
        return frame
    gold_labels = gold["label"].astype(str).to_numpy()
    gold_rows = pd.DataFrame({
        "participant": gold["rater"].astype(str).to_numpy(),
        "trial": gold["position"].to_numpy(dtype=np.int64),
        "is_attention_check": np.zeros(len(gold), dtype=bool),
        "attention_passed": [None] * len(gold),
        "response_ms": gold["response_ms"].to_numpy(dtype=float),
        "answer": [FLIP.get(lab, lab) if s else lab
                   for lab, s in zip(gold_labels, gold["swapped"].to_numpy(dtype=bool), strict=True)],
        "repeat_agreed": [None] * len(gold),
        "chose_left": [None] * len(gold),
        "is_gold": np.ones(len(gold), dtype=bool),
        "gold_passed": [bool(p) for p in gold["passed"]],
    })
    return pd.concat([frame, gold_rows], ignore_index=True)


def reference_rules_apply(
    votes: pd.DataFrame, rules: HygieneRules, gold: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, HygieneResult]:
    """The votes the exclusion rules keep, and what each rule removed (``gold``: the gold answers)."""
    # The reference kind has no comprehension check or attention checks: those rules never apply.
    result = apply_hygiene(reference_hygiene_frame(votes, gold), rules)
    kept = set(zip(result.kept["participant"].astype(str), result.kept["trial"].astype(np.int64), strict=True))
    mask = np.array([(str(r), int(p)) in kept for r, p in zip(votes["rater"], votes["position"], strict=True)],
                    dtype=bool)
    return votes[mask].reset_index(drop=True), result


def exclusions_section(result: HygieneResult) -> dict[str, object]:
    """The ``exclusions`` object of an agreement or calibration report run with ``--rules``."""
    full = result.to_dict()
    return {
        "settings": full["settings"],
        "n_raters": full["n_participants"],
        "n_kept_raters": full["n_kept_participants"],
        "n_votes": full["n_data_answers"],
        "n_kept_votes": full["n_kept_answers"],
        "rules": [r for r in full["rules"] if r["enabled"]],
        "excluded_raters": full["excluded_participants"],
    }
