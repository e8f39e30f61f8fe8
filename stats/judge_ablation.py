"""Nested judge-subset ablation (paper Appendix B.4; issue 16 part 1): which judges are worth paying for.

Pure module: numpy/scipy in, frozen dataclasses out, no Django.

This is a **different estimator from the frozen OLS proxy** (docs/protocol.md "Judges and calibration"): an
axis-aware blend with different weighting and fitting. Its losses say how much a smaller or cheaper committee
loses under this model; they neither replace the frozen overall-only regression nor prove equivalence.

Evidence. For judge j on comparison i: the *overall* evidence ``o_ij`` = mean canonical vote
(A = 1, TIE = ½, B = 0) over its valid outputs (docs/protocol.md "Judges and calibration" ``x̄_ij``), and the
*axis* evidence ``a_ij`` = mean over its valid outputs of the mean axis score mapped to [0, 1]
(``(score + 2) / 4``; a comparison without scored axes takes ``a_ij = o_ij``). Both lie in [0, 1].

Blend of a subset S (features ``f_i = (o_ij, a_ij)_{j∈S}``, K = 2|S|, or |S| when the study has
no axis evidence at all): ``p̂_i = w · f_i`` with ``w ≥ 0``, ``Σ w = 1`` (so p̂ ∈ [0, 1]), fitted
by

    minimize  Σ_i v_i (w · f_i − h_i)² / Σ_i v_i  +  λ ‖w − 1/K‖²

(loss weighted by the valid human votes ``v_i``; ridge shrinkage toward equal weights), solved
on the simplex by ``scipy.optimize.minimize(method="SLSQP")`` (the equality-constrained optimum
in closed form is used when it is already non-negative: it is then the solution).

Nesting. Outer folds are the annotation blocks (leave-one-block-out). Inside an outer fold only
its training blocks are used: inner folds are leave-one-block-out over them (a study with only
two blocks has one training block per outer fold; its inner folds are then ``PAGE_GROUPS`` groups
of that block's pages, dealt round-robin in sorted page order, and the report says so). For every subset the
shrinkage λ (grid ``DEFAULT_LAMBDAS``) minimizes the pooled inner loss; the subset's inner loss
``L_S`` is that minimum and its standard error ``SE_S`` is ``sd(per-fold losses) / √folds``.
Per subset size k the subset with the lowest ``L_S`` among size k is chosen; the
**one-standard-error rule** picks the smallest size whose best subset has ``L_S ≤ L_best + SE_best``
(ties: lower ``L_S``, then judge order). The chosen model is refitted on all training blocks with
its λ and predicts the held-out block. Every selection uses inner folds only.

Report. Per size: the subset chosen in every outer fold, out-of-fold Brier ``Σ v (p̂ − h)² / Σ v``
with a stratified page-block bootstrap interval (predictions fixed), and paired differences
between sizes on the same resamples; per subset (each evaluated out of fold with λ chosen in inner
folds): Brier, interval, coverage, cost per comparison and whether it is on the Pareto front of
(cost, Brier). Only comparisons where every judge has a valid output enter (a common sample, so
every difference is paired); ``coverage`` says how many that is.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import minimize

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.defaults import ABLATION_RESAMPLES, ABLATION_SEED
from stats.errors import AblationError
from stats.serialize import json_safe

#: Shrinkage grid (the loss is a mean squared error, ~0.05–0.2; ‖w − 1/K‖² ≤ 2).
DEFAULT_LAMBDAS: tuple[float, ...] = (0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0)
MAX_JUDGES = 8  # 255 subsets
#: Inner folds of a study with only two blocks: this many page groups of the training block.
PAGE_GROUPS = 5
ESTIMATOR_NOTE = (
    'This nested ablation is a different estimator from the frozen OLS proxy (docs/protocol.md "Judges and calibration"): an '
    "axis-aware blend with non-negative weights summing to one, ridge shrinkage toward equal "
    "weights and loss weighted by valid human votes. Its figures say what a smaller or cheaper "
    "committee loses under this model; they do not replace the frozen overall-only regression, "
    "and without a prespecified non-inferiority margin overlapping intervals do not prove "
    "equivalence."
)


# --------------------------------------------------------------------------- the blend


def fit_blend(gram: np.ndarray, cross: np.ndarray, lam: float) -> np.ndarray:
    """Weights on the simplex minimizing ``w'Gw − 2c'w + λ‖w − 1/K‖²`` (G, c: the weighted means).

    ``gram = Σ v f f' / Σ v`` and ``cross = Σ v h f / Σ v``. Returns ``w ≥ 0`` with ``Σ w = 1``.
    """
    g = np.asarray(gram, dtype=float)
    c = np.asarray(cross, dtype=float)
    k = len(c)
    if k == 1:
        return np.ones(1)
    u = np.full(k, 1.0 / k)
    q_mat = g + lam * np.eye(k)
    q_vec = c + lam * u
    # Equality-only optimum: w = Q⁻¹(q − μ1) with 1'w = 1; the answer if it is non-negative.
    try:
        inv_q = np.linalg.solve(q_mat, q_vec)
        inv_1 = np.linalg.solve(q_mat, np.ones(k))
        mu = (inv_q.sum() - 1.0) / inv_1.sum()
        w = inv_q - mu * inv_1
        if np.all(np.isfinite(w)) and w.min() >= 0 and np.linalg.cond(q_mat) < 1e10:
            return w / w.sum()
    except np.linalg.LinAlgError:
        pass

    def value(x: np.ndarray) -> tuple[float, np.ndarray]:
        qx = q_mat @ x
        return float(x @ qx - 2 * q_vec @ x), 2 * qx - 2 * q_vec

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = minimize(
            value,
            u,
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * k,
            constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": lambda x: np.ones_like(x)}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
    w = np.clip(res.x, 0.0, None)
    return w / w.sum()


@dataclass(frozen=True, eq=False)
class _BlockStats:
    """Per block sufficient statistics of the weighted squared loss: Σ v f f', Σ v h f, Σ v h², Σ v."""

    gram: np.ndarray  # (B, F, F)
    cross: np.ndarray  # (B, F)
    hh: np.ndarray  # (B,)
    weight: np.ndarray  # (B,)

    def pooled(self, blocks: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        s = float(self.weight[blocks].sum())
        gram = self.gram[np.ix_(blocks, cols, cols)].sum(axis=0) / s
        cross = self.cross[np.ix_(blocks, cols)].sum(axis=0) / s
        return gram, cross, s

    def loss(self, block: int, cols: np.ndarray, w: np.ndarray) -> float:
        """Σ_{i ∈ block} v_i (w · f_i − h_i)² (not divided by the block's weight)."""
        g = self.gram[block][np.ix_(cols, cols)]
        return float(w @ g @ w - 2 * self.cross[block, cols] @ w + self.hh[block])


def _block_stats(features: np.ndarray, h: np.ndarray, v: np.ndarray, block_of: np.ndarray, n_blocks: int) -> _BlockStats:
    f = features
    gram = np.zeros((n_blocks, f.shape[1], f.shape[1]))
    cross = np.zeros((n_blocks, f.shape[1]))
    hh = np.zeros(n_blocks)
    weight = np.zeros(n_blocks)
    for b in range(n_blocks):
        sel = block_of == b
        fv = f[sel] * v[sel, None]
        gram[b] = fv.T @ f[sel]
        cross[b] = fv.T @ h[sel]
        hh[b] = float((v[sel] * h[sel] ** 2).sum())
        weight[b] = float(v[sel].sum())
    return _BlockStats(gram=gram, cross=cross, hh=hh, weight=weight)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Interval:
    value: float
    ci95: tuple[float, float]


@dataclass(frozen=True)
class FoldChoice:
    """What the inner folds of one outer fold chose (a subset, its λ and inner loss)."""

    block: str
    judges: tuple[str, ...]
    lam: float
    inner_loss: float
    inner_se: float
    weights: tuple[float, ...]


@dataclass(frozen=True)
class SizeResult:
    size: int
    folds: tuple[FoldChoice, ...]
    brier: Interval
    n_subsets: int


@dataclass(frozen=True)
class SubsetResult:
    judges: tuple[str, ...]
    brier: Interval
    coverage: float
    cost: float | None
    pareto: bool
    lambdas: tuple[float, ...]  # the inner-chosen λ per outer fold


@dataclass(frozen=True)
class OneSeChoice:
    block: str
    judges: tuple[str, ...]
    best_judges: tuple[str, ...]
    best_loss: float
    best_se: float
    threshold: float
    inner_loss: float
    #: Every subset's inner loss and SE in this outer fold (what the rule chose from).
    candidates: tuple[tuple[tuple[str, ...], float, float], ...] = ()


@dataclass(frozen=True)
class AblationResult:
    judges: tuple[str, ...]
    blocks: tuple[str, ...]
    n_comparisons: int
    n_excluded: int
    n_total: int
    axis_evidence: bool
    lambdas: tuple[float, ...]
    sizes: tuple[SizeResult, ...]
    one_se: tuple[OneSeChoice, ...]
    one_se_brier: Interval
    differences: tuple[dict[str, Any], ...]
    subsets: tuple[SubsetResult, ...]
    resamples: int
    seed: int
    cost_unit: str | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def coverage(self) -> float:
        return self.n_comparisons / self.n_total if self.n_total else math.nan

    def to_dict(self) -> dict[str, Any]:
        def interval(i: Interval) -> dict[str, Any]:
            return {"value": i.value, "ci95": list(i.ci95)}

        def fold(c: FoldChoice) -> dict[str, Any]:
            return {
                "block": c.block,
                "judges": list(c.judges),
                "lambda": c.lam,
                "inner_loss": c.inner_loss,
                "inner_se": c.inner_se,
                "weights": list(c.weights),
            }

        return json_safe(
            {
                "estimator": "nested judge-subset ablation (paper B.4)",
                "note": ESTIMATOR_NOTE,
                "judges": list(self.judges),
                "outer_folds": list(self.blocks),
                "n_comparisons": self.n_comparisons,
                "n_excluded": self.n_excluded,
                "n_total": self.n_total,
                "coverage": self.coverage,
                "axis_evidence": self.axis_evidence,
                "lambdas": list(self.lambdas),
                "sizes": [
                    {
                        "size": s.size,
                        "n_subsets": s.n_subsets,
                        "brier": interval(s.brier),
                        "coverage": self.coverage,
                        "selected": [fold(c) for c in s.folds],
                    }
                    for s in self.sizes
                ],
                "one_se": {
                    "brier": interval(self.one_se_brier),
                    "selected": [
                        {
                            "block": c.block,
                            "judges": list(c.judges),
                            "size": len(c.judges),
                            "inner_loss": c.inner_loss,
                            "best_judges": list(c.best_judges),
                            "best_loss": c.best_loss,
                            "best_se": c.best_se,
                            "threshold": c.threshold,
                            "candidates": [
                                {"judges": list(j), "inner_loss": loss, "inner_se": se}
                                for j, loss, se in c.candidates
                            ],
                        }
                        for c in self.one_se
                    ],
                },
                "paired_differences": [dict(d) for d in self.differences],
                "subsets": [
                    {
                        "judges": list(s.judges),
                        "size": len(s.judges),
                        "brier": interval(s.brier),
                        "coverage": s.coverage,
                        "cost_per_comparison": s.cost,
                        "pareto": s.pareto,
                        "lambdas": list(s.lambdas),
                    }
                    for s in self.subsets
                ],
                "cost_unit": self.cost_unit,
                "bootstrap": {"resamples": self.resamples, "seed": self.seed, "units": "pages", "strata": "blocks"},
                "warnings": list(self.warnings),
            }
        )


# --------------------------------------------------------------------------- helpers


def pareto_front(cost: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """True where no other point has cost ≤ and loss ≤ with at least one strictly smaller."""
    c = np.asarray(cost, dtype=float)
    e = np.asarray(loss, dtype=float)
    n = len(c)
    out = np.ones(n, dtype=bool)
    for i in range(n):
        dominated = (c <= c[i]) & (e <= e[i]) & ((c < c[i]) | (e < e[i]))
        out[i] = not dominated.any()
    return out


def one_standard_error_choice(
    losses: Mapping[tuple[int, ...], float], ses: Mapping[tuple[int, ...], float]
) -> tuple[tuple[int, ...], tuple[int, ...], float]:
    """The one-SE rule over subsets: (chosen, best, threshold).

    ``best`` minimizes the loss; ``threshold = L_best + SE_best``; ``chosen`` is the smallest subset
    with ``L ≤ threshold`` (ties: lower loss, then the subset's judge order).
    """
    best = min(losses, key=lambda s: (losses[s], len(s), s))
    threshold = losses[best] + (ses[best] if math.isfinite(ses[best]) else 0.0)
    eligible = [s for s in losses if losses[s] <= threshold + 1e-15]
    chosen = min(eligible, key=lambda s: (len(s), losses[s], s))
    return chosen, best, threshold


# --------------------------------------------------------------------------- entry point


def judge_ablation(
    overall: np.ndarray,
    axis: np.ndarray | None,
    h: np.ndarray,
    valid_votes: np.ndarray,
    *,
    blocks: Sequence[object],
    pages: Sequence[object],
    judges: Sequence[str],
    costs: Sequence[float] | None = None,
    cost_unit: str | None = None,
    resamples: int = ABLATION_RESAMPLES,
    seed: int = ABLATION_SEED,
    lambdas: Sequence[float] = DEFAULT_LAMBDAS,
) -> AblationResult:
    """The nested ablation of every non-empty judge subset (module docstring).

    ``overall`` and ``axis``: (n, J) evidence in [0, 1], NaN where the judge has no valid output
    (``axis=None`` or all-NaN: overall evidence only; a NaN axis entry takes the overall value).
    ``h`` the human reference and ``valid_votes`` the valid human votes per comparison;
    ``blocks`` and ``pages`` per comparison; ``costs`` per judge (cost per comparison).
    Deterministic in the inputs, ``resamples`` and ``seed``.
    """
    o = np.asarray(overall, dtype=float)
    n, n_judges = o.shape if o.ndim == 2 else (0, 0)
    judges = [str(j) for j in judges]
    if o.ndim != 2 or n_judges != len(judges) or n_judges < 1:
        raise AblationError("overall evidence must be a (comparisons × judges) array with one column per judge")
    if n_judges > MAX_JUDGES:
        raise AblationError(f"at most {MAX_JUDGES} judges ({2**MAX_JUDGES - 1} subsets), got {n_judges}")
    if resamples < 1:
        raise AblationError("resamples must be at least 1")
    h = np.asarray(h, dtype=float)
    v = np.asarray(valid_votes, dtype=float)
    if not (len(h) == len(v) == len(blocks) == len(pages) == n):
        raise AblationError("h, valid_votes, blocks and pages need one entry per comparison")
    if costs is not None and len(costs) != n_judges:
        raise AblationError("costs need one entry per judge")
    lambdas = tuple(float(x) for x in lambdas)
    if not lambdas or any(not (x >= 0 and math.isfinite(x)) for x in lambdas):
        raise AblationError("the shrinkage grid needs non-negative finite values")
    a = np.full_like(o, np.nan) if axis is None else np.asarray(axis, dtype=float)
    if a.shape != o.shape:
        raise AblationError("axis evidence must have the shape of the overall evidence")
    has_human = (v > 0) & np.isfinite(h)
    n_total = int(has_human.sum())
    no_evidence = [j for k, j in enumerate(judges) if not np.isfinite(o[has_human, k]).any()]
    if no_evidence:
        # Named here: otherwise no comparison is complete and the block check below takes the blame.
        raise AblationError(
            f"judge(s) {', '.join(no_evidence)} have no valid output on any comparison with a human "
            f"reference ({n_total} such comparisons): every subset containing them is undefined; "
            "leave them out or run them again"
        )
    complete = has_human & np.all(np.isfinite(o), axis=1)
    if n_total and not complete.any():
        raise AblationError(
            f"no comparison with a human reference has a valid output from every judge ({', '.join(judges)}): "
            "their valid outputs fall on different comparisons"
        )
    subset_coverage_of = {}
    all_subsets = [s for k in range(1, n_judges + 1) for s in itertools.combinations(range(n_judges), k)]
    for s in all_subsets:
        ok = has_human & np.all(np.isfinite(o[:, list(s)]), axis=1)
        subset_coverage_of[s] = float(ok.sum() / n_total) if n_total else math.nan
    notes: list[str] = []
    axis_evidence = bool(np.isfinite(a[complete]).any())
    if not axis_evidence:
        notes.append("no axis scores in the judges' valid outputs: the blend uses overall evidence only")
    o_used = o[complete]
    a_used = np.where(np.isfinite(a[complete]), a[complete], o_used)
    features = np.concatenate([o_used, a_used], axis=1) if axis_evidence else o_used
    cols_of = {
        s: np.array(list(s) + ([j + n_judges for j in s] if axis_evidence else []), dtype=np.int64)
        for s in all_subsets
    }
    h_used, v_used = h[complete], v[complete]
    block_names = [str(b) for b, keep in zip(blocks, complete, strict=True) if keep]
    page_names = [str(p) for p, keep in zip(pages, complete, strict=True) if keep]
    names = sorted(set(block_names))
    if len(names) < 2:
        raise AblationError(
            f"the nested ablation needs at least two annotation blocks with complete judge evidence "
            f"(outer folds are leave-one-block-out); got {len(names)}"
        )
    block_of = np.array([names.index(b) for b in block_names], dtype=np.int64)
    # Cells = (block, page group): inner folds are whole blocks when an outer fold trains on two or
    # more blocks, else the page groups of its one training block (pages in sorted order, dealt
    # round-robin into PAGE_GROUPS groups; a page never straddles two inner folds).
    group_of = np.zeros(len(block_of), dtype=np.int64)
    for b in range(len(names)):
        sel = np.flatnonzero(block_of == b)
        ordered = sorted({page_names[i] for i in sel})
        rank = {pg: k % PAGE_GROUPS for k, pg in enumerate(ordered)}
        group_of[sel] = [rank[page_names[i]] for i in sel]
    # With three or more blocks every inner fold is a whole block: one cell per block suffices.
    per_block = 1 if len(names) >= 3 else PAGE_GROUPS
    cell_of = block_of * per_block + (group_of if per_block > 1 else 0)
    stats = _block_stats(features, h_used, v_used, cell_of, len(names) * per_block)
    if len(names) == 2:
        few = [names[b] for b in range(2) if (stats.weight[b * PAGE_GROUPS : (b + 1) * PAGE_GROUPS] > 0).sum() < 2]
        if few:
            raise AblationError(
                f"with two annotation blocks the inner folds are page groups of one block, and block(s) "
                f"{', '.join(few)} have fewer than two pages with complete judge evidence"
            )
        notes.append(
            "only two annotation blocks: the inner folds are page groups of the outer fold's training block "
            f"({PAGE_GROUPS} groups, pages dealt in sorted order), not blocks"
        )

    def cells(block: int) -> list[int]:
        return [c for c in range(block * per_block, (block + 1) * per_block) if stats.weight[c] > 0]

    def inner_folds(train_blocks: list[int]) -> list[list[int]]:
        if len(train_blocks) >= 2:
            return [cells(b) for b in train_blocks]
        return [[c] for c in cells(train_blocks[0])]

    cache: dict[tuple[tuple[int, ...], float, frozenset[int]], np.ndarray] = {}

    def weights_for(s: tuple[int, ...], lam: float, train: Sequence[int]) -> np.ndarray:
        key = (s, lam, frozenset(train))
        if key not in cache:
            gram, cross, _ = stats.pooled(np.asarray(sorted(train)), cols_of[s])
            cache[key] = fit_blend(gram, cross, lam)
        return cache[key]

    def inner(s: tuple[int, ...], folds: list[list[int]]) -> tuple[float, float, float]:
        """(λ*, pooled inner loss at λ*, SE of the per-fold losses at λ*) over the inner ``folds``."""
        train = [c for fold in folds for c in fold]
        best: tuple[float, float, float] | None = None
        for lam in lambdas:
            total = 0.0
            per_fold = []
            for fold in folds:
                w = weights_for(s, lam, [c for c in train if c not in fold])
                loss = sum(stats.loss(c, cols_of[s], w) for c in fold)
                total += loss
                per_fold.append(loss / float(stats.weight[fold].sum()))
            pooled = total / float(stats.weight[train].sum())
            se = float(np.std(per_fold, ddof=1) / math.sqrt(len(per_fold))) if len(per_fold) > 1 else math.nan
            if best is None or pooled < best[1] - 1e-15:
                best = (lam, pooled, se)
        assert best is not None
        return best

    n_used = len(h_used)
    size_pred = {k: np.full(n_used, np.nan) for k in range(1, n_judges + 1)}
    subset_pred = {s: np.full(n_used, np.nan) for s in all_subsets}
    subset_lams: dict[tuple[int, ...], list[float]] = {s: [] for s in all_subsets}
    one_se_pred = np.full(n_used, np.nan)
    size_folds: dict[int, list[FoldChoice]] = {k: [] for k in size_pred}
    one_se_choices: list[OneSeChoice] = []

    def predict(s: tuple[int, ...], lam: float, train: list[int], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        w = weights_for(s, lam, train)
        return features[np.ix_(rows, cols_of[s])] @ w, w

    for outer, name in enumerate(names):
        folds = inner_folds([b for b in range(len(names)) if b != outer])
        train = [c for fold in folds for c in fold]
        rows = np.flatnonzero(block_of == outer)
        inner_of = {s: inner(s, folds) for s in all_subsets}
        for s in all_subsets:
            lam = inner_of[s][0]
            subset_pred[s][rows] = predict(s, lam, train, rows)[0]
            subset_lams[s].append(lam)
        for k in size_pred:
            of_size = [s for s in all_subsets if len(s) == k]
            s = min(of_size, key=lambda t: (inner_of[t][1], t))
            lam, loss, se = inner_of[s]
            size_pred[k][rows], w = predict(s, lam, train, rows)
            size_folds[k].append(
                FoldChoice(
                    block=name, judges=tuple(judges[j] for j in s), lam=lam, inner_loss=loss, inner_se=se,
                    weights=tuple(float(x) for x in w),
                )
            )
        chosen, best, threshold = one_standard_error_choice(
            {s: inner_of[s][1] for s in all_subsets}, {s: inner_of[s][2] for s in all_subsets}
        )
        one_se_pred[rows] = predict(chosen, inner_of[chosen][0], train, rows)[0]
        one_se_choices.append(
            OneSeChoice(
                block=name,
                judges=tuple(judges[j] for j in chosen),
                best_judges=tuple(judges[j] for j in best),
                best_loss=inner_of[best][1],
                best_se=inner_of[best][2],
                threshold=threshold,
                inner_loss=inner_of[chosen][1],
                candidates=tuple(
                    (tuple(judges[j] for j in s), inner_of[s][1], inner_of[s][2]) for s in all_subsets
                ),
            )
        )

    # Stratified page-block bootstrap of the vote-weighted Brier, predictions fixed.
    units = bootstrap_units(page_names, block_names)
    counts = bootstrap_page_blocks(units, resamples=resamples, seed=seed).astype(float)
    unit_v = np.bincount(units.unit_of, weights=v_used, minlength=units.n_units)
    den = counts @ unit_v

    def boot(pred: np.ndarray) -> tuple[float, np.ndarray]:
        err = v_used * (pred - h_used) ** 2
        point = float(err.sum() / v_used.sum())
        return point, (counts @ np.bincount(units.unit_of, weights=err, minlength=units.n_units)) / den

    def summary(point: float, draws: np.ndarray) -> Interval:
        lo, hi = percentile_interval(draws)
        return Interval(value=point, ci95=(float(lo), float(hi)))

    size_boot = {k: boot(size_pred[k]) for k in size_pred}
    sizes = tuple(
        SizeResult(
            size=k,
            folds=tuple(size_folds[k]),
            brier=summary(*size_boot[k]),
            n_subsets=sum(1 for s in all_subsets if len(s) == k),
        )
        for k in size_pred
    )
    differences = []
    for k1 in size_pred:
        for k2 in size_pred:
            if k1 == k2:
                continue
            point = size_boot[k1][0] - size_boot[k2][0]
            lo, hi = percentile_interval(size_boot[k1][1] - size_boot[k2][1])
            differences.append(
                {"minuend": k1, "subtrahend": k2, "label": f"{k1} minus {k2}", "value": point, "ci95": [float(lo), float(hi)]}
            )
    subset_boot = {s: boot(subset_pred[s]) for s in all_subsets}
    cost_arr = None if costs is None else np.asarray([float(c) for c in costs])
    subset_cost = {s: (float(cost_arr[list(s)].sum()) if cost_arr is not None else None) for s in all_subsets}
    if cost_arr is not None:
        front = pareto_front(
            np.array([subset_cost[s] for s in all_subsets]), np.array([subset_boot[s][0] for s in all_subsets])
        )
    else:
        front = np.zeros(len(all_subsets), dtype=bool)
    subsets = tuple(
        SubsetResult(
            judges=tuple(judges[j] for j in s),
            brier=summary(*subset_boot[s]),
            coverage=subset_coverage_of[s],
            cost=subset_cost[s],
            pareto=bool(front[i]),
            lambdas=tuple(subset_lams[s]),
        )
        for i, s in enumerate(all_subsets)
    )
    n_excl = n_total - n_used
    if n_excl:
        notes.append(
            f"{n_excl} comparison(s) with a human vote left out: some judge has no valid output there "
            "(every subset is evaluated on the same comparisons)"
        )
    return AblationResult(
        judges=tuple(judges),
        blocks=tuple(names),
        n_comparisons=n_used,
        n_excluded=n_excl,
        n_total=n_total,
        axis_evidence=axis_evidence,
        lambdas=lambdas,
        sizes=sizes,
        one_se=tuple(one_se_choices),
        one_se_brier=summary(*boot(one_se_pred)),
        differences=tuple(differences),
        subsets=subsets,
        resamples=int(resamples),
        seed=int(seed),
        cost_unit=cost_unit if costs is not None else None,
        warnings=tuple(notes),
    )


__all__ = [
    "DEFAULT_LAMBDAS",
    "ESTIMATOR_NOTE",
    "AblationResult",
    "fit_blend",
    "judge_ablation",
    "one_standard_error_choice",
    "pareto_front",
]
