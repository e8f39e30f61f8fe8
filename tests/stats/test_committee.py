"""docs/protocol.md "Judges and calibration" discrete committee audit: rules case by case, and the audit
against brute-force loops."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from stats.bootstrap import bootstrap_page_blocks, bootstrap_units, percentile_interval
from stats.committee import (
    LABEL_CODES,
    UNRESOLVED,
    committee_audit,
    committee_probability,
    committee_vote,
    eligible_family_triples,
    judge_resolution,
    split_pilot_holdout,
    weighted_brier,
)

A, T, B, U = LABEL_CODES["A"], LABEL_CODES["TIE"], LABEL_CODES["B"], UNRESOLVED


def outputs_for(labels: list[str | None], *, comparison: str = "c1", judge: str = "j") -> pd.DataFrame:
    """Four outputs (2 orders × 2 repeats); None = an invalid output."""
    rows = []
    for (order, rep), label in zip(itertools.product(("primary", "swapped"), (0, 1)), labels, strict=False):
        rows.append(
            {
                "comparison": comparison,
                "judge": judge,
                "order": order,
                "repeat": rep,
                "status": "valid" if label else "invalid",
                "winner": label,
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["A", "A", "A", "B"], A),  # 3 of 4 agree
        (["A", "A", "A", "A"], A),
        (["TIE", "B", "TIE", "TIE"], T),
        (["B", "B", "B", None], B),  # 3 valid agree, one invalid
        (["A", "A", "B", "B"], U),  # 2-2
        (["A", "A", "B", "TIE"], U),
        (["A", "A", None, None], U),  # only two valid
        ([None, None, None, None], U),
    ],
)
def test_judge_resolution_rule(labels, expected):
    got = judge_resolution(outputs_for(labels), comparisons=["c1"], judges=["j"])
    assert got.tolist() == [[expected]]


def test_judge_resolution_shape_and_missing_judge():
    frame = pd.concat([outputs_for(["A"] * 4, comparison="c1"), outputs_for(["B"] * 4, comparison="c2")])
    got = judge_resolution(frame, comparisons=["c2", "c1", "c3"], judges=["j", "other"])
    assert got.tolist() == [[B, U], [A, U], [U, U]]


@pytest.mark.parametrize(
    ("members", "expected"),
    [
        ((A, A, B), A),
        ((A, A, A), A),
        ((B, A, B), B),
        ((T, T, A), T),
        ((A, B, T), U),  # three different labels
        ((A, U, A), A),  # two resolved agreeing suffice
        ((A, U, B), U),
        ((U, U, A), U),
        ((U, U, U), U),
    ],
)
def test_committee_vote_two_of_three(members, expected):
    assert committee_vote(np.array([members])).tolist() == [expected]


def test_committee_probability_and_weighted_brier():
    p = committee_probability(np.array([A, T, B, U]))
    assert p.tolist() == [1.0, 0.5, 0.0, 0.5]
    h = np.array([0.8, 0.5, 0.4, 1.0])
    w = np.array([5, 4, 2, 5]) / 5
    # The unresolved comparison (p = 0.5) stays in the denominator.
    want = (1.0 * 0.2**2 + 0.8 * 0.0 + 0.4 * 0.4**2 + 1.0 * 0.5**2) / (1.0 + 0.8 + 0.4 + 1.0)
    assert weighted_brier(p, h, w) == pytest.approx(want, abs=1e-15)
    with pytest.raises(ValueError):
        committee_vote(np.array([[A, A]]))


def test_eligible_family_triples():
    fam = {"o": "anthropic", "s": "anthropic", "g": "google", "l": "openai", "t": "openai"}
    triples = eligible_family_triples(["g", "l", "o", "s", "t"], fam)
    assert sorted(triples) == sorted([("g", "l", "o"), ("g", "l", "s"), ("g", "o", "t"), ("g", "s", "t")])
    with pytest.raises(ValueError, match="vendor family"):
        eligible_family_triples(["g", "x", "o"], fam)


def test_split_is_seeded_and_sized():
    a = split_pilot_holdout(100, pilot_size=17, seed=3)
    assert a.sum() == 17
    assert np.array_equal(a, split_pilot_holdout(100, pilot_size=17, seed=3))
    assert not np.array_equal(a, split_pilot_holdout(100, pilot_size=17, seed=4))
    assert split_pilot_holdout(1872, pilot_size=None, seed=1).sum() == 320
    for bad in (0, 100):
        with pytest.raises(ValueError, match="pilot size"):
            split_pilot_holdout(100, pilot_size=bad, seed=1)


@pytest.fixture(scope="module")
def audit_data():
    rng = np.random.default_rng(12)
    n = 200
    judges = ["g", "l", "o", "s", "t"]
    fam = {"o": "anthropic", "s": "anthropic", "g": "google", "l": "openai", "t": "openai"}
    truth = rng.integers(0, 3, n)
    res = np.empty((n, 5), dtype=np.int64)
    for k, j in enumerate(judges):
        p_unres = 0.7 if j == "s" else 0.1  # "s" rarely resolves -> its committees are ineligible
        noise = rng.random(n) < 0.25
        res[:, k] = np.where(noise, rng.integers(0, 3, n), truth)
        res[rng.random(n) < p_unres, k] = U
    n_valid = rng.integers(1, 6, n)
    h = np.clip(truth / 2 + rng.normal(0, 0.2, n), 0, 1)
    pages = [f"p{i // 2}" for i in range(n)]
    blocks = [f"B{i // 50}" for i in range(n)]
    comps = [f"c{i:03d}" for i in range(n)]
    return {
        "res": res,
        "judges": judges,
        "fam": fam,
        "h": h,
        "n_valid": n_valid,
        "pages": pages,
        "blocks": blocks,
        "comps": comps,
    }


def run_audit(d, **kw):
    return committee_audit(
        d["res"],
        judges=d["judges"],
        families=d["fam"],
        h=d["h"],
        n_valid=d["n_valid"],
        pages=d["pages"],
        blocks=d["blocks"],
        comparisons=d["comps"],
        pilot_size=kw.get("pilot_size", 60),
        split_seed=kw.get("split_seed", 8),
        resamples=kw.get("resamples", 400),
        seed=kw.get("seed", 2),
    )


def test_audit_against_brute_force(audit_data):
    d = audit_data
    audit = run_audit(d)
    pilot = split_pilot_holdout(len(d["h"]), pilot_size=60, seed=8)
    assert audit.n_pilot == 60 and audit.n_holdout == 140
    assert set(audit.pilot_comparisons) == {c for c, m in zip(d["comps"], pilot, strict=True) if m}
    col = {j: i for i, j in enumerate(d["judges"])}
    eligible, ineligible = {}, set()
    for combo in eligible_family_triples(d["judges"], d["fam"]):
        figures = {}
        for name, mask in (("pilot", pilot), ("holdout", ~pilot)):
            num = den = rnum = rden = 0.0
            resolved = 0
            for i in np.flatnonzero(mask):
                votes = [d["res"][i, col[j]] for j in combo]
                label = next((v for v in (A, T, B) if votes.count(v) >= 2), None)
                p = {A: 1.0, T: 0.5, B: 0.0}[label] if label is not None else 0.5
                w = d["n_valid"][i] / 5
                num += w * (p - d["h"][i]) ** 2
                den += w
                if label is not None:
                    resolved += 1
                    rnum += w * (p - d["h"][i]) ** 2
                    rden += w
            figures[name] = (num / den, rnum / rden, resolved / mask.sum())
        if figures["pilot"][2] >= 0.75:
            eligible[combo] = figures
        else:
            ineligible.add(combo)
    assert {c.judges for c in audit.ineligible} == ineligible
    assert all("s" in c for c in ineligible) and ineligible
    assert {c.judges for c in audit.committees} == set(eligible)
    for c in audit.committees:
        for name in ("pilot", "holdout"):
            split = getattr(c, name)
            assert split.brier == pytest.approx(eligible[c.judges][name][0], abs=1e-12)
            assert split.resolved_brier == pytest.approx(eligible[c.judges][name][1], abs=1e-12)
            assert split.coverage == pytest.approx(eligible[c.judges][name][2], abs=1e-12)
    for name in ("pilot", "holdout"):
        ordered = sorted(audit.committees, key=lambda c: getattr(c, name).rank)
        assert [getattr(c, name).rank for c in ordered] == list(range(1, len(ordered) + 1))
        briers = [getattr(c, name).brier for c in ordered]
        assert briers == sorted(briers)
    assert audit.pilot_winner == min(audit.committees, key=lambda c: c.pilot.brier).judges


def test_audit_holdout_bootstrap_equals_loop(audit_data):
    d = audit_data
    audit = run_audit(d)
    pilot = split_pilot_holdout(len(d["h"]), pilot_size=60, seed=8)
    idx = np.flatnonzero(~pilot)
    units = bootstrap_units([d["pages"][i] for i in idx], [d["blocks"][i] for i in idx])
    counts = bootstrap_page_blocks(units, resamples=400, seed=2)
    col = {j: i for i, j in enumerate(d["judges"])}
    boots = {}
    for c in audit.committees:
        p = committee_probability(committee_vote(d["res"][:, [col[j] for j in c.judges]]))[idx]
        w = d["n_valid"][idx] / 5
        loss = w * (p - d["h"][idx]) ** 2
        boots[c.judges] = np.array(
            [
                np.sum(counts[r, units.unit_of] * loss) / np.sum(counts[r, units.unit_of] * w)
                for r in range(400)
            ]
        )
        np.testing.assert_allclose(c.holdout.ci95, percentile_interval(boots[c.judges]), atol=1e-12)
    matrix = np.column_stack([boots[c.judges] for c in audit.committees])
    shares = np.bincount(matrix.argmin(axis=1), minlength=len(audit.committees)) / 400
    np.testing.assert_allclose([c.holdout.rank1_share for c in audit.committees], shares, atol=1e-12)
    assert sum(c.holdout.rank1_share for c in audit.committees) == pytest.approx(1.0)
    winner = next(c for c in audit.committees if c.pilot.rank == 1)
    assert winner.holdout.diff_vs_pilot_winner == 0.0


def test_audit_rejects_bad_input(audit_data):
    d = dict(audit_data)
    d["n_valid"] = np.zeros(len(d["h"]))
    with pytest.raises(ValueError, match="valid human vote"):
        run_audit(d)
    with pytest.raises(ValueError, match="pilot size"):
        run_audit(audit_data, pilot_size=len(audit_data["h"]))


def test_audit_without_three_families(audit_data):
    d = dict(audit_data)
    d["fam"] = dict.fromkeys(d["judges"], "same")
    audit = run_audit(d)
    assert audit.committees == () and audit.warnings
