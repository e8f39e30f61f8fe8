"""stats.judge_lens (docs/protocol.md "The disagreement lens") on hand-made cases, values worked out by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from stats import judge_lens as lens


def outputs(rows: list[tuple[str, str, int, str, str | None]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=["comparison", "order", "repeat", "status", "winner"])


def votes(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(rows, columns=["comparison", "rater", "label", "system_a", "system_b"])


CASES = outputs(
    [
        ("c1", "primary", 0, "valid", "A"),  # A both ways: consistent
        ("c1", "swapped", 0, "valid", "A"),
        ("c2", "primary", 0, "valid", "A"),  # first, first: biased toward the first, a flip
        ("c2", "swapped", 0, "valid", "B"),
        ("c3", "primary", 0, "valid", "B"),  # second, second: biased toward the second, a flip
        ("c3", "swapped", 0, "valid", "A"),
        ("c4", "primary", 0, "valid", "A"),  # first, tie: leans first, no flip
        ("c4", "swapped", 0, "valid", "TIE"),
        ("c5", "primary", 0, "valid", "TIE"),  # tie, second (canonical A shown second): leans second
        ("c5", "swapped", 0, "valid", "A"),
        ("c6", "primary", 0, "invalid", None),  # no valid reply in one order: error
        ("c6", "swapped", 0, "valid", "B"),
        ("c7", "primary", 0, "valid", "TIE"),  # one order only
        ("c8", "primary", 0, "valid", "A"),  # the other order still running
        ("c8", "swapped", 0, "running", None),
    ]
)


def test_position_cases_by_hand() -> None:
    cases = lens.position_cases(CASES)
    by = {
        c: (case, verdict, flip)
        for c, case, verdict, flip in cases.frame[["comparison", "case", "verdict", "flip"]].itertuples(
            index=False
        )
    }
    assert by == {
        "c1": ("consistent", "A", False),
        "c2": ("biased_first", "TIE", True),
        "c3": ("biased_second", "TIE", True),
        "c4": ("biased_first", "TIE", False),
        "c5": ("biased_second", "TIE", False),
        "c6": ("error", None, False),
    }
    summary = lens.position_summary(cases)
    assert summary["counts"] == {"consistent": 1, "biased_first": 2, "biased_second": 2, "error": 1}
    assert summary["inconsistent"] == 2
    assert (summary["n_one_order"], summary["n_unfinished"]) == (1, 1)
    assert summary["shares"]["biased_first"] == pytest.approx(2 / 6)


def test_agreement_tables_by_hand() -> None:
    cases = lens.position_cases(CASES)  # verdicts: c1 A, c2–c5 TIE
    v = votes(
        [
            ("c1", "r1", "A", "s", "t"), ("c1", "r2", "A", "s", "t"), ("c1", "r3", "B", "s", "t"),  # majority A
            ("c2", "r1", "TIE", "s", "t"), ("c2", "r2", "TIE", "s", "t"),  # majority TIE
            ("c3", "r1", "A", "s", "t"), ("c3", "r2", "B", "s", "t"),  # no majority
            ("c4", "r1", "B", "s", "t"), ("c4", "r2", "CANNOT_JUDGE", "s", "t"),  # majority B (one valid vote)
        ]
    )  # fmt: skip
    table = lens.agreement_tables(cases, v)
    assert table["n_verdicts"] == 5 and table["n_verdicts_without_majority"] == 2  # c3 and c5
    # vs majority: c1 A=A ✓, c2 TIE=TIE ✓, c4 TIE≠B; without ties only c1 counts.
    assert table["judge_vs_majority"]["with_ties"] == {"agree": 2, "n": 3, "value": 2 / 3}
    assert table["judge_vs_majority"]["without_ties"] == {"agree": 1, "n": 1, "value": 1.0}
    # vs raters: c1 (A: A, A, B) 2/3; c2 (TIE: TIE, TIE) 2/2; c3 (TIE: A, B) 0/2; c4 (TIE: B) 0/1.
    assert (
        table["judge_vs_raters"]["with_ties"]["agree"] == 4
        and table["judge_vs_raters"]["with_ties"]["n"] == 8
    )
    assert table["judge_vs_raters"]["without_ties"] == {"agree": 2, "n": 3, "value": 2 / 3}
    # rater pairs: c1 {AA ✓, AB, AB}, c2 {TT ✓}, c3 {AB}, c4 none → 2 of 5; without ties 1 of 4.
    assert table["human_vs_human"]["with_ties"] == {"agree": 2, "n": 5, "value": 0.4}
    assert table["human_vs_human"]["without_ties"] == {"agree": 1, "n": 4, "value": 0.25}


def test_gap_bins_and_win_rates() -> None:
    v = votes(
        [("c1", "r1", "A", "s", "t"), ("c1", "r2", "A", "s", "t"), ("c1", "r3", "TIE", "s", "t"),
         ("c2", "r1", "A", "t", "u")]
    )  # fmt: skip
    rates = lens.system_win_rates(v)
    assert rates == {"s": pytest.approx(2.5 / 3), "t": pytest.approx((0.5 / 3 * 3 + 1) / 4), "u": 0.0}
    assert [lens.gap_bin(g) for g in (0.0, 0.05, 0.1, 0.95, 1.0)] == [0, 0, 1, 9, 9]
    cases = lens.position_cases(
        outputs([("c1", "primary", 0, "valid", "A"), ("c1", "swapped", 0, "valid", "A"),
                 ("c2", "primary", 0, "valid", "B"), ("c2", "swapped", 0, "valid", "B")])
    )  # fmt: skip
    section = lens.agreement_by_gap(cases, v, {"c1": ("s", "t"), "c2": ("t", "u")})
    gap1 = abs(rates["s"] - rates["t"])  # 0.8333 − 0.375 = 0.458: bin 4, agrees (A)
    gap2 = abs(rates["t"] - rates["u"])  # 0.375: bin 3, disagrees (B against A)
    assert lens.gap_bin(gap1) == 4 and lens.gap_bin(gap2) == 3
    assert section["bins"][4]["with_ties"]["agree"] == 1 and section["bins"][3]["with_ties"] == {
        "agree": 0, "n": 1, "value": 0.0}  # fmt: skip


def test_conditioned_preferences_by_hand() -> None:
    attributes = pd.DataFrame.from_records(
        [
            {"comparison": "c1", "height_a": 900.0, "height_b": 500.0, "text_a": math.nan, "text_b": 10.0,
             "media_a": 0.0, "media_b": 0.0, "failed_a": False, "failed_b": False},
            {"comparison": "c2", "height_a": 400.0, "height_b": 800.0, "text_a": 5.0, "text_b": 1.0,
             "media_a": 3.0, "media_b": 0.0, "failed_a": False, "failed_b": True},
        ]
    )  # fmt: skip
    out = outputs([("c1", "primary", 0, "valid", "A"), ("c1", "swapped", 0, "valid", "TIE"),
                   ("c2", "primary", 0, "valid", "B"), ("c2", "swapped", 0, "invalid", None)])  # fmt: skip
    v = votes([("c1", "r", "B", "s", "t"), ("c2", "r", "A", "s", "t"), ("c2", "q", "CANNOT_JUDGE", "s", "t")])
    rows = {r["attribute"]: r for r in lens.conditioned_preferences(attributes, out, v)}
    # Taller: c1 A (1, ½ for the tie), c2 B (1): judge 2.5 / 3; people: c1 B → 0, c2 A → 0.
    assert rows["height"]["judge"] == {"p": pytest.approx(2.5 / 3), "n": 3, "n_comparisons": 2}
    assert rows["height"]["people"] == {"p": 0.0, "n": 2, "n_comparisons": 2}
    # More text: only c2 is known (c1's A has no blocks); more media: c2 (c1 equal).
    assert rows["text"]["n_comparisons"] == 1 and rows["text"]["judge"]["p"] == 0.0
    assert rows["media"]["n_equal"] == 1 and rows["media"]["people"]["p"] == 1.0
    # Failed: c2's B failed, so A is the opponent the rows count for.
    assert rows["failed"]["judge"]["p"] == 0.0 and rows["failed"]["people"]["p"] == 1.0


def test_disagreement_order_is_total() -> None:
    rows = [
        {"comparison": "b", "disagreement": 0.5, "n_votes": 3},
        {"comparison": "a", "disagreement": 0.5, "n_votes": 3},
        {"comparison": "c", "disagreement": 0.5, "n_votes": 5},
        {"comparison": "d", "disagreement": 0.9, "n_votes": 1},
    ]
    assert [r["comparison"] for r in lens.disagreement_order(rows)] == ["d", "c", "a", "b"]
