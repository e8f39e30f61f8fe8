"""The ``leaderboard`` command and ``leaderboard_compute``
(docs/protocol.md "Deployment leaderboard", "Commands", "Report keys") against independent computations: p̂
recomputed from the factory's ground truth, the Bradley–Terry optimum found by scipy, soft preference and
appearances by brute-force loops, correlations by scipy."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy import optimize, stats

from ranking.leaderboard import leaderboard_compute
from ranking.objective_csv import objective_parse_csv
from ranking.selectors import leaderboard_inputs
from tests.ranking.rank_factories import RankedStudy, make_ranked_study

pytestmark = pytest.mark.django_db

VOTE = {"A": 1.0, "TIE": 0.5, "B": 0.0}


def expected_outcomes(ranked: RankedStudy, *, human: bool = False) -> dict[str, float]:
    """p̂ per comparison from the ground truth (docs/protocol.md "Deployment leaderboard"), h_i where asked
    (docs/protocol.md "Human reference and agreement")."""
    out: dict[str, float] = {}
    for cid in ranked.comparisons:
        votes = ranked.primary_votes[cid]
        if human and ranked.human_labels.get(cid):
            labels = ranked.human_labels[cid]
            out[cid] = (labels.count("A") + 0.5 * labels.count("TIE")) / len(labels)
        elif all(j in votes for j in ranked.judges):
            total = sum(ranked.coefficients[j] * VOTE[votes[j]] for j in ranked.judges)
            out[cid] = min(1.0, max(0.0, total))
    return out


def scipy_scores(ranked: RankedStudy, p: dict[str, float], systems: list[str]) -> dict[str, float]:
    """Maximize the docs/protocol.md "Deployment leaderboard" objective with scipy (BFGS) and return centered
    Elo scores."""
    index = {s: k for k, s in enumerate(systems)}
    a = np.array([index[ranked.comparisons[c][1]] for c in p])
    b = np.array([index[ranked.comparisons[c][2]] for c in p])
    y = np.array(list(p.values()))

    def negative(theta: np.ndarray) -> tuple[float, np.ndarray]:
        d = theta[a] - theta[b]
        value = np.sum(y * -np.logaddexp(0, -d) + (1 - y) * -np.logaddexp(0, d)) - 1e-3 * theta @ theta
        sig = 1 / (1 + np.exp(-d))
        g = np.zeros(len(systems))
        np.add.at(g, a, y - sig)
        np.add.at(g, b, -(y - sig))
        g -= 2e-3 * theta
        return -value, -g

    res = optimize.minimize(
        negative, np.zeros(len(systems)), jac=True, method="BFGS", options={"gtol": 1e-10}
    )
    theta = res.x - res.x.mean()
    return {s: float(400 * theta[index[s]] / math.log(10)) for s in systems}


def run_command(ranked: RankedStudy, tmp_path: Path, *extra: str, name: str = "lb.json") -> dict:
    out = tmp_path / name
    call_command(
        "leaderboard",
        ranked.study.slug,
        "--coefficients",
        ranked.coefficient_set.name,
        "--json",
        str(out),
        *extra,
    )
    return json.loads(out.read_text())


def test_command_json_equals_an_independent_fit(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-fit")
    report = run_command(ranked, tmp_path, "--bootstrap", "200", "--seed", "5")
    p = expected_outcomes(ranked)
    assert report["coefficients"] == "frozen"
    assert report["n_comparisons"] == len(p) == len(ranked.comparisons) - 4
    assert report["n_skipped"] == 4  # invalid, failed, missing and repeat-1-only primary outputs
    assert report["n_pages"] == len({ranked.comparisons[c][0] for c in p})
    assert report["bootstrap"] == {"resamples": 200, "seed": 5, "units": "pages", "strata": 1}
    systems = ranked.systems
    want = scipy_scores(ranked, p, systems)
    rows = {row["system"]: row for row in report["systems"]}
    assert set(rows) == set(systems)
    for s in systems:
        assert rows[s]["score"] == pytest.approx(want[s], abs=1e-4)
        points = [
            p[c] if ranked.comparisons[c][1] == s else 1 - p[c] for c in p if s in ranked.comparisons[c][1:3]
        ]
        assert rows[s]["soft_preference"] == pytest.approx(sum(points) / len(points), abs=1e-12)
        assert rows[s]["appearances"] == len(points)
        assert rows[s]["name"] == f"{s.title()} System"
    # Ordered by rank 1..M, ranks follow the scores, best system first (true strengths).
    assert [row["rank"] for row in report["systems"]] == list(range(1, len(systems) + 1))
    scores = [row["score"] for row in report["systems"]]
    assert scores == sorted(scores, reverse=True)
    assert report["systems"][0]["system"] == "alpha"
    assert sum(row["rank1_share"] for row in report["systems"]) == pytest.approx(1.0)


def test_intervals_have_plausible_width_and_contain_the_estimate(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-ci")
    report = run_command(ranked, tmp_path, "--bootstrap", "300", "--seed", "11")
    for row in report["systems"]:
        low, high = row["ci95"]
        assert low < row["score"] < high
        assert 5 < high - low < 400  # Elo points, 30 pages
        r_low, r_high = row["rank_ci95"]
        assert 1 <= r_low <= row["rank"] <= r_high <= len(report["systems"])
        assert 0 <= row["rank1_share"] <= 1


def test_same_seed_same_json_other_seed_other_intervals(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-seed")
    first = run_command(ranked, tmp_path, "--bootstrap", "100", "--seed", "7", name="a.json")
    again = run_command(ranked, tmp_path, "--bootstrap", "100", "--seed", "7", name="b.json")
    other = run_command(ranked, tmp_path, "--bootstrap", "100", "--seed", "8", name="c.json")
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert first == again
    assert [r["score"] for r in other["systems"]] == [r["score"] for r in first["systems"]]
    assert [r["ci95"] for r in other["systems"]] != [r["ci95"] for r in first["systems"]]


def test_objective_correlations_equal_scipy(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-obj")
    objective = {"alpha": 71.5, "beta": 40.0, "gamma": 55.25, "delta": 10.0}
    csv_path = tmp_path / "objective.csv"
    csv_path.write_text("system,score\n" + "".join(f"{s},{v}\n" for s, v in objective.items()))
    report = run_command(ranked, tmp_path, "--bootstrap", "50", "--objective", str(csv_path))
    subjective = {row["system"]: row["score"] for row in report["systems"]}
    x = [objective[s] for s in ranked.systems]
    y = [subjective[s] for s in ranked.systems]
    got = report["objective_vs_subjective"]
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert got["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    assert got["spearman"] == pytest.approx(0.8)  # gamma and beta swapped
    assert got["n_systems"] == 4


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("system,score\nalpha,1\nbeta,high\n", "objective.csv:3"),
        ("system,score\nalpha,1\nomega,2\n", "objective.csv:3"),
        ("system,score\nalpha,1\nalpha,2\n", "objective.csv:3"),
        ("name,value\nalpha,1\n", "objective.csv:1"),
        ("system,score\nalpha,nan\n", "objective.csv:2"),
    ],
)
def test_bad_objective_csv_is_one_line_with_the_line_number(tmp_path: Path, body: str, needle: str) -> None:
    make_ranked_study("lb-objbad", n_pages=6)
    csv_path = tmp_path / "objective.csv"
    csv_path.write_text(body)
    out = tmp_path / "lb.json"
    with pytest.raises(CommandError) as info:
        call_command(
            "leaderboard",
            "lb-objbad",
            "--coefficients",
            "frozen",
            "--json",
            str(out),
            "--objective",
            str(csv_path),
        )
    message = str(info.value)
    assert needle in message and "\n" not in message
    assert not out.exists()


def test_unknown_coefficient_set_is_one_line(tmp_path: Path) -> None:
    make_ranked_study("lb-unknown", n_pages=6)
    out = tmp_path / "lb.json"
    with pytest.raises(CommandError) as info:
        call_command("leaderboard", "lb-unknown", "--coefficients", "nope", "--json", str(out))
    assert "nope" in str(info.value) and "frozen" in str(info.value) and "\n" not in str(info.value)
    assert not out.exists()


def test_unknown_study_and_missing_folder_are_refused(tmp_path: Path) -> None:
    make_ranked_study("lb-paths", n_pages=6)
    with pytest.raises(CommandError, match="no study"):
        call_command("leaderboard", "missing", "--coefficients", "frozen", "--json", str(tmp_path / "x.json"))
    with pytest.raises(CommandError, match="does not exist"):
        call_command(
            "leaderboard", "lb-paths", "--coefficients", "frozen", "--json", str(tmp_path / "no" / "x.json")
        )


def test_html_and_csv_outputs(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-files", n_pages=10)
    html, csv_path = tmp_path / "lb.html", tmp_path / "lb.csv"
    report = run_command(ranked, tmp_path, "--bootstrap", "40", "--html", str(html), "--csv", str(csv_path))
    page = html.read_text()
    assert "<svg" in page and "<script" not in page and "40 resamples" in page.replace("\n", " ")
    for row in report["systems"]:
        assert row["system"] in page
    lines = csv_path.read_text().splitlines()
    assert lines[0].startswith("rank,system,name,score,ci95_low,ci95_high")
    assert len(lines) == 1 + len(report["systems"])
    assert lines[1].split(",")[1] == report["systems"][0]["system"]


def test_human_labels_replace_the_proxy_only_when_asked(tmp_path: Path) -> None:
    ranked = make_ranked_study("lb-human", with_votes=True)
    proxy = run_command(ranked, tmp_path, "--bootstrap", "30", name="proxy.json")
    human = run_command(ranked, tmp_path, "--bootstrap", "30", "--use-human-labels", name="human.json")
    assert proxy["n_human_labels"] == 0 and proxy["use_human_labels"] is False
    with_h = expected_outcomes(ranked, human=True)
    n_labelled = sum(1 for c in ranked.comparisons if ranked.human_labels.get(c))
    assert human["n_human_labels"] == n_labelled > 0
    assert human["n_comparisons"] == len(with_h)
    inputs = leaderboard_inputs(
        study=ranked.study, coefficient_set=ranked.coefficient_set, use_human_labels=True
    )
    got = dict(zip(inputs.comparisons, inputs.p, strict=True))
    assert got.keys() == with_h.keys()
    for cid, value in with_h.items():
        assert got[cid] == pytest.approx(value, abs=1e-12)
    want = scipy_scores(ranked, with_h, ranked.systems)
    for row in human["systems"]:
        assert row["score"] == pytest.approx(want[row["system"]], abs=1e-4)


def test_progress_callback_gives_the_same_result() -> None:
    ranked = make_ranked_study("lb-progress", n_pages=12)
    seen: list[float] = []
    plain = leaderboard_compute(study=ranked.study, coefficient_set="frozen", resamples=95, seed=3)
    with_progress = leaderboard_compute(
        study=ranked.study, coefficient_set=ranked.coefficient_set, resamples=95, seed=3, progress=seen.append
    )
    assert plain == with_progress
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0) and len(seen) >= 5


def test_objective_parser_accepts_bom_blank_lines_and_column_order() -> None:
    parsed = objective_parse_csv(
        "\ufeffscore,system\n1.5,a\n\n-2,b\n", source="o.csv", systems={"a", "b", "c"}
    )
    assert parsed == {"a": 1.5, "b": -2.0}


def test_objective_parser_turns_a_csv_error_into_a_one_line_error() -> None:
    """A field over the csv module's limit raised ``csv.Error`` (a 500 on the leaderboards page)."""
    from annotation.errors import ValidationFailed

    text = 'system,score\na,1\n"' + "x" * 200_000 + '",2\n'
    with pytest.raises(ValidationFailed) as info:
        objective_parse_csv(text, source="o.csv", systems={"a", "b"})
    assert "o.csv:" in str(info.value) and "not valid CSV" in str(info.value) and "\n" not in str(info.value)


def test_human_labels_leave_out_the_raters_the_saved_rules_exclude(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from annotation.models import Vote

    ranked = make_ranked_study("lb-rules", with_votes=True)
    study = ranked.study
    junk = Vote.objects.filter(trial__assignment__rater__external_id="r00", trial__is_repeat=False)
    junk.filter(trial__swapped=False).update(label="A")  # straight-lining: "A" shown on every trial
    junk.filter(trial__swapped=True).update(label="B")
    study.options = {**(study.options or {}), "exclusion_rules": {
        "straightline_share": 0.9, "straightline_min_trials": 5, "min_median_response_ms": None}}
    study.save(update_fields=["options"])
    report = run_command(ranked, tmp_path, "--bootstrap", "30", "--use-human-labels", "--html",
                         str(tmp_path / "lb.html"))
    out = capsys.readouterr().out
    page = " ".join((tmp_path / "lb.html").read_text().split())
    assert 'rules left <span id="lb-human-excluded">1</span> of 3 raters out of the human labels' in page
    assert "r00" not in page  # counts only: the same body is the public page
    ex = report["exclusions"]
    assert ex["applied_by_default"] is True and ex["n_raters"] == 3 and ex["n_kept_raters"] == 2
    assert [r["participant"] for r in ex["excluded_raters"]] == ["r00"]
    assert "human labels: without 1 of 3 raters" in out and "r00 (straight_lining_share)" in out
    # h_i from the two kept raters' main votes only (the voided assignment and repeats ignored too).
    kept: dict[str, list[str]] = {}
    for cid, label in Vote.objects.filter(
        trial__assignment__rater__external_id__in=["r01", "r02"], trial__is_repeat=False,
        label__in=["A", "TIE", "B"],
    ).values_list("trial__comparison__external_id", "label"):
        kept.setdefault(cid, []).append(label)
    inputs = leaderboard_inputs(study=study, coefficient_set=ranked.coefficient_set, use_human_labels=True)
    got = {c: p for c, p, h in zip(inputs.comparisons, inputs.p, inputs.from_human, strict=True) if h}
    assert got.keys() == kept.keys()
    for cid, labels in kept.items():
        assert got[cid] == pytest.approx((labels.count("A") + 0.5 * labels.count("TIE")) / len(labels), abs=1e-12)
    # Without human labels the votes are not read; no exclusions object.
    assert "exclusions" not in run_command(ranked, tmp_path, "--bootstrap", "30", name="proxy.json")
