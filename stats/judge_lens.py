"""The disagreement lens: where a judge and the people part (docs/protocol.md "The disagreement lens").

Pure module: pandas/numpy in, frozen dataclasses and plain dicts out, no Django. Labels are
canonical (docs/protocol.md "Canonical answers"): ``A``, ``TIE``, ``B``; a vote or an output
counts A = 1, TIE = ½, B = 0 for canonical candidate A.

- *Position consistency* (Zheng et al., "Judging LLM-as-a-Judge", Table 2): each call made in
  both orders is one case: ``consistent`` when both orders give the same canonical label;
  ``biased_first`` / ``biased_second`` when they differ and the position shown first (second) got
  more of the two choices; ``error`` when either order has no valid reply. JudgeBench's
  ``inconsistent`` count is the cases whose two orders name opposite winners.
- *Verdict* of a case: its label when both orders agree, else TIE (Zheng et al.'s conservative
  swap rule). Agreement uses verdicts; the render-conditioned preferences use every valid output.
- *Agreement* (Zheng et al., Table 5): the verdict against the human majority (the unique
  plurality of the valid votes), with ties kept (every label counts) and with ties dropped (only
  cases where neither side is TIE); and, computed the same way, verdict against each vote and
  vote against vote (two different raters on the same comparison), the human–human ceiling.
- *Agreement against the gap* (Zheng et al., Figure 2): the same agreement in bins of
  ``|s_a − s_b|``, each system's human win rate (ties ½) over the kept votes.
- *Render-conditioned preferences* (AlpacaEval's "prefers longer"): over comparisons where the
  two candidates differ in an attribute, the judge's and the people's mean points for the one
  with more of it (ties ½).
- *Disagreement* of a comparison: ``|x̄ − h|``, the judge's mean canonical value over its valid
  outputs against the human reference ``h``; the drill-down sorts by it (decision 0078).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

POINTS = {"A": 1.0, "TIE": 0.5, "B": 0.0}
LABELS = ("A", "TIE", "B")
POSITION_CASES = ("consistent", "biased_first", "biased_second", "error")
#: Edges of the gap bins (Figure 2): ten bins of 0.1 on [0, 1], the last one closed.
GAP_EDGES = tuple(round(0.1 * k, 1) for k in range(11))
#: The attributes of the render-conditioned table, in its order.
ATTRIBUTES = ("height", "text", "media", "failed")
FINISHED = ("valid", "invalid", "failed")


def share(agree: int, n: int) -> float | None:
    return agree / n if n else None


@dataclass(frozen=True)
class Cases:
    """Both-order cases of one judge: one row per (comparison, repeat).

    ``case`` is one of :data:`POSITION_CASES`; ``verdict`` the conservative label (None for an
    error); ``flip``: the two orders named opposite winners (JudgeBench's inconsistent).
    """

    frame: pd.DataFrame  # comparison, repeat, primary, swapped, case, verdict, flip
    n_one_order: int  # (comparison, repeat) with a finished output in one order only
    n_unfinished: int  # with an output still pending or running


def _position(order: str, winner: str) -> int:
    """+1 when the candidate shown first won, −1 the second, 0 a tie. The primary order shows
    canonical A first; the swapped order shows canonical B first."""
    if winner == "TIE":
        return 0
    first = "A" if order == "primary" else "B"
    return 1 if winner == first else -1


def position_cases(outputs: pd.DataFrame) -> Cases:
    """``outputs``: one judge's rows ``comparison, order, repeat, status, winner``."""
    columns = ["comparison", "repeat", "primary", "swapped", "case", "verdict", "flip"]
    if outputs.empty:
        return Cases(pd.DataFrame(columns=columns), 0, 0)
    unfinished_keys = set(
        map(
            tuple,
            outputs.loc[~outputs["status"].isin(FINISHED), ["comparison", "repeat"]].to_numpy().tolist(),
        )
    )
    done = outputs[outputs["status"].isin(FINISHED)]
    by_order = {
        order: {
            (c, int(r)): (s, w)
            for c, r, s, w in done.loc[
                done["order"] == order, ["comparison", "repeat", "status", "winner"]
            ].itertuples(index=False)
        }
        for order in ("primary", "swapped")
    }
    keys = sorted(set(by_order["primary"]) & set(by_order["swapped"]))
    one_order = (set(by_order["primary"]) ^ set(by_order["swapped"])) - unfinished_keys
    rows: list[tuple[Any, ...]] = []
    for key in keys:
        if key in unfinished_keys:
            continue
        (ps, pw), (ss, sw) = by_order["primary"][key], by_order["swapped"][key]
        if ps != "valid" or ss != "valid":
            rows.append(
                (*key, pw if ps == "valid" else None, sw if ss == "valid" else None, "error", None, False)
            )
            continue
        if pw == sw:
            rows.append((*key, pw, sw, "consistent", pw, False))
            continue
        net = _position("primary", pw) + _position("swapped", sw)
        case = "biased_first" if net > 0 else "biased_second"
        flip = pw != "TIE" and sw != "TIE"
        rows.append((*key, pw, sw, case, "TIE", flip))
    frame = pd.DataFrame.from_records(rows, columns=columns)
    for column in ("primary", "swapped", "verdict"):  # no answer is None, not NaN (the JSON has no NaN)
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return Cases(frame, len(one_order), len(unfinished_keys))


def position_summary(cases: Cases) -> dict[str, Any]:
    frame = cases.frame
    n = len(frame)
    counts = {name: int((frame["case"] == name).sum()) if n else 0 for name in POSITION_CASES}
    return {
        "n_cases": n,
        "counts": counts,
        "shares": {name: share(k, n) for name, k in counts.items()},
        "inconsistent": int(frame["flip"].sum()) if n else 0,
        "n_one_order": cases.n_one_order,
        "n_unfinished": cases.n_unfinished,
    }


def human_counts(votes: pd.DataFrame) -> dict[str, dict[str, int]]:
    """``{comparison: {A, TIE, B}}`` over valid votes (``CANNOT_JUDGE`` is not one)."""
    out: dict[str, dict[str, int]] = {}
    for comparison, label in votes[["comparison", "label"]].itertuples(index=False):
        if label in POINTS:
            out.setdefault(str(comparison), dict.fromkeys(LABELS, 0))[label] += 1
    return out


def majority(counts: Mapping[str, int]) -> str | None:
    """The unique plurality label, or None (docs/protocol.md "Human reference and agreement")."""
    ranked = sorted(((counts.get(k, 0), k) for k in LABELS), reverse=True)
    if ranked[0][0] == 0 or ranked[0][0] == ranked[1][0]:
        return None
    return ranked[0][1]


def reference(counts: Mapping[str, int]) -> float | None:
    n = sum(counts.get(k, 0) for k in LABELS)
    return (counts.get("A", 0) + 0.5 * counts.get("TIE", 0)) / n if n else None


@dataclass
class _Tally:
    agree: int = 0
    n: int = 0
    agree_no_ties: int = 0
    n_no_ties: int = 0

    def add(self, x: str, y: str, weight: int = 1) -> None:
        self.n += weight
        self.agree += weight * (x == y)
        if x != "TIE" and y != "TIE":
            self.n_no_ties += weight
            self.agree_no_ties += weight * (x == y)

    def as_dict(self) -> dict[str, Any]:
        return {
            "with_ties": {"agree": self.agree, "n": self.n, "value": share(self.agree, self.n)},
            "without_ties": {
                "agree": self.agree_no_ties,
                "n": self.n_no_ties,
                "value": share(self.agree_no_ties, self.n_no_ties),
            },
        }


def _rater_pairs(votes: Sequence[str], tally: _Tally) -> None:
    """Every unordered pair of two raters' votes on one comparison, by label counts."""
    c = {k: sum(1 for v in votes if v == k) for k in LABELS}
    for i, x in enumerate(LABELS):
        tally.add(x, x, c[x] * (c[x] - 1) // 2)
        for y in LABELS[i + 1 :]:
            tally.add(x, y, c[x] * c[y])


def agreement_tables(cases: Cases, votes: pd.DataFrame) -> dict[str, Any]:
    """Zheng et al. Table 5 on the comparisons where the judge has a verdict: verdict against the
    human majority, against each vote, and vote against vote."""
    verdicts = cases.frame[cases.frame["verdict"].notna()]
    counts = human_counts(votes)
    valid_votes = votes[votes["label"].isin(list(POINTS))]
    labels_of: dict[str, list[str]] = {
        str(c): list(g["label"]) for c, g in valid_votes.groupby("comparison", sort=True)
    }
    to_majority, to_votes, human = _Tally(), _Tally(), _Tally()
    judged = sorted(set(verdicts["comparison"].astype(str)))
    no_majority = 0
    for comparison, verdict in verdicts[["comparison", "verdict"]].itertuples(index=False):
        label = majority(counts.get(str(comparison), {}))
        if label is None:
            no_majority += 1
        else:
            to_majority.add(str(verdict), label)
        for vote in labels_of.get(str(comparison), []):
            to_votes.add(str(verdict), vote)
    for comparison in judged:
        _rater_pairs(labels_of.get(comparison, []), human)
    return {
        "n_comparisons": len(judged),
        "n_verdicts": len(verdicts),
        "n_verdicts_without_majority": no_majority,
        "judge_vs_majority": to_majority.as_dict(),
        "judge_vs_raters": to_votes.as_dict(),
        "human_vs_human": human.as_dict(),
    }


def system_win_rates(votes: pd.DataFrame) -> dict[str, float]:
    """Each system's human win rate over the valid votes (its points as A and as B, ties ½)."""
    points: dict[str, list[float]] = {}
    for a, b, label in votes[["system_a", "system_b", "label"]].itertuples(index=False):
        if label in POINTS:
            points.setdefault(str(a), []).append(POINTS[label])
            points.setdefault(str(b), []).append(1.0 - POINTS[label])
    return {s: float(np.mean(p)) for s, p in sorted(points.items())}


def gap_bin(gap: float) -> int:
    return min(int(np.searchsorted(np.asarray(GAP_EDGES), gap, side="right")) - 1, len(GAP_EDGES) - 2)


def agreement_by_gap(
    cases: Cases, votes: pd.DataFrame, systems: Mapping[str, tuple[str, str]]
) -> dict[str, Any]:
    """Zheng et al. Figure 2: verdict against the human majority in bins of the systems' gap.

    ``systems``: ``{comparison: (system_a, system_b)}``.
    """
    rates = system_win_rates(votes)
    counts = human_counts(votes)
    tallies = [_Tally() for _ in range(len(GAP_EDGES) - 1)]
    verdicts = cases.frame[cases.frame["verdict"].notna()]
    for comparison, verdict in verdicts[["comparison", "verdict"]].itertuples(index=False):
        pair = systems.get(str(comparison))
        label = majority(counts.get(str(comparison), {}))
        if pair is None or label is None or pair[0] not in rates or pair[1] not in rates:
            continue
        tallies[gap_bin(abs(rates[pair[0]] - rates[pair[1]]))].add(str(verdict), label)
    bins = []
    for k, tally in enumerate(tallies):
        row = tally.as_dict()
        bins.append({"low": GAP_EDGES[k], "high": GAP_EDGES[k + 1], **row})
    return {"system_win_rates": rates, "bins": bins}


def favoured_side(row: Mapping[str, Any], attribute: str) -> str | None:
    """The canonical label of the candidate with more of ``attribute`` (the rendered one for
    ``failed``), or None when it cannot be told (unknown or equal)."""
    a, b = row[f"{attribute}_a"], row[f"{attribute}_b"]
    if attribute == "failed":
        if bool(a) == bool(b):
            return None
        return "B" if a else "A"
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or a == b:
        return None
    return "A" if a > b else "B"


def conditioned_preferences(
    attributes: pd.DataFrame, outputs: pd.DataFrame, votes: pd.DataFrame
) -> list[dict[str, Any]]:
    """AlpacaEval-style: P(prefers the candidate with more of an attribute), judge and people.

    ``attributes``: one row per comparison: ``comparison`` and ``<attr>_a``, ``<attr>_b`` for
    ``height``, ``text``, ``media`` (numbers, NaN unknown) and ``failed`` (bool).
    """
    valid = outputs[outputs["status"] == "valid"]
    valid_votes = votes[votes["label"].isin(list(POINTS))]
    out = []
    for attribute in ATTRIBUTES:
        favoured: dict[str, str] = {}
        equal = 0
        for row in attributes.to_dict("records"):
            side = favoured_side(row, attribute)
            if side is None:
                a, b = row[f"{attribute}_a"], row[f"{attribute}_b"]
                known = attribute == "failed" or (
                    a is not None and b is not None and np.isfinite(a) and np.isfinite(b)
                )
                equal += int(known and attribute != "failed")
            else:
                favoured[str(row["comparison"])] = side
        entry: dict[str, Any] = {"attribute": attribute, "n_comparisons": len(favoured), "n_equal": equal}
        for who, frame, column in (("judge", valid, "winner"), ("people", valid_votes, "label")):
            points = [
                POINTS[label] if side == "A" else 1.0 - POINTS[label]
                for comparison, label in frame[["comparison", column]].itertuples(index=False)
                if (side := favoured.get(str(comparison))) is not None
            ]
            n_comparisons = len({str(c) for c in frame["comparison"] if str(c) in favoured})
            entry[who] = {
                "p": float(np.mean(points)) if points else None,
                "n": len(points),
                "n_comparisons": n_comparisons,
            }
        out.append(entry)
    return out


def judge_means(outputs: pd.DataFrame) -> dict[str, float]:
    """``x̄`` per comparison: the mean canonical value of the valid outputs."""
    valid = outputs[outputs["status"] == "valid"]
    return {
        str(c): float(np.mean([POINTS[w] for w in g["winner"]]))
        for c, g in valid.groupby("comparison", sort=True)
    }


def disagreement_order(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Most disagreement first: ``disagreement`` descending, then more human votes, then the
    comparison id (decision 0078)."""
    return sorted(rows, key=lambda r: (-float(r["disagreement"]), -int(r["n_votes"]), str(r["comparison"])))
