"""Deployment comparison schedule (docs/protocol.md "Deployment leaderboard" (Schedule)).

Pure module: plain Python and numpy in, frozen dataclasses out, no Django.

Given M systems, the eligible pages (with the systems that rendered each), the human-study
comparisons (kept, and counted toward the quotas) and a total N, :func:`make_deployment_schedule`
returns the new comparisons such that, over all N comparisons:

- every unordered pair of systems has ``q = N // P`` or ``q + 1`` comparisons (P = M(M−1)/2);
- every system appears ``(M − 1) q + d`` times with ``d`` differing by at most 1 across systems;
- no (page, unordered pair) occurs twice;
- a new comparison uses only a page on which both of its systems rendered.

How (deterministic in the inputs and the seed, ``numpy.random.default_rng(seed)``):

1. The ``r = N mod P`` pairs that get ``q + 1`` form a graph on the systems; a system's appearances
   are ``(M − 1) q`` plus its degree in that graph, so we build a near-regular graph with r edges:
   greedy (join the two least-connected systems, seeded tie-break), then edge moves that shift a
   degree from the most- to the least-connected system, then seeded restarts. Pairs already at
   ``q + 1`` through the human study must be in it; pairs with too few free eligible pages for
   ``q + 1`` cannot be.
2. Each pair's new comparisons go to its least-used eligible pages (page load counts every
   comparison on the page, human-study ones included), pairs taken in seeded random order, ties
   between equally used pages broken at random. Pages within one pair are distinct by
   construction, so this step cannot fail once step 1 checked that every pair has enough free
   eligible pages.
3. Canonical A/B: in every pair the two systems are A as equally often as possible over all of the
   pair's comparisons (human-study ones included); which system gets the odd one is a coin flip.

The paper's schedule (10 systems, 10,000 comparisons, seed 20260831) is 35 pairs × 222 +
10 pairs × 223 with 2,000 appearances per system.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


_MAX_RESTARTS = 50


@dataclass(frozen=True)
class ScheduleQuota:
    """Achieved quotas over all comparisons (human-study ones included)."""

    n_existing: int
    n_new: int
    n_total: int
    n_pairs: int
    pair_count_min: int
    pair_count_max: int
    pairs_at_max: int
    appearances_min: int
    appearances_max: int
    n_pages_used: int
    page_load_min: int
    page_load_max: int


@dataclass(frozen=True)
class DeploymentSchedule:
    """New comparisons ``(page, system_a, system_b)`` in seeded order, and the achieved quotas.

    ``pair_counts`` maps each unordered pair ``(s, t)`` (in the order of ``systems``) to its total
    count; ``appearances`` maps each system to its total appearances (both over all comparisons).
    """

    comparisons: tuple[tuple[str, str, str], ...]
    pair_counts: Mapping[tuple[str, str], int]
    appearances: Mapping[str, int]
    quota: ScheduleQuota
    seed: int


def _pair_key(i: int, j: int) -> tuple[int, int]:
    return (i, j) if i < j else (j, i)


def _extra_pairs(
    n_systems: int,
    pairs: list[tuple[int, int]],
    extra: int,
    forced: set[tuple[int, int]],
    allowed: set[tuple[int, int]],
    rng: np.random.Generator,
) -> set[tuple[int, int]]:
    """Choose ``extra`` pairs (forced ⊆ chosen ⊆ allowed ∪ forced) with near-equal degrees."""
    import numpy as np

    if len(forced) > extra:
        raise ValueError(
            f"the human-study comparisons already put {len(forced)} pairs at the upper pair quota, "
            f"but only {extra} pairs may have it with this N; ask for more comparisons"
        )
    if len(allowed | forced) < extra:
        raise ValueError(
            f"only {len(allowed | forced)} pairs have enough eligible pages for one more comparison, "
            f"{extra} are needed; add pages or change N"
        )
    for _attempt in range(_MAX_RESTARTS):
        chosen = set(forced)
        degree = np.zeros(n_systems, dtype=np.int64)
        for i, j in forced:
            degree[i] += 1
            degree[j] += 1
        candidates = np.asarray(
            [pair for pair in pairs if pair in allowed and pair not in chosen], dtype=np.int64
        )
        candidates = candidates.reshape(-1, 2)
        tiebreak = rng.permutation(len(candidates))
        open_ = np.ones(len(candidates), dtype=bool)
        while len(chosen) < extra:
            # Join the least-connected systems: smallest (max degree, degree sum, random rank).
            du, dv = degree[candidates[:, 0]], degree[candidates[:, 1]]
            order = np.lexsort((tiebreak, du + dv, np.maximum(du, dv), ~open_))
            k = int(order[0])
            open_[k] = False
            i, j = int(candidates[k, 0]), int(candidates[k, 1])
            chosen.add((i, j))
            degree[i] += 1
            degree[j] += 1
        # Repair: move an edge (v, w) of a most-connected v to (u, w) for a least-connected u.
        for _move in range(4 * len(pairs) + 4):
            low, high = int(degree.min()), int(degree.max())
            if high - low <= 1:
                return chosen
            moved = False
            for v in np.flatnonzero(degree == high).tolist():
                for u in np.flatnonzero(degree == low).tolist():
                    for w in rng.permutation(n_systems).tolist():
                        if w in (u, v):
                            continue
                        old, new = _pair_key(v, w), _pair_key(u, w)
                        if old in chosen and old not in forced and new in allowed and new not in chosen:
                            chosen.remove(old)
                            chosen.add(new)
                            degree[v] -= 1
                            degree[u] += 1
                            moved = True
                            break
                    if moved:
                        break
                if moved:
                    break
            if not moved:
                break
        if int(degree.max()) - int(degree.min()) <= 1:
            return chosen
    raise ValueError(
        "cannot balance system appearances to within 1: the human-study comparisons or the "
        "eligible pages fix too many pairs; add pages or change N"
    )


def make_deployment_schedule(
    systems: Sequence[str],
    pages: Mapping[str, Iterable[str]],
    existing: Sequence[tuple[str, str, str]],
    n_comparisons: int,
    *,
    seed: int,
) -> DeploymentSchedule:
    """Build the docs/protocol.md "Deployment leaderboard" deployment schedule (see the module docstring for
    the rules and method).

    ``systems``: system ids; ``pages``: eligible page id → ids of the systems that rendered it;
    ``existing``: human-study comparisons ``(page, system_a, system_b)``, kept and counted;
    ``n_comparisons``: N, the total including ``existing``. Raises ValueError when the quotas
    cannot be met (too few eligible pages, or the human study already exceeds a pair quota).
    """
    import numpy as np

    system_list = [str(s) for s in systems]
    if len(system_list) < 2:
        raise ValueError("a deployment schedule needs at least 2 systems")
    if len(set(system_list)) != len(system_list):
        raise ValueError("system ids must be unique")
    if (
        isinstance(n_comparisons, bool)
        or not isinstance(n_comparisons, int | np.integer)
        or n_comparisons < 0
    ):
        raise ValueError(f"the number of comparisons must be a non-negative integer, got {n_comparisons!r}")
    index = {s: i for i, s in enumerate(system_list)}
    m = len(system_list)
    pairs = list(combinations(range(m), 2))
    n_pairs = len(pairs)

    page_ids = sorted(str(page) for page in pages)
    page_index = {page: k for k, page in enumerate(page_ids)}
    rendered: dict[str, set[int]] = {}
    for page, page_systems in pages.items():
        rendered[str(page)] = {index[str(s)] for s in page_systems if str(s) in index}

    # Human-study comparisons: kept, counted, and their (page, pair) slots are taken.
    existing_count: Counter[tuple[int, int]] = Counter()
    existing_low_as_a: Counter[tuple[int, int]] = Counter()
    taken: set[tuple[str, tuple[int, int]]] = set()
    page_load = np.zeros(len(page_ids), dtype=np.int64)
    for row, (page, sys_a, sys_b) in enumerate(existing):
        if str(sys_a) not in index or str(sys_b) not in index:
            raise ValueError(f"existing comparison {row} ({page}, {sys_a}, {sys_b}) names an unknown system")
        i, j = index[str(sys_a)], index[str(sys_b)]
        if i == j:
            raise ValueError(
                f"existing comparison {row} ({page}, {sys_a}, {sys_b}) compares a system with itself"
            )
        key = _pair_key(i, j)
        if (str(page), key) in taken:
            raise ValueError(f"existing comparison {row} repeats page {page} for pair ({sys_a}, {sys_b})")
        taken.add((str(page), key))
        existing_count[key] += 1
        existing_low_as_a[key] += int(i < j)
        if str(page) in page_index:
            page_load[page_index[str(page)]] += 1
    n_existing = len(existing)
    if n_comparisons < n_existing:
        raise ValueError(
            f"N = {n_comparisons} is smaller than the {n_existing} human-study comparisons it must include"
        )

    base, extra = divmod(n_comparisons, n_pairs)
    # Free eligible pages per pair: both rendered, (page, pair) not yet used.
    rendered_matrix = np.zeros((len(page_ids), m), dtype=bool)
    for page, members in rendered.items():
        rendered_matrix[page_index[page], sorted(members)] = True
    taken_by_pair: dict[tuple[int, int], list[int]] = {}
    for page, key in taken:
        if page in page_index:
            taken_by_pair.setdefault(key, []).append(page_index[page])
    free_pages: dict[tuple[int, int], np.ndarray] = {}
    for i, j in pairs:
        both = rendered_matrix[:, i] & rendered_matrix[:, j]
        if (i, j) in taken_by_pair:
            both[taken_by_pair[(i, j)]] = False
        free_pages[(i, j)] = np.flatnonzero(both)
    forced: set[tuple[int, int]] = set()
    allowed: set[tuple[int, int]] = set()
    for pair in pairs:
        have = existing_count[pair]
        name = f"({system_list[pair[0]]}, {system_list[pair[1]]})"
        if have > base + 1 or (have == base + 1 and extra == 0):
            raise ValueError(
                f"pair {name} already has {have} human-study comparisons, more than the pair quota "
                f"{base if extra == 0 else base + 1} for N = {n_comparisons}; ask for more comparisons"
            )
        if have == base + 1:
            forced.add(pair)
            continue
        if len(free_pages[pair]) < base - have:
            raise ValueError(
                f"pair {name} needs {base - have} more comparisons but only {len(free_pages[pair])} "
                f"eligible pages (both systems rendered, pair not yet on the page) are free; "
                f"add pages or lower N"
            )
        if len(free_pages[pair]) >= base + 1 - have:
            allowed.add(pair)

    rng = np.random.default_rng(seed)
    plus_one = _extra_pairs(m, pairs, extra, forced, allowed, rng) if extra else set()

    new_rows: list[tuple[int, int, int]] = []  # (page index, A, B)
    for order_k in rng.permutation(n_pairs).tolist():
        pair = pairs[order_k]
        target = base + int(pair in plus_one)
        need = target - existing_count[pair]
        if need <= 0:
            continue
        free = free_pages[pair]
        # Least-used pages first; a fresh random key per pair breaks ties.
        pick = free[np.lexsort((rng.random(len(free)), page_load[free]))[:need]]
        page_load[pick] += 1
        # Orientation: the lower-index system is A in half of the pair's comparisons (±1 by coin).
        low_as_a_target = target // 2 + (int(rng.integers(0, 2)) if target % 2 else 0)
        low_as_a = min(max(low_as_a_target - existing_low_as_a[pair], 0), need)
        as_a = np.zeros(need, dtype=bool)
        as_a[:low_as_a] = True
        rng.shuffle(as_a)
        i, j = pair
        for page_k, low_first in zip(pick.tolist(), as_a.tolist(), strict=True):
            new_rows.append((page_k, i, j) if low_first else (page_k, j, i))
    permutation = rng.permutation(len(new_rows))
    comparisons = tuple(
        (page_ids[new_rows[k][0]], system_list[new_rows[k][1]], system_list[new_rows[k][2]])
        for k in permutation.tolist()
    )

    totals: Counter[tuple[int, int]] = Counter(existing_count)
    for _page, i, j in new_rows:
        totals[_pair_key(i, j)] += 1
    appearance_counts = np.zeros(m, dtype=np.int64)
    for (i, j), count in totals.items():
        appearance_counts[i] += count
        appearance_counts[j] += count
    pair_values = [totals[pair] for pair in pairs]
    used = page_load[page_load > 0]
    quota = ScheduleQuota(
        n_existing=n_existing,
        n_new=len(comparisons),
        n_total=n_existing + len(comparisons),
        n_pairs=n_pairs,
        pair_count_min=min(pair_values),
        pair_count_max=max(pair_values),
        pairs_at_max=sum(1 for v in pair_values if v == max(pair_values)),
        appearances_min=int(appearance_counts.min()),
        appearances_max=int(appearance_counts.max()),
        n_pages_used=int(used.size),
        page_load_min=int(used.min()) if used.size else 0,
        page_load_max=int(used.max()) if used.size else 0,
    )
    return DeploymentSchedule(
        comparisons=comparisons,
        pair_counts={(system_list[i], system_list[j]): totals[(i, j)] for i, j in pairs},
        appearances={s: int(appearance_counts[k]) for k, s in enumerate(system_list)},
        quota=quota,
        seed=int(seed),
    )


make_schedule = make_deployment_schedule  # the name of the docs/protocol.md "Commands" command
