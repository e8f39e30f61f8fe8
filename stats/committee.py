"""Discrete committee audit of the judges (docs/protocol.md "Judges and calibration" (Committee audit)).

Pure module: numpy/pandas in, frozen dataclasses out, no Django.

The rule (docs/protocol.md "Judges and calibration", paper Appendix B.4):

- a judge is *resolved* on a comparison when at least ``min_agree`` (3) of its canonical labels
  (2 orders × 2 repeats = 4 outputs; invalid or missing outputs never agree with anything) are
  the same label; that label is the judge's resolved label;
- a committee of three judges votes 2-of-3: the committee is resolved when at least two of its
  members are resolved *to the same label*; otherwise it is unresolved;
- ``p(A)`` is the committee label's canonical value (A = 1, TIE = 0.5, B = 0,
docs/protocol.md "Canonical answers") and 0.5
  when unresolved; unresolved comparisons stay in the Brier denominator;
- Brier ``Σ_i w_i (p_i − h_i)² / Σ_i w_i`` with ``w_i = n_valid_i / 5`` (valid human votes / 5);
  *resolved-case Brier* is the same sum over resolved comparisons only; *coverage* is the
  (unweighted) fraction of comparisons resolved;
- eligible committees: three judges from three different vendor families whose coverage on
  the pilot split is ≥ ``min_coverage`` (75 %);
- the comparisons are split once, with a seeded permutation, into a pilot (``pilot_size``;
  the paper used 320 of 1,872) and a holdout (the rest). Committees are ranked within each
  split by Brier, ties broken by resolved-case Brier and then by higher coverage (paper B.4).

Extras beyond the protocol minimum: holdout Brier percentile intervals from the stratified
page-block bootstrap (predictions fixed), the share of resamples in which each committee has the
lowest holdout Brier, and the paired holdout difference to the pilot winner.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.errors import StatisticsError

#: Integer codes of canonical labels; ``UNRESOLVED`` marks "no label".
LABEL_CODES: Mapping[str, int] = {"B": 0, "TIE": 1, "A": 2}
UNRESOLVED = -1
#: Canonical value of each code (docs/protocol.md "Canonical answers": A = 1, TIE = 0.5, B = 0).
CODE_VALUES = np.array([0.0, 0.5, 1.0])
#: Valid human votes are divided by this to weight the audit Brier
#: (docs/protocol.md "Judges and calibration").
HUMAN_VOTE_WEIGHT_DIVISOR = 5.0
#: Paper pilot share (320 of 1,872) used when no pilot size is given.
PAPER_PILOT_SHARE = 320 / 1872


def judge_resolution(
    judge_outputs: pd.DataFrame,
    *,
    comparisons: Sequence[object],
    judges: Sequence[str],
    min_agree: int = 3,
) -> np.ndarray:
    """Resolved label code of every judge on every comparison, ``(n_comparisons, n_judges)``.

    docs/protocol.md "Judges and calibration": a judge is resolved when ≥ ``min_agree`` of its canonical
    labels agree. Only rows with ``status == "valid"`` count; the label must be the unique one reaching
    ``min_agree``. Returns codes of :data:`LABEL_CODES`, or :data:`UNRESOLVED`.
    """
    if min_agree < 1:
        raise StatisticsError("min_agree must be at least 1")
    comparisons = list(comparisons)
    judges = list(judges)
    out = np.full((len(comparisons), len(judges)), UNRESOLVED, dtype=np.int64)
    valid = judge_outputs[judge_outputs["status"] == "valid"]
    valid = valid[valid["judge"].isin(judges) & valid["comparison"].isin(comparisons)]
    if valid.empty:
        return out
    bad = ~valid["winner"].isin(list(LABEL_CODES))
    if bad.any():
        raise StatisticsError(
            f"valid judge output with winner {valid.loc[bad, 'winner'].iloc[0]!r}: expected A, B or TIE"
        )
    counts = valid.groupby(["comparison", "judge", "winner"]).size().unstack("winner", fill_value=0)
    counts = counts.reindex(columns=["B", "TIE", "A"], fill_value=0)
    c = counts.to_numpy()
    reaching = c >= min_agree
    # A unique label reaching the threshold (several only when min_agree ≤ half the outputs).
    resolved = reaching.sum(axis=1) == 1
    codes = np.where(resolved, reaching.argmax(axis=1), UNRESOLVED)
    row = pd.Index(comparisons).get_indexer(counts.index.get_level_values("comparison"))
    col = pd.Index(judges).get_indexer(counts.index.get_level_values("judge"))
    out[row, col] = codes
    return out


def committee_vote(member_codes: np.ndarray) -> np.ndarray:
    """2-of-3 committee label codes (docs/protocol.md "Judges and calibration") from ``(n, 3)`` member codes;
    UNRESOLVED if none."""
    member_codes = np.asarray(member_codes)
    if member_codes.ndim != 2 or member_codes.shape[1] != 3:
        raise StatisticsError("a committee has exactly three judges")
    out = np.full(member_codes.shape[0], UNRESOLVED, dtype=np.int64)
    for code in range(len(CODE_VALUES)):
        out[(member_codes == code).sum(axis=1) >= 2] = code
    return out


def committee_probability(codes: np.ndarray) -> np.ndarray:
    """``p(A)`` of committee codes: the label's canonical value, 0.5 when unresolved
    (docs/protocol.md "Judges and calibration")."""
    codes = np.asarray(codes)
    return np.where(codes == UNRESOLVED, 0.5, CODE_VALUES[np.clip(codes, 0, 2)])


def weighted_brier(p: np.ndarray, h: np.ndarray, weight: np.ndarray) -> float:
    """``Σ w (p − h)² / Σ w`` (docs/protocol.md "Judges and calibration"); NaN when the weights sum to
    zero."""
    total = float(np.sum(weight))
    if total <= 0:
        return float("nan")
    return float(np.sum(weight * (p - h) ** 2) / total)


@dataclass(frozen=True)
class CommitteeSplitFigures:
    """One committee on one split (pilot or holdout)."""

    n: int
    brier: float
    resolved_brier: float
    coverage: float
    rank: int
    ci95: tuple[float, float] | None = None
    rank1_share: float | None = None
    diff_vs_pilot_winner: float | None = None
    diff_vs_pilot_winner_ci95: tuple[float, float] | None = None


@dataclass(frozen=True)
class CommitteeFigures:
    judges: tuple[str, ...]
    families: tuple[str, ...]
    pilot: CommitteeSplitFigures
    holdout: CommitteeSplitFigures


@dataclass(frozen=True)
class IneligibleCommittee:
    judges: tuple[str, ...]
    pilot_coverage: float


@dataclass(frozen=True)
class CommitteeAudit:
    """docs/protocol.md "Judges and calibration" committee audit: every eligible cross-family committee,
    ranked on each split."""

    committees: tuple[CommitteeFigures, ...]
    ineligible: tuple[IneligibleCommittee, ...]
    n_pilot: int
    n_holdout: int
    min_agree: int
    min_coverage: float
    split_seed: int
    resamples: int
    seed: int
    pilot_comparisons: tuple[object, ...]
    warnings: tuple[str, ...] = ()

    @property
    def pilot_winner(self) -> tuple[str, ...] | None:
        for c in self.committees:
            if c.pilot.rank == 1:
                return c.judges
        return None


def default_pilot_size(n: int) -> tuple[int, str | None]:
    """The paper's pilot share ``round(n · 320 / 1872)``, clamped to ``1 … n − 1`` (audit F3).

    Returns the size and, when the clamp changed it, a warning for the report. Needs ``n ≥ 2``.
    """
    if n < 2:
        raise StatisticsError("a pilot/holdout split needs at least two comparisons")
    share = round(n * PAPER_PILOT_SHARE)
    size = min(max(share, 1), n - 1)
    if size == share:
        return size, None
    return size, (
        f"committee split: the paper's pilot share gives {share} of {n} comparisons; "
        f"clamped to {size} pilot and {n - size} holdout comparison(s), too few for a stable audit"
    )


def split_pilot_holdout(n: int, *, pilot_size: int | None, seed: int) -> np.ndarray:
    """Boolean pilot mask over ``n`` comparisons (in the caller's canonical order), seeded.

    ``pilot_size=None`` uses the paper's share, ``round(n · 320 / 1872)``, clamped to ``1 … n − 1``
    (:func:`default_pilot_size`).
    """
    if pilot_size is None:
        pilot_size = default_pilot_size(n)[0]
    if not 1 <= pilot_size < n:
        raise StatisticsError(
            f"pilot size must be between 1 and {n - 1} (the number of comparisons minus one), got {pilot_size}"
        )
    order = np.random.default_rng(seed).permutation(n)
    mask = np.zeros(n, dtype=bool)
    mask[order[:pilot_size]] = True
    return mask


def eligible_family_triples(judges: Sequence[str], families: Mapping[str, str]) -> list[tuple[str, ...]]:
    """Every combination of three judges from three different vendor families
    (docs/protocol.md "Judges and calibration")."""
    missing = [j for j in judges if j not in families]
    if missing:
        raise StatisticsError(f"no vendor family given for judge(s): {', '.join(missing)}")
    return [combo for combo in itertools.combinations(judges, 3) if len({families[j] for j in combo}) == 3]


def _rank(brier: np.ndarray, resolved_brier: np.ndarray, coverage: np.ndarray) -> np.ndarray:
    """Rank 1 = lowest Brier; ties by resolved-case Brier, then by higher coverage (paper B.4)."""
    rb = np.where(np.isnan(resolved_brier), np.inf, resolved_brier)
    order = np.lexsort((-coverage, rb, brier))
    ranks = np.empty(len(brier), dtype=np.int64)
    ranks[order] = np.arange(1, len(brier) + 1)
    return ranks


def committee_audit(
    resolution: np.ndarray,
    *,
    judges: Sequence[str],
    families: Mapping[str, str],
    h: np.ndarray,
    n_valid: np.ndarray,
    pages: Sequence[object],
    blocks: Sequence[object],
    comparisons: Sequence[object],
    pilot_size: int | None,
    split_seed: int,
    resamples: int,
    seed: int,
    min_agree: int = 3,
    min_coverage: float = 0.75,
) -> CommitteeAudit:
    """Evaluate every eligible committee on a seeded pilot/holdout split
    (docs/protocol.md "Judges and calibration").

    ``resolution`` comes from :func:`judge_resolution` (rows in the order of ``comparisons``,
    which the caller keeps canonical, e.g. sorted). ``h`` and ``n_valid`` are the human reference
    and the number of valid human votes per comparison (docs/protocol.md "Human reference and agreement"). The
    holdout bootstrap is the stratified page-block bootstrap over the holdout comparisons (``resamples``,
    ``seed``).
    """
    judges = list(judges)
    h = np.asarray(h, dtype=float)
    n_valid = np.asarray(n_valid, dtype=float)
    n = len(h)
    if resolution.shape != (n, len(judges)):
        raise StatisticsError("resolution must have one row per comparison and one column per judge")
    if not (len(n_valid) == len(pages) == len(blocks) == len(comparisons) == n):
        raise StatisticsError("h, n_valid, pages, blocks and comparisons must have the same length")
    if np.any(n_valid < 1) or np.any(~np.isfinite(h)):
        raise StatisticsError("every comparison in the committee audit needs at least one valid human vote")
    weight = n_valid / HUMAN_VOTE_WEIGHT_DIVISOR
    warnings: list[str] = []
    if pilot_size is None:
        pilot_size, clamp_note = default_pilot_size(n)
        if clamp_note:
            warnings.append(clamp_note)
    pilot = split_pilot_holdout(n, pilot_size=pilot_size, seed=split_seed)
    holdout = ~pilot

    triples = eligible_family_triples(judges, families)
    if not triples:
        warnings.append("no committee of three judges from three different vendor families")
    col = {j: i for i, j in enumerate(judges)}

    probs: list[np.ndarray] = []
    resolved: list[np.ndarray] = []
    eligible: list[tuple[str, ...]] = []
    ineligible: list[IneligibleCommittee] = []
    for combo in triples:
        codes = committee_vote(resolution[:, [col[j] for j in combo]])
        is_resolved = codes != UNRESOLVED
        coverage = float(is_resolved[pilot].mean())
        if coverage >= min_coverage:
            eligible.append(combo)
            probs.append(committee_probability(codes))
            resolved.append(is_resolved)
        else:
            ineligible.append(IneligibleCommittee(judges=combo, pilot_coverage=coverage))
    if triples and not eligible:
        warnings.append(f"no cross-family committee reaches {min_coverage:.0%} coverage on the pilot")

    def split_figures(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        brier = np.array([weighted_brier(p[mask], h[mask], weight[mask]) for p in probs])
        rbrier = np.array(
            [
                weighted_brier(p[mask & r], h[mask & r], weight[mask & r])
                for p, r in zip(probs, resolved, strict=True)
            ]
        )
        cov = np.array([float(r[mask].mean()) for r in resolved])
        return brier, rbrier, cov

    committees: list[CommitteeFigures] = []
    if eligible:
        pb, prb, pc = split_figures(pilot)
        hb, hrb, hc = split_figures(holdout)
        prank, hrank = _rank(pb, prb, pc), _rank(hb, hrb, hc)

        # Holdout bootstrap, predictions fixed: per-unit sums of w (p − h)² and of w.
        idx = np.flatnonzero(holdout)
        units = bootstrap_units([pages[int(i)] for i in idx], [blocks[int(i)] for i in idx])
        counts = bootstrap_page_blocks(units, resamples=resamples, seed=seed)
        unit_w = np.bincount(units.unit_of, weights=weight[idx], minlength=units.n_units)
        loss = np.stack([weight[idx] * (p[idx] - h[idx]) ** 2 for p in probs])  # (committees, n_holdout)
        unit_loss = np.stack(
            [np.bincount(units.unit_of, weights=row, minlength=units.n_units) for row in loss]
        )
        boot = (counts @ unit_loss.T) / (counts @ unit_w)[:, None]  # (resamples, committees)
        ci = percentile_interval(boot)
        rank1 = np.bincount(np.argmin(boot, axis=1), minlength=len(eligible)) / resamples
        winner = int(np.flatnonzero(prank == 1)[0])
        diff = boot - boot[:, [winner]]
        diff_ci = percentile_interval(diff)

        for k, combo in enumerate(eligible):
            committees.append(
                CommitteeFigures(
                    judges=combo,
                    families=tuple(families[j] for j in combo),
                    pilot=CommitteeSplitFigures(
                        n=int(pilot.sum()),
                        brier=float(pb[k]),
                        resolved_brier=float(prb[k]),
                        coverage=float(pc[k]),
                        rank=int(prank[k]),
                    ),
                    holdout=CommitteeSplitFigures(
                        n=int(holdout.sum()),
                        brier=float(hb[k]),
                        resolved_brier=float(hrb[k]),
                        coverage=float(hc[k]),
                        rank=int(hrank[k]),
                        ci95=(float(ci[0, k]), float(ci[1, k])),
                        rank1_share=float(rank1[k]),
                        diff_vs_pilot_winner=float(hb[k] - hb[winner]),
                        diff_vs_pilot_winner_ci95=(float(diff_ci[0, k]), float(diff_ci[1, k])),
                    ),
                )
            )
        committees.sort(key=lambda c: c.pilot.rank)

    comp = list(comparisons)
    return CommitteeAudit(
        committees=tuple(committees),
        ineligible=tuple(ineligible),
        n_pilot=int(pilot.sum()),
        n_holdout=int(holdout.sum()),
        min_agree=min_agree,
        min_coverage=min_coverage,
        split_seed=split_seed,
        resamples=resamples,
        seed=seed,
        pilot_comparisons=tuple(comp[i] for i in np.flatnonzero(pilot)),
        warnings=tuple(warnings),
    )
