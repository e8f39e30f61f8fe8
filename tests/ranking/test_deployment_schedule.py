"""Tests of the docs/protocol.md "Deployment leaderboard" deployment schedule (pure module)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ranking.deployment_schedule import DeploymentSchedule, make_deployment_schedule, make_schedule

PAPER_SEED = 20260831


def all_rendered(systems, n_pages):
    return {f"page-{k:04d}": list(systems) for k in range(n_pages)}


def check_invariants(schedule: DeploymentSchedule, systems, pages, existing, n_total):
    """Every docs/protocol.md "Deployment leaderboard" rule, recomputed from the comparisons themselves."""
    new = list(schedule.comparisons)
    everything = list(existing) + new
    assert len(everything) == n_total
    pair_of = [tuple(sorted((a, b))) for _, a, b in everything]
    # no (page, pair) twice
    slots = Counter((page, pair) for (page, _, _), pair in zip(everything, pair_of, strict=True))
    assert max(slots.values(), default=1) == 1
    # eligible pages only, two different known systems
    for page, a, b in new:
        assert a != b
        assert a in pages[page] and b in pages[page]
    # pair counts differ by at most one, over all M(M-1)/2 pairs (zero counts included)
    counts = Counter(pair_of)
    all_pairs = [(s, t) for i, s in enumerate(systems) for t in systems[i + 1 :]]
    per_pair = [counts[tuple(sorted(pair))] for pair in all_pairs]
    assert max(per_pair) - min(per_pair) <= 1
    base = n_total // len(all_pairs)
    assert set(per_pair) <= {base, base + 1}
    # appearances differ by at most one
    seen = Counter()
    for _, a, b in everything:
        seen[a] += 1
        seen[b] += 1
    per_system = [seen[s] for s in systems]
    assert max(per_system) - min(per_system) <= 1
    # the report says the same
    quota = schedule.quota
    assert (quota.pair_count_min, quota.pair_count_max) == (min(per_pair), max(per_pair))
    assert (quota.appearances_min, quota.appearances_max) == (min(per_system), max(per_system))
    assert quota.n_total == n_total and quota.n_new == len(new) and quota.n_existing == len(existing)
    assert dict(schedule.appearances) == dict(zip(systems, per_system, strict=True))
    assert sum(schedule.pair_counts.values()) == n_total


def test_paper_schedule_quotas():
    systems = [f"sys{k}" for k in range(10)]
    pages = all_rendered(systems, 1113)
    schedule = make_deployment_schedule(systems, pages, [], 10_000, seed=PAPER_SEED)
    check_invariants(schedule, systems, pages, [], 10_000)
    assert sorted(Counter(schedule.pair_counts.values()).items()) == [(222, 35), (223, 10)]
    assert set(schedule.appearances.values()) == {2000}
    assert schedule.quota.pairs_at_max == 10
    # pages are used evenly when every page is eligible for every pair
    assert schedule.quota.page_load_max - schedule.quota.page_load_min <= 1
    assert schedule.quota.n_pages_used == 1113
    # A/B orientation balanced within every pair
    oriented = Counter((a, b) for _, a, b in schedule.comparisons)
    for i, s in enumerate(systems):
        for t in systems[i + 1 :]:
            assert abs(oriented[(s, t)] - oriented[(t, s)]) <= 1


def test_human_study_comparisons_are_kept_counted_and_not_repeated():
    rng = np.random.default_rng(0)
    systems = [f"sys{k}" for k in range(10)]
    pages = {f"page-{k:04d}": [s for s in systems if rng.random() < 0.95] for k in range(1113)}
    existing, used = [], set()
    page_ids = sorted(pages)
    while len(existing) < 1872:
        page = page_ids[rng.integers(len(page_ids))]
        i, j = rng.choice(10, 2, replace=False)
        key = (page, min(i, j), max(i, j))
        if key not in used:
            used.add(key)
            existing.append((page, systems[i], systems[j]))
    schedule = make_deployment_schedule(systems, pages, existing, 10_000, seed=PAPER_SEED)
    check_invariants(schedule, systems, pages, existing, 10_000)
    assert schedule.quota.n_new == 10_000 - 1872
    assert sorted(Counter(schedule.pair_counts.values()).items()) == [(222, 35), (223, 10)]
    assert set(schedule.appearances.values()) == {2000}
    # orientation over each pair (human-study ones included) stays within one when it can
    oriented = Counter((a, b) for _, a, b in list(existing) + list(schedule.comparisons))
    existing_oriented = Counter((a, b) for _, a, b in existing)
    for i, s in enumerate(systems):
        for t in systems[i + 1 :]:
            if abs(existing_oriented[(s, t)] - existing_oriented[(t, s)]) <= 10:
                assert abs(oriented[(s, t)] - oriented[(t, s)]) <= 1


def test_seeded_and_reproducible():
    systems = ["a", "b", "c", "d", "e"]
    pages = all_rendered(systems, 40)
    first = make_deployment_schedule(systems, pages, [], 123, seed=7)
    again = make_schedule(systems, pages, [], 123, seed=7)
    other = make_deployment_schedule(systems, pages, [], 123, seed=8)
    assert first.comparisons == again.comparisons
    assert first.comparisons != other.comparisons
    # the order of the page mapping does not matter
    reordered = dict(reversed(list(pages.items())))
    assert make_deployment_schedule(systems, reordered, [], 123, seed=7).comparisons == first.comparisons


def test_only_pages_where_both_rendered():
    systems = ["a", "b", "c"]
    pages = {
        "p1": ["a", "b"],
        "p2": ["b", "c"],
        "p3": ["a", "c"],
        "p4": ["a", "b", "c"],
        "p5": ["a", "b", "c"],
    }
    schedule = make_deployment_schedule(systems, pages, [], 9, seed=1)
    check_invariants(schedule, systems, pages, [], 9)
    assert set(schedule.pair_counts.values()) == {3}


def test_too_few_pages_raises():
    systems = ["a", "b", "c"]
    with pytest.raises(ValueError, match="eligible pages"):
        make_deployment_schedule(systems, all_rendered(systems, 3), [], 12, seed=0)
    # one pair rarely rendered together
    pages = {"p1": ["a", "b", "c"], "p2": ["a", "b"], "p3": ["a", "b"], "p4": ["b", "c"]}
    with pytest.raises(ValueError, match=r"pair \(a, c\)"):
        make_deployment_schedule(systems, pages, [], 6, seed=0)


def test_human_study_above_quota_raises():
    systems = ["a", "b", "c"]
    existing = [(f"page-{k:04d}", "a", "b") for k in range(5)]
    with pytest.raises(ValueError, match="human-study"):
        make_deployment_schedule(systems, all_rendered(systems, 20), existing, 9, seed=0)
    with pytest.raises(ValueError, match="smaller than"):
        make_deployment_schedule(systems, all_rendered(systems, 20), existing, 4, seed=0)


@pytest.mark.parametrize(
    ("systems", "existing", "message"),
    [
        (["a"], [], "at least 2"),
        (["a", "a"], [], "unique"),
        (["a", "b"], [("page-0000", "a", "z")], "unknown system"),
        (["a", "b"], [("page-0000", "a", "a")], "itself"),
        (["a", "b"], [("page-0000", "a", "b"), ("page-0000", "b", "a")], "repeats"),
    ],
)
def test_bad_input_raises(systems, existing, message):
    with pytest.raises(ValueError, match=message):
        make_deployment_schedule(systems, all_rendered(["a", "b"], 5), existing, 4, seed=0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_systems=st.integers(2, 8),
    n_comparisons=st.integers(0, 200),
    spare_pages=st.integers(1, 15),
    n_existing=st.integers(0, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_quotas_hold_when_every_page_is_eligible(
    n_systems, n_comparisons, spare_pages, n_existing, seed
):
    systems = [f"s{k}" for k in range(n_systems)]
    n_pairs = n_systems * (n_systems - 1) // 2
    base = n_comparisons // n_pairs
    pages = all_rendered(systems, base + spare_pages)
    # human-study comparisons at most `base` per pair, so they never exceed a quota
    rng = np.random.default_rng(seed)
    existing = []
    per_pair = Counter()
    page_ids = sorted(pages)
    for _ in range(n_existing):
        i, j = sorted(rng.choice(n_systems, 2, replace=False).tolist())
        if per_pair[(i, j)] >= base:
            continue
        page = page_ids[per_pair[(i, j)]]
        per_pair[(i, j)] += 1
        existing.append(
            (page, systems[i], systems[j]) if rng.random() < 0.5 else (page, systems[j], systems[i])
        )
    schedule = make_deployment_schedule(systems, pages, existing, n_comparisons, seed=seed)
    check_invariants(schedule, systems, pages, existing, n_comparisons)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_systems=st.integers(2, 7),
    n_pages=st.integers(1, 25),
    n_comparisons=st.integers(0, 150),
    render_share=st.floats(0.5, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_any_eligibility_either_meets_quotas_or_raises(
    n_systems, n_pages, n_comparisons, render_share, seed
):
    rng = np.random.default_rng(seed)
    systems = [f"s{k}" for k in range(n_systems)]
    pages = {f"page-{k}": [s for s in systems if rng.random() < render_share] for k in range(n_pages)}
    try:
        schedule = make_deployment_schedule(systems, pages, [], n_comparisons, seed=seed)
    except ValueError as error:
        assert "pages" in str(error) or "appearances" in str(error)
        # when it refuses, some pair really lacks pages for the lower quota or the upper one
        n_pairs = n_systems * (n_systems - 1) // 2
        base = n_comparisons // n_pairs
        eligible = [
            sum(1 for members in pages.values() if s in members and t in members)
            for i, s in enumerate(systems)
            for t in systems[i + 1 :]
        ]
        if "appearances" not in str(error):
            assert min(eligible) < base or sum(e >= base + 1 for e in eligible) < n_comparisons % n_pairs
        return
    check_invariants(schedule, systems, pages, [], n_comparisons)


def test_pair_already_at_upper_quota_gets_the_plus_one_and_appearances_still_balance():
    # 4 systems, 6 pairs, N = 8: q = 1 and 2 pairs get 2. The human study already has (a, b)
    # twice, so (a, b) must be one of them and the other must be (c, d) for appearances 4, 4, 4, 4.
    systems = ["a", "b", "c", "d"]
    pages = all_rendered(systems, 6)
    existing = [("page-0000", "a", "b"), ("page-0001", "b", "a")]
    for seed in range(10):
        schedule = make_deployment_schedule(systems, pages, existing, 8, seed=seed)
        check_invariants(schedule, systems, pages, existing, 8)
        assert schedule.pair_counts[("a", "b")] == 2
        assert schedule.pair_counts[("c", "d")] == 2
        assert set(schedule.appearances.values()) == {4}
        assert all({x, y} != {"a", "b"} for _, x, y in schedule.comparisons)
