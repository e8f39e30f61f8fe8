"""Judge diagnostics reported beside the calibration (docs/protocol.md "Judges and calibration"; paper §4.2,
Appendix B).

Pure module: numpy/pandas in, frozen dataclasses out, no Django. All labels are canonical
(docs/protocol.md "Canonical answers"); only outputs with ``status == "valid"`` take part.

- *Order consistency* of a judge: over (comparison, repeat) pairs with a valid ``primary`` and a
  valid ``swapped`` output, the share with the same canonical label (a position-blind judge
  scores 1).
- *Repeat consistency*: over (comparison, order) pairs with valid repeat 0 and repeat 1, the
  share with the same label.
- *Agreement with the human majority*: over the judge's valid outputs on comparisons whose valid
  human votes have a unique plurality label (docs/protocol.md "Human reference and agreement"), the share
  equal to that label.
- *Human noise ceiling*: leave-one-rater-out — every valid human vote against the unique
  plurality of the other valid votes on the same comparison (votes whose others have no unique
  plurality are skipped); the share that agrees. A judge is compared against this ceiling.
- *Reliability bins*: equal-width bins of predicted ``p̂`` on [0, 1], with the mean ``p̂`` and
  mean ``h`` of each bin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stats.errors import StatisticsError

LABELS = ("B", "TIE", "A")  # column order of every count matrix here


@dataclass(frozen=True)
class AgreementShare:
    agree: int
    n: int

    @property
    def value(self) -> float:
        return self.agree / self.n if self.n else float("nan")


@dataclass(frozen=True)
class ReliabilityBin:
    low: float
    high: float
    n: int
    mean_predicted: float
    mean_human: float


def _valid(judge_outputs: pd.DataFrame, judges: Sequence[str]) -> pd.DataFrame:
    valid = judge_outputs[(judge_outputs["status"] == "valid") & judge_outputs["judge"].isin(list(judges))]
    return valid[["comparison", "judge", "order", "repeat", "winner"]]


def order_consistency(judge_outputs: pd.DataFrame, *, judges: Sequence[str]) -> dict[str, AgreementShare]:
    """Primary vs swapped canonical label agreement per judge, pairing by (comparison, repeat)."""
    valid = _valid(judge_outputs, judges)
    primary = valid[valid["order"] == "primary"]
    swapped = valid[valid["order"] == "swapped"]
    pairs = primary.merge(swapped, on=["comparison", "judge", "repeat"], suffixes=("_p", "_s"))
    return _shares(pairs, judges)


def repeat_consistency(
    judge_outputs: pd.DataFrame, *, judges: Sequence[str], first: int = 0, second: int = 1
) -> dict[str, AgreementShare]:
    """Repeat ``first`` vs ``second`` label agreement per judge, pairing by (comparison, order)."""
    valid = _valid(judge_outputs, judges)
    a = valid[valid["repeat"] == first]
    b = valid[valid["repeat"] == second]
    pairs = a.merge(b, on=["comparison", "judge", "order"], suffixes=("_p", "_s"))
    return _shares(pairs, judges)


def _shares(pairs: pd.DataFrame, judges: Sequence[str]) -> dict[str, AgreementShare]:
    same = (pairs["winner_p"] == pairs["winner_s"]).groupby(pairs["judge"])
    agree, n = same.sum(), same.size()
    return {j: AgreementShare(agree=int(agree.get(j, 0)), n=int(n.get(j, 0))) for j in judges}


def unique_plurality(counts: np.ndarray) -> np.ndarray:
    """Index (into :data:`LABELS`) of the label with strictly most votes, or −1
    (docs/protocol.md "Human reference and agreement")."""
    counts = np.asarray(counts)
    top = counts.max(axis=1)
    unique = (counts == top[:, None]).sum(axis=1) == 1
    return np.where(unique & (top > 0), counts.argmax(axis=1), -1)


def human_majority_agreement(
    judge_outputs: pd.DataFrame,
    *,
    judges: Sequence[str],
    comparisons: Sequence[object],
    human_counts: np.ndarray,
) -> dict[str, AgreementShare]:
    """Share of each judge's valid outputs equal to the human unique-plurality label.

    ``human_counts`` is ``(n_comparisons, 3)`` valid human vote counts in :data:`LABELS` order.
    """
    majority = pd.Series(
        [LABELS[k] if k >= 0 else None for k in unique_plurality(human_counts)], index=list(comparisons)
    )
    valid = _valid(judge_outputs, judges)
    label = valid["comparison"].map(majority)
    has = label.notna()
    same = (valid.loc[has, "winner"] == label[has]).groupby(valid.loc[has, "judge"])
    agree, n = same.sum(), same.size()
    return {j: AgreementShare(agree=int(agree.get(j, 0)), n=int(n.get(j, 0))) for j in judges}


def human_noise_ceiling(human_counts: np.ndarray) -> AgreementShare:
    """Leave-one-rater-out agreement of a single valid human vote with the others' plurality.

    For every comparison and label k with ``n_k`` votes, removing one k vote leaves counts
    ``n − e_k``; each of those ``n_k`` votes agrees iff the unique plurality of the rest is k.
    """
    counts = np.asarray(human_counts, dtype=np.int64)
    agree = n = 0
    for k in range(len(LABELS)):
        has = counts[:, k] > 0
        rest = counts[has].copy()
        rest[:, k] -= 1
        plural = unique_plurality(rest)
        decided = plural >= 0
        n += int(counts[has, k][decided].sum())
        agree += int(counts[has, k][plural == k].sum())
    return AgreementShare(agree=agree, n=n)


def reliability_bins(p: np.ndarray, h: np.ndarray, *, bins: int = 10) -> list[ReliabilityBin]:
    """Equal-width bins of ``p`` on [0, 1] (last bin closed) with mean p̂ and mean h; empty bins kept."""
    if bins < 1:
        raise StatisticsError("bins must be at least 1")
    p = np.asarray(p, dtype=float)
    h = np.asarray(h, dtype=float)
    edges = np.round(np.linspace(0.0, 1.0, bins + 1), 12)
    which = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        sel = which == b
        k = int(sel.sum())
        out.append(
            ReliabilityBin(
                low=float(edges[b]),
                high=float(edges[b + 1]),
                n=k,
                mean_predicted=float(p[sel].mean()) if k else float("nan"),
                mean_human=float(h[sel].mean()) if k else float("nan"),
            )
        )
    return out


def human_counts_from_votes(votes: pd.DataFrame, comparisons: Sequence[object]) -> np.ndarray:
    """Valid human vote counts ``(n, 3)`` in :data:`LABELS` order from a ``comparison, label`` frame."""
    valid = votes[votes["label"].isin(LABELS)]
    table = valid.groupby(["comparison", "label"]).size().unstack("label", fill_value=0)
    table = table.reindex(index=list(comparisons), columns=list(LABELS), fill_value=0)
    return table.to_numpy(dtype=np.int64)
