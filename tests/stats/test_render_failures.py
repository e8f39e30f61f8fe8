"""``stats.render_failures`` (docs/protocol.md "Failed renders in the leaderboard") against outcomes
listed by hand."""

from __future__ import annotations

import pytest

from stats.render_failures import failure_outcomes

# Page p1: systems 0 and 2 rendered, 1 failed; page p2: 0 failed, 1 failed, 2 rendered;
# page p3: every system rendered; page p4: only systems 1 and 2 have an output, both failed.
RENDERED = {
    "p2": {0: False, 1: False, 2: True},
    "p1": {0: True, 1: False, 2: True},
    "p3": {0: True, 1: True, 2: True},
    "p4": {1: False, 2: False},
}


def test_aescode_adds_one_loss_per_pair_with_exactly_one_failure() -> None:
    out = failure_outcomes(RENDERED, rule="aescode")
    listed = list(zip(out.pages, out.a.tolist(), out.b.tolist(), out.p.tolist(), strict=True))
    assert listed == [
        ("p1", 0, 1, 1.0),  # 0 rendered, 1 failed: 0 wins
        ("p1", 1, 2, 0.0),  # 1 failed, 2 rendered: 2 wins (p is the outcome for a = 1)
        ("p2", 0, 2, 0.0),
        ("p2", 1, 2, 0.0),
        # p2's pair (0, 1) and p4's pair (1, 2) both failed: dropped; p3 has no failure.
    ]


def test_ambihtmlbench_adds_nothing_and_an_unknown_rule_is_refused() -> None:
    out = failure_outcomes(RENDERED, rule="ambihtmlbench")
    assert out.pages == () and out.a.size == out.b.size == out.p.size == 0
    with pytest.raises(ValueError, match="unknown failure rule 'strict'"):
        failure_outcomes(RENDERED, rule="strict")
