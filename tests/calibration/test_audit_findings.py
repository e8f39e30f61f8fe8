"""The statistics audit's findings F1–F5 and the rating-equivalence rule (issue 16, part 4).

Each scenario is one the audit found wrong; the expected values are computed independently here
(a refit with ``fit_bradley_terry`` and ``scipy.stats.spearmanr`` on θ rounded to the ranks'
``RANK_DECIMALS``, statsmodels' TOST, direct counting).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from scipy import stats

from stats.agreement import agreement_report
from stats.bradley_terry import fit_bradley_terry
from stats.judge_weights import calibrate
from stats.preference import human_reference, label_counts
from stats.rank_correlation import kendall_tie_aware, spearman_tie_aware
from stats.rating import paired_t_interval, rating_comparison

# The independent check rounds θ to 9 decimals: these scenarios sit far from a half-point, where
# rounding and the tie tolerance (stats.bradley_terry.RANK_TOLERANCE) agree.
RANK_DECIMALS = 9

SYSTEMS = ["s1", "s2", "s3", "s4", "s5"]


def tied_votes() -> pd.DataFrame:
    """Three raters, every pair of five systems twice; s1 and s2 end up exactly tied in θ."""
    rng = np.random.default_rng(0)
    rows = []
    k = 0
    for a, b in itertools.combinations(SYSTEMS, 2):
        for _ in range(2):
            k += 1
            for r in ("r1", "r2", "r3"):
                rows.append(
                    {
                        "comparison": f"c{k:03d}",
                        "page": f"p{k}",
                        "block": "b1",
                        "rater": r,
                        "label": str(rng.choice(["A", "B", "TIE"])),
                        "is_repeat": False,
                        "swapped": False,
                        "confidence": 3,
                        "system_a": a,
                        "system_b": b,
                    }
                )
    return pd.DataFrame(rows)


def bt_theta(frame: pd.DataFrame) -> np.ndarray:
    """Independent docs/protocol.md "Human reference and agreement" human ranking: h per comparison, then the
    Bradley–Terry θ."""
    comps = sorted(frame["comparison"].unique())
    info = frame.groupby("comparison")[["system_a", "system_b"]].first().loc[comps]
    c = label_counts(frame["label"].to_numpy(), frame["comparison"].to_numpy(), comps)
    h = np.asarray(human_reference(c[:, 2], c[:, 1], c[:, 0]), dtype=float)
    keep = np.isfinite(h)
    index = {s: i for i, s in enumerate(SYSTEMS)}
    return fit_bradley_terry(
        info["system_a"].map(index).to_numpy()[keep],
        info["system_b"].map(index).to_numpy()[keep],
        h[keep],
        len(SYSTEMS),
    ).theta


def rounded_spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.spearmanr(np.round(x, RANK_DECIMALS), np.round(y, RANK_DECIMALS)).statistic)


# ------------------------------------------------------------------ F1: tie-aware rank correlation


def test_f1_leave_one_rater_out_spearman_treats_exact_ties_as_ties() -> None:
    votes = tied_votes()
    full = bt_theta(votes)
    assert np.round(full[0], RANK_DECIMALS) == np.round(full[1], RANK_DECIMALS)  # the scenario: a tie
    d = agreement_report(votes, resamples=5, seed=0).to_dict()
    per = {p["rater"]: p for p in d["leave_one_rater_out"]["per_rater"]}
    want = {r: rounded_spearman(full, bt_theta(votes[votes["rater"] != r])) for r in ("r1", "r2", "r3")}
    for r, value in want.items():
        assert per[r]["spearman"] == pytest.approx(value, abs=1e-12), r
    assert d["leave_one_rater_out"]["min_spearman"] == pytest.approx(min(want.values()), abs=1e-12)
    # Ranking the raw floats would let 1e-16 noise order s1 and s2 (0.1 here instead of 0.308).
    assert d["leave_one_rater_out"]["min_spearman"] == pytest.approx(0.3077935056255462, abs=1e-12)


def tied_calibration_inputs(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    votes = tied_votes()
    human = []
    for cid, g in votes.groupby("comparison", sort=True):
        n_a, n_t = int((g["label"] == "A").sum()), int((g["label"] == "TIE").sum())
        human.append(
            {
                "comparison": cid,
                "page": g["page"].iloc[0],
                "block": f"b{int(cid[1:]) % 3}",
                "h": (n_a + 0.5 * n_t) / len(g),
                "n_valid": len(g),
                "system_a": g["system_a"].iloc[0],
                "system_b": g["system_b"].iloc[0],
            }
        )
    rng = np.random.default_rng(seed)
    outputs = [
        {"comparison": h["comparison"], "judge": j, "order": o, "repeat": rep, "status": "valid",
         "winner": str(rng.choice(["A", "B", "TIE"]))}
        for h in human
        for j in ("j1", "j2")
        for o in ("primary", "swapped")
        for rep in (0, 1)
    ]
    return pd.DataFrame(outputs), pd.DataFrame(human)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_f1_calibrate_spearman_ranking_is_tie_aware(seed: int) -> None:
    outputs, human = tied_calibration_inputs(seed)
    result = calibrate(outputs, human, resamples=20, seed=1, ranking_interval=False)
    pred = result.predictions.merge(human[["comparison", "system_a", "system_b"]], on="comparison")
    index = {s: i for i, s in enumerate(SYSTEMS)}
    a, b = pred["system_a"].map(index).to_numpy(), pred["system_b"].map(index).to_numpy()
    human_theta = fit_bradley_terry(a, b, pred["h"].to_numpy(), 5).theta
    proxy_theta = fit_bradley_terry(a, b, pred["p_oof"].to_numpy(), 5).theta
    assert result.spearman_ranking is not None
    assert result.spearman_ranking.value == pytest.approx(rounded_spearman(proxy_theta, human_theta), abs=1e-12)


def test_f1_helpers_equal_scipy_on_rounded_values() -> None:
    x = np.array([0.3, 0.3 + 1e-14, -0.1, 0.5])
    y = np.array([1.0, 2.0, 0.0, 3.0])
    xr = np.round(x, RANK_DECIMALS)
    assert spearman_tie_aware(x, y) == pytest.approx(stats.spearmanr(xr, y).statistic, abs=1e-12)
    assert kendall_tie_aware(x, y) == pytest.approx(stats.kendalltau(xr, y).statistic, abs=1e-12)
    assert spearman_tie_aware(x, y) != pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-6)
    assert math.isnan(spearman_tie_aware(np.zeros(3), y[:3]))


# ------------------------------------------------------------------ F4 and F5: undefined figures


def one_rater_votes() -> pd.DataFrame:
    votes = tied_votes()
    return votes[votes["rater"] == "r1"].reset_index(drop=True)


def test_f4_dropping_the_only_rater_gives_null_rank_movement() -> None:
    d = agreement_report(one_rater_votes(), resamples=5, seed=0).to_dict()
    loro = d["leave_one_rater_out"]
    assert loro["max_rank_movement"] is None
    assert loro["min_spearman"] is None
    (entry,) = loro["per_rater"]
    assert entry["max_rank_movement"] is None and entry["spearman"] is None
    assert "no comparison has a valid vote" in entry["reason"]
    assert "leave_one_rater_out.max_rank_movement" in d["reasons"]
    json.dumps(d, allow_nan=False)


def test_f5_every_null_agreement_figure_has_a_reason() -> None:
    # One valid vote per comparison: no pair of votes, so exact agreement, κ and α are undefined.
    d = agreement_report(one_rater_votes(), resamples=5, seed=0).to_dict()
    for key in ("exact_agreement", "fleiss_kappa", "krippendorff_alpha_ordinal"):
        assert d[key]["value"] is None
        assert "two or more valid main votes" in d["reasons"][key]
    assert d["hidden_repeat_agreement"]["value"] is None
    assert "hidden repeat" in d["reasons"]["hidden_repeat_agreement"]
    assert all(any(w.startswith(k) for w in d["warnings"]) for k in d["reasons"])
    # Every null among the headline figures is explained.
    nulls = [k for k in ("coverage", "unanimous_share", "unique_plurality_share") if d[k] is None]
    nulls += [k for k in ("exact_agreement", "fleiss_kappa", "krippendorff_alpha_ordinal") if d[k]["value"] is None]
    assert set(nulls) <= set(d["reasons"])


def test_f5_one_label_only_explains_kappa() -> None:
    votes = tied_votes().assign(label="A")
    d = agreement_report(votes, resamples=5, seed=0).to_dict()
    assert d["exact_agreement"]["value"] == 1.0 and "exact_agreement" not in d["reasons"]
    assert d["fleiss_kappa"]["value"] is None
    assert "chance agreement is 1" in d["reasons"]["fleiss_kappa"]


def test_f5_defined_figures_have_no_reason() -> None:
    d = agreement_report(tied_votes(), resamples=20, seed=0).to_dict()
    assert d["fleiss_kappa"]["value"] is not None and "fleiss_kappa" not in d["reasons"]
    assert "leave_one_rater_out.min_spearman" not in d["reasons"]


# ------------------------------------------------------------------ F3: committee split of a tiny study


def test_f3_two_comparisons_clamp_the_committee_split_with_a_warning() -> None:
    human = pd.DataFrame(
        [
            {"comparison": "c1", "page": "p1", "block": "b1", "h": 0.75, "n_valid": 4},
            {"comparison": "c2", "page": "p2", "block": "b2", "h": 0.25, "n_valid": 4},
        ]
    )
    outputs = pd.DataFrame(
        [
            {"comparison": c, "judge": j, "order": o, "repeat": r, "status": "valid", "winner": w}
            for c, w in (("c1", "A"), ("c2", "B"))
            for j in ("j1", "j2", "j3")
            for o in ("primary", "swapped")
            for r in (0, 1)
        ]
    )
    result = calibrate(outputs, human, resamples=10, seed=1, families={"j1": "x", "j2": "y", "j3": "z"})
    audit = result.committee_audit
    assert audit is not None and (audit.n_pilot, audit.n_holdout) == (1, 1)
    assert any("clamped to 1 pilot" in w for w in result.warnings)


# ------------------------------------------------------------------ rating equivalence


def ratings(differences: list[float]) -> pd.DataFrame:
    rows = []
    for i, d in enumerate(differences):
        rows.append({"brief": f"b{i}", "system": "x", "rater": "r", "dimension": "look", "rating": 3.0 + d})
        rows.append({"brief": f"b{i}", "system": "y", "rater": "r", "dimension": "look", "rating": 3.0})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("differences", "fragment"),
    [([0.0, 0.0], "only 2 paired brief"), ([0.0, 0.0, 0.0], "s_d = 0"), ([1.0, 1.0, 1.0, 1.0], "s_d = 0")],
)
def test_rating_equivalence_needs_three_briefs_and_spread(differences: list[float], fragment: str) -> None:
    res = rating_comparison(ratings(differences), system_a="x", system_b="y", resamples=50, seed=0, scale=None)
    entry = res.dimension("look")
    assert entry.equivalent is None and entry.equivalent_bootstrap is None
    eq = res.to_dict()["dimensions"][0]["equivalence"]
    assert eq["verdict"] == "not estimable" and fragment in eq["reason"]


def test_rating_equivalence_with_three_varied_briefs_is_estimable() -> None:
    from statsmodels.stats.weightstats import ttost_paired

    diffs = [1.0, 0.0, 0.0]
    res = rating_comparison(ratings(diffs), system_a="x", system_b="y", resamples=50, seed=0, scale=None)
    eq = res.to_dict()["dimensions"][0]["equivalence"]
    a = 3.0 + np.array(diffs)
    p, _, _ = ttost_paired(a, np.full(3, 3.0), -0.5, 0.5)
    assert eq["reason"] is None
    assert eq["equivalent"] is bool(p <= 0.025)
    assert eq["verdict"] == ("equivalent" if p <= 0.025 else "not shown equivalent")
    assert paired_t_interval(np.array(diffs), margin=0.5).sd > 0


# ------------------------------------------------------------------ F2: judges without a valid output


@pytest.fixture
def cal(db: None) -> Any:
    from tests.calibration.cal_factories import make_calibration_study

    return make_calibration_study("cal-audit")


@pytest.mark.django_db
def test_f2_a_judge_with_only_invalid_outputs_is_reported(cal: Any, tmp_path: Path) -> None:
    from judges.models import JudgeOutput

    n = JudgeOutput.objects.filter(judge__name="cal-gemini").update(status="invalid", winner="")
    assert n > 0
    out = tmp_path / "r.json"
    call_command("calibrate", "cal-audit", "--json", str(out), "--bootstrap", "20")
    report = json.loads(out.read_text())
    assert "cal-gemini" not in report["judges"]
    (dropped,) = report["dropped_judges"]
    assert dropped["judge"] == "cal-gemini" and dropped["n_outputs"] == n
    assert "no valid output" in dropped["reason"] and f"all {n} of its outputs" in dropped["reason"]
    assert any("cal-gemini left out" in w and "no valid output" in w for w in report["warnings"])
    with pytest.raises(CommandError) as err:
        call_command("calibrate", "cal-audit", "--json", str(out), "--judges", "cal-opus,cal-gemini")
    assert "no valid output" in str(err.value) and f"all {n} of its outputs are invalid" in str(err.value)


def test_f1_objective_vs_subjective_ranks_rounded_scores() -> None:
    from ranking.leaderboard import _objective_correlations

    rows = [{"system": "a", "score": 10.0}, {"system": "b", "score": 10.0 + 1e-12}, {"system": "c", "score": -3.0}]
    objective = {"a": 1.0, "b": 2.0, "c": 0.0}
    got = _objective_correlations(rows, objective)
    x, y = [1.0, 2.0, 0.0], [10.0, 10.0, -3.0]
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert got["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert got["spearman"] != pytest.approx(1.0)  # raw floats would call it a perfect ρ = 1


def test_objective_vs_subjective_null_correlations_carry_a_reason() -> None:
    """Issue 29: constant objective scores gave null ρ/τ without a reason."""
    from ranking.leaderboard import _objective_correlations

    rows = [{"system": "a", "score": 10.0}, {"system": "b", "score": 5.0}, {"system": "c", "score": -3.0}]
    got = _objective_correlations(rows, {"a": 0.7, "b": 0.7, "c": 0.7})
    assert got["spearman"] is None and got["kendall"] is None
    assert got["reason"] is not None and "same objective score (0.7)" in got["reason"]
    tied = [{"system": s, "score": 1e-12 * k} for k, s in enumerate("abc")]
    got = _objective_correlations(tied, {"a": 1.0, "b": 2.0, "c": 3.0})
    assert got["spearman"] is None and "tied in the fitted ranking" in got["reason"]
    got = _objective_correlations(rows, {"a": 3.0, "b": 2.0, "c": 1.0})
    assert got["spearman"] == pytest.approx(1.0) and got["reason"] is None
