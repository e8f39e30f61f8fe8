"""kind_report for the other study kinds (docs/study-kinds.md "Hygiene rules"): stored votes → hygiene →
analysis, command, HTML, page and API.

Studies are imported from the fixture bundles and their votes written with the ORM
(``kind_report_factories``). Each scenario keeps its own record of what every simulated rater
answered, and the expected numbers are computed from that record with plain loops, numpy, scipy,
statsmodels and the ``krippendorff`` package — never from the code under test.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import shlex
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import krippendorff
import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from annotation.models import AssignmentState, Candidate, Comparison, Predicate, Rater, Study
from kind_reports.services import kind_report_build
from tests.calibration.figure_checks import page_figures
from tests.kind_reports.kind_report_factories import VoteWriter, canonical, import_kind_study

pytestmark = pytest.mark.django_db

RESAMPLES = 300
SEED = 17


# ---------------------------------------------------------------------------------------------
# Independent helpers
# ---------------------------------------------------------------------------------------------


@dataclass
class Answer:
    """One simulated answered trial, as the simulation meant it (not read back from the database)."""

    rater: str
    unit: str
    brief: str
    value: Any  # pairwise/checklist: canonical label; rating: {dimension: int}
    repeat: bool = False
    check: bool = False
    voided: bool = False
    system: str = ""
    item_a: str = ""
    item_b: str = ""


@dataclass
class Scenario:
    study: Study
    answers: list[Answer] = field(default_factory=list)

    def kept(self, raters: set[str]) -> list[Answer]:
        """Data answers of live assignments by ``raters`` (checks and voided never count)."""
        return [a for a in self.answers if a.rater in raters and not a.check and not a.voided]

    def main(self, raters: set[str]) -> list[Answer]:
        return [a for a in self.kept(raters) if not a.repeat]


def brief_resamples(briefs: list[str], resamples: int, seed: int) -> list[list[str]]:
    """The documented cluster bootstrap draws: sorted briefs, ``default_rng(seed).integers`` in one block."""
    ordered = sorted(set(briefs))
    draws = np.random.default_rng(seed).integers(0, len(ordered), size=(resamples, len(ordered)))
    return [[ordered[j] for j in row] for row in draws]


def bootstrap_mean_ci(
    values_by_brief: dict[str, list[float]], all_briefs: list[str], resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile 2.5/97.5 of the pooled mean over drawn briefs (a loop per resample)."""
    out = []
    for drawn in brief_resamples(all_briefs, resamples, seed):
        pooled = [v for b in drawn for v in values_by_brief.get(b, [])]
        if pooled:
            out.append(sum(pooled) / len(pooled))
    lo, hi = np.percentile(out, [2.5, 97.5])
    return float(lo), float(hi)


def run(tmp_path: Path, slug: str, *args: str, name: str = "report.json") -> dict[str, Any]:
    out = tmp_path / name
    call_command("kind_report", slug, "--json", str(out), *args, stdout=io.StringIO())
    return json.loads(out.read_text())


def run_default(tmp_path: Path, slug: str, *args: str, name: str = "report.json") -> dict[str, Any]:
    return run(tmp_path, slug, "--bootstrap", str(RESAMPLES), "--seed", str(SEED), *args, name=name)


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------

PAIRWISE_KEPT = {"p1", "p2", "p3", "p4", "p5", "p9"}


def _pairwise_metrics(doc: dict[str, Any]) -> None:
    rng = np.random.default_rng(3)
    for item in doc["items"]:
        brief = int(item["brief"][1:])
        item["metrics"] = {"aesthetic": round(float(rng.uniform(0, 10)), 2)}
        # clip: alpha and beta tie on odd briefs (equal-score pairs, reported apart)
        if item["system"] in ("alpha", "beta") and brief % 2 == 1:
            item["metrics"]["clip"] = 0.3
        else:
            item["metrics"]["clip"] = round(float(rng.uniform(0.2, 0.4)), 3)


def build_pairwise(tmp_path: Path, researchers: tuple[Any, ...] = ()) -> Scenario:
    """8 briefs × 3 systems (24 comparisons). p1–p5 follow the aesthetic metric with noise;
    p6 fails an attention check, p7 always presses the left image (straight-lining on screen),
    p8 answers too fast, p9 always stores canonical A (alternating on screen: not straight-lining).
    p1 also has a voided assignment and pv only a voided one: neither may count.
    """
    study = import_kind_study(
        "pairwise", tmp_path, slug="pw", briefs=8, edit=_pairwise_metrics, researchers=researchers
    )
    sc = Scenario(study)
    w = VoteWriter(study)
    comps = list(
        Comparison.objects.filter(study=study)
        .select_related("candidate_a", "candidate_b", "page")
        .order_by("id")
    )
    assert len(comps) == 24
    rng = np.random.default_rng(5)

    def answer_for(rater: str, comp: Comparison, swapped: bool) -> str:
        a, b = comp.candidate_a.metrics["aesthetic"], comp.candidate_b.metrics["aesthetic"]
        higher, lower = ("A", "B") if a > b else ("B", "A")
        if rater == "p7":
            return canonical("A", swapped)
        if rater == "p9":
            return "A"
        u = rng.random()
        return higher if u < 0.75 else "TIE" if u < 0.85 else lower if u < 0.97 else "CANNOT_JUDGE"

    def record(rater: str, comp: Comparison, label: str, **kw: Any) -> None:
        sc.answers.append(
            Answer(
                rater,
                comp.external_id,
                comp.page.external_id,
                label,
                item_a=comp.candidate_a.external_id,
                item_b=comp.candidate_b.external_id,
                **kw,
            )
        )

    # Voided first: p1's abandoned assignment and pv's (every answer B, very fast).
    for rater in ("p1", "pv"):
        void = w.assignment(w.rater(rater), state=AssignmentState.VOIDED)
        for comp in comps:
            w.trial(void, comp, label="B", response_ms=50)
            record(rater, comp, "B", voided=True)
    for k in range(1, 10):
        name = f"p{k}"
        asg = w.assignment(w.rater(name))
        originals = []
        for j, comp in enumerate(comps):
            if j in (5, 15):  # instructed-response attention checks, as displayed
                expected = "A" if j == 5 else "TIE"
                shown = "B" if (name == "p6" and j == 15) else expected
                check_swapped = bool(j % 2)
                w.trial(
                    asg,
                    comps[0],
                    label=canonical(shown, check_swapped),
                    swapped=check_swapped,
                    attention=expected,
                )
                record(name, comps[0], canonical(shown, check_swapped), check=True)
            swapped = (k + j) % 2 == 1
            label = answer_for(name, comp, swapped)
            ms = 400 if name == "p8" else int(1500 + rng.integers(0, 3000))
            originals.append(
                (w.trial(asg, comp, label=label, swapped=swapped, response_ms=ms), label, swapped)
            )
            record(name, comp, label)
        for j in (0, 1):  # hidden repeats: same display side; odd raters flip A/B
            trial, label, swapped = originals[j]
            again = label if k % 2 == 0 or name in ("p7", "p9") else {"A": "B", "B": "A"}.get(label, label)
            w.trial(
                asg,
                comps[j],
                label=again,
                swapped=swapped,
                repeat_of=trial,
                response_ms=400 if name == "p8" else 2000,
            )
            record(name, comps[j], again, repeat=True)
    return sc


CHECKLIST_PATTERNS = (  # answers of c1, c2, c3 and the human majority they make
    (("YES", "YES", "YES"), "YES"),
    (("YES", "YES", "NO"), "YES"),
    (("NO", "NO", "UNCLEAR"), "NO"),
    (("YES", "NO", "UNCLEAR"), None),
    (("UNCLEAR", "UNCLEAR", "UNCLEAR"), None),
    (("NO", "NO", "YES"), "NO"),
    (("YES", "UNCLEAR", "UNCLEAR"), "YES"),
)


def build_checklist(tmp_path: Path, researchers: tuple[Any, ...] = ()) -> Scenario:
    """6 briefs × 2 items × 3 predicates = 36 predicates; c1–c3 answer by CHECKLIST_PATTERNS.

    c4 answers too fast, c6 needed three comprehension attempts (both excluded, both answer NO
    everywhere); c5's assignment is voided (YES everywhere). s1, s2 were screened out before any
    block (two failed comprehension attempts); s3 failed once and left (not screened out).
    """
    study = import_kind_study("checklist", tmp_path, slug="cl", briefs=6, researchers=researchers)
    sc = Scenario(study)
    w = VoteWriter(study)
    preds = list(Predicate.objects.filter(study=study).select_related("candidate__page").order_by("position"))
    assert len(preds) == 36
    raters = {
        "c1": w.rater("c1"),
        "c2": w.rater("c2", attempts=2),
        "c3": w.rater("c3"),
        "c4": w.rater("c4"),
        "c5": w.rater("c5"),
        "c6": w.rater("c6", attempts=3, passed=True),
    }
    w.rater("s1", attempts=2, passed=False)
    w.rater("s2", attempts=3, passed=False)
    w.rater("s3", attempts=1, passed=False)
    for name, rater in raters.items():
        voided = name == "c5"
        asg = w.assignment(rater, state=AssignmentState.VOIDED if voided else AssignmentState.FINISHED)
        for n, p in enumerate(preds):
            if name in ("c1", "c2") and n == 10:  # one passed attention check each
                expected = "NO" if name == "c1" else "YES"
                w.trial(asg, preds[0], label=expected, attention=expected)
                sc.answers.append(Answer(name, preds[0].external_id, "", expected, check=True))
            if name in ("c1", "c2", "c3"):
                label = CHECKLIST_PATTERNS[n % len(CHECKLIST_PATTERNS)][0][int(name[1]) - 1]
            else:
                label = "YES" if voided else "NO"
            w.trial(
                asg,
                p,
                label=label,
                rationale="visible in the image",
                response_ms=300 if name == "c4" else 2200,
            )
            sc.answers.append(Answer(name, p.external_id, p.candidate.page.external_id, label, voided=voided))
    return sc


RATING_DIFFS = {  # per-brief target difference alpha − beta (mean of two raters)
    "inside": [0, 0, 0.5, 0, -0.5, 0, 0, 0, 0.5, 0],
    "outside": [1, 1.5, 1, 0.5, 1, 1, 1.5, 1, 1, 1],
    "straddle": [0.5, 0, 1, 0.5, 0, 0.5, 1, 0, 0.5, 0.5],
}


def _rating_options(doc: dict[str, Any]) -> None:
    doc["options"] = {"dimensions": list(RATING_DIFFS), "scale": [1, 5], "margin": 0.5}
    doc["systems"].append({"id": "gamma", "name": "Gamma (no items)"})


def build_rating(tmp_path: Path, researchers: tuple[Any, ...] = ()) -> Scenario:
    """10 briefs × alpha/beta, dimensions inside / outside / straddle the ±0.5 margin.

    q1 and q2 rate every item so that the per-brief mean difference is RATING_DIFFS; q3 fails
    an attention check (and rates alpha 5, beta 1 everywhere); q1's voided assignment rates
    alpha 1, beta 5. q1 repeats one item and passes one attention check.
    """
    study = import_kind_study(
        "rating", tmp_path, slug="rt", briefs=10, edit=_rating_options, researchers=researchers
    )
    sc = Scenario(study)
    w = VoteWriter(study)
    items = list(
        Candidate.objects.filter(page__study=study)
        .select_related("page", "system")
        .order_by("page__position", "system__position")
    )
    assert len(items) == 20

    def split(d: float) -> tuple[int, int]:  # two integer rater differences with mean d
        total = round(2 * d)
        return (total + 1) // 2, total // 2

    def ratings_of(rater: str, item: Candidate) -> dict[str, int]:
        if rater == "q3":
            return dict.fromkeys(RATING_DIFFS, 5 if item.system.external_id == "alpha" else 1)
        if rater == "q1-void":
            return dict.fromkeys(RATING_DIFFS, 1 if item.system.external_id == "alpha" else 5)
        b = int(item.page.external_id[1:]) - 1
        out = {}
        for dim, diffs in RATING_DIFFS.items():
            share = split(diffs[b])[0 if rater == "q1" else 1]
            out[dim] = 3 + share if item.system.external_id == "alpha" else 3
        return out

    def record(rater: str, item: Candidate, ratings: dict[str, int], **kw: Any) -> None:
        sc.answers.append(
            Answer(
                rater.removesuffix("-void"),
                item.external_id,
                item.page.external_id,
                ratings,
                system=item.system.external_id,
                **kw,
            )
        )

    q1 = w.rater("q1")
    void = w.assignment(q1, state=AssignmentState.VOIDED)
    for item in items:
        w.trial(void, item, ratings=ratings_of("q1-void", item))
        record("q1-void", item, ratings_of("q1-void", item), voided=True)
    for name in ("q1", "q2", "q3"):
        asg = w.assignment(w.rater(name))
        first = None
        for n, item in enumerate(items):
            if n == 7 and name in ("q1", "q3"):
                given = dict.fromkeys(RATING_DIFFS, 4)
                if name == "q3":
                    given["outside"] = 3  # not 4 on every dimension: failed
                w.trial(asg, items[0], ratings=given, attention="4")
                record(name, items[0], given, check=True)
            trial = w.trial(asg, item, ratings=ratings_of(name, item))
            record(name, item, ratings_of(name, item))
            first = first or trial
        if name == "q1":
            w.trial(asg, items[0], ratings=ratings_of("q1", items[0]), repeat_of=first)
            record("q1", items[0], ratings_of("q1", items[0]), repeat=True)
    return sc


# ---------------------------------------------------------------------------------------------
# pairwise
# ---------------------------------------------------------------------------------------------


def test_pairwise_score_preference_matches_a_plain_loop(tmp_path: Path) -> None:
    sc = build_pairwise(tmp_path)
    report = run_default(tmp_path, "pw")
    assert report["study"] == "pw" and report["kind"] == "pairwise"
    assert report["bootstrap"] == {"resamples": RESAMPLES, "seed": SEED}
    sp = report["score_preference"]

    scores = {c.external_id: c.metrics for c in Candidate.objects.filter(page__study=sc.study)}
    main = sc.main(PAIRWISE_KEPT)
    assert sp["n_valid_votes"] == sum(a.value != "CANNOT_JUDGE" for a in main)
    assert sp["n_cannot_judge"] == sum(a.value == "CANNOT_JUDGE" for a in main)
    assert sp["n_repeat_votes_excluded"] == len(sc.kept(PAIRWISE_KEPT)) - len(main)

    for metric in ("aesthetic", "clip"):
        values = [m[metric] for m in scores.values()]
        width = max(values) - min(values)
        by_bin: dict[str, list[float]] = defaultdict(list)
        by_brief: dict[str, list[float]] = defaultdict(list)
        equal: Counter[str] = Counter()
        for a in main:
            if a.value == "CANNOT_JUDGE":
                continue
            sa, sb = scores[a.item_a][metric], scores[a.item_b][metric]
            if sa == sb:
                equal[a.value] += 1
                continue
            gap = round(abs(sa - sb) / width * 100, 9)
            label = "< 5" if gap < 5 else "5–15" if gap < 15 else "≥ 15"
            higher = "A" if sa > sb else "B"
            s = 0.5 if a.value == "TIE" else 1.0 if a.value == higher else 0.0
            by_bin[label].append(s)
            by_bin["all"].append(s)
            by_brief[a.brief].append(s)
        got = next(m for m in sp["metrics"] if m["metric"] == metric)
        assert got["range"]["width"] == pytest.approx(width)
        for entry in [got["overall"], *got["by_gap"]]:
            expected = by_bin[entry["bin"]]
            assert entry["n_votes"] == len(expected)
            assert entry["n_higher"] == expected.count(1.0) and entry["n_tie"] == expected.count(0.5)
            assert entry["n_lower"] == expected.count(0.0)
            if expected:
                assert entry["value"] == pytest.approx(sum(expected) / len(expected), abs=1e-12)
            else:
                assert entry["value"] is None
        briefs = sorted({a.brief for a in main})
        assert got["overall"]["ci95"] == pytest.approx(
            bootstrap_mean_ci(by_brief, briefs, RESAMPLES, SEED), abs=1e-12
        )
        assert got["equal_score"]["n_votes"] == sum(equal.values())
        assert (got["equal_score"]["n_A"], got["equal_score"]["n_TIE"], got["equal_score"]["n_B"]) == (
            equal["A"],
            equal["TIE"],
            equal["B"],
        )
    # clip has equal-score pairs (alpha–beta on odd briefs); aesthetic has none
    assert next(m for m in sp["metrics"] if m["metric"] == "clip")["equal_score"]["n_pairs"] == 4
    # raters who follow the metric 75% of the time (10% ties): agreement well above chance
    assert 0.7 < next(m for m in sp["metrics"] if m["metric"] == "aesthetic")["overall"]["value"] < 0.95


def test_pairwise_agreement_matches_krippendorff_and_pair_counts(tmp_path: Path) -> None:
    sc = build_pairwise(tmp_path)
    entry = run_default(tmp_path, "pw")["agreement"]["entries"][0]
    main = sc.main(PAIRWISE_KEPT)
    units = sorted({a.unit for a in main})
    raters = sorted(PAIRWISE_KEPT)
    code = {"B": 0.0, "TIE": 1.0, "A": 2.0}
    data = np.full((len(raters), len(units)), np.nan)
    for a in main:
        if a.value in code:
            data[raters.index(a.rater), units.index(a.unit)] = code[a.value]
    alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert entry["krippendorff_alpha"]["value"] == pytest.approx(alpha, abs=1e-9)
    agree = pairs = 0
    for u in range(len(units)):
        col = [v for v in data[:, u] if not math.isnan(v)]
        for i in range(len(col)):
            for j in range(len(col)):
                if i != j:
                    pairs += 1
                    agree += col[i] == col[j]
    assert entry["exact_agreement"]["n_pairs"] * 2 == pairs or entry["exact_agreement"]["n_pairs"] == pairs
    assert entry["exact_agreement"]["value"] == pytest.approx(agree / pairs, abs=1e-12)
    assert entry["n_main_answers"] == len(main)
    # hidden repeats: kept raters' repeat vs their main answer
    repeats = [a for a in sc.kept(PAIRWISE_KEPT) if a.repeat]
    originals = {(a.rater, a.unit): a.value for a in main}
    same = sum(originals[(a.rater, a.unit)] == a.value for a in repeats)
    assert entry["hidden_repeat_agreement"]["n"] == len(repeats) == 12
    assert entry["hidden_repeat_agreement"]["agree"] == same


def test_pairwise_hygiene_removes_exactly_the_simulated_participants(tmp_path: Path) -> None:
    sc = build_pairwise(tmp_path)
    h = run_default(tmp_path, "pw")["hygiene"]
    per_rater = Counter(a.rater for a in sc.answers if not a.check and not a.voided)
    checks = [a for a in sc.answers if a.check and not a.voided]
    assert h["n_participants"] == 9  # pv answered only in a voided assignment
    assert h["n_answers"] == sum(per_rater.values()) == 9 * 26
    assert h["n_attention_checks"] == len(checks) == 18 and h["n_attention_failed"] == 1
    assert h["kept_participants"] == len(PAIRWISE_KEPT)
    assert h["kept_answers"] == sum(per_rater[r] for r in PAIRWISE_KEPT)
    removed = {r["rule"]: r for r in h["removed"]}
    assert (removed["attention"]["participants_first"], removed["attention"]["answers_first"]) == (
        1,
        per_rater["p6"],
    )
    assert removed["straight_lining_share"]["participants_first"] == 1  # p7 (left every time), not p9
    assert removed["too_fast_median"]["participants_first"] == 1
    assert removed["comprehension"]["enabled"] is True and removed["comprehension"]["participants_first"] == 0
    excluded = {p["participant"]: p["rule"] for p in h["excluded_participants"]}
    assert excluded == {"p6": "attention", "p7": "straight_lining_share", "p8": "too_fast_median"}
    assert h["rules"]["max_attention_failures"] == 0 and h["n_screened_out"] == 0
    # p1's voided assignment is not part of their answers
    assert next(p for p in h["participants"] if p["participant"] == "p1")["n_data_answers"] == 26


def test_rules_from_study_options_and_the_rules_file(tmp_path: Path) -> None:
    sc = build_pairwise(tmp_path)
    relaxed = tmp_path / "relaxed.json"
    relaxed.write_text(
        json.dumps({"max_attention_failures": 1, "straightline_share": None, "min_median_response_ms": None})
    )
    h = run_default(tmp_path, "pw", "--rules", str(relaxed))["hygiene"]
    assert h["kept_participants"] == 9 and h["kept_answers"] == h["n_answers"]
    assert h["rules"]["straightline_share"] is None
    assert {r["rule"]: r["enabled"] for r in h["removed"]}["straight_lining_share"] is False

    sc.study.options = {**sc.study.options, "exclusion_rules": {"min_median_response_ms": None}}
    sc.study.save()
    h = run_default(tmp_path, "pw", name="opts.json")["hygiene"]
    assert "p8" not in {p["participant"] for p in h["excluded_participants"]}
    assert h["kept_participants"] == len(PAIRWISE_KEPT) + 1
    # the file overrides the study's setting key by key
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps({"min_median_response_ms": 1000}))
    h = run_default(tmp_path, "pw", "--rules", str(strict), name="strict.json")["hygiene"]
    assert {p["participant"]: p["rule"] for p in h["excluded_participants"]}["p8"] == "too_fast_median"
    # an answer-level rule drops single answers: p1–p9's votes at or above 1500 ms survive
    fast = tmp_path / "fast.json"
    fast.write_text(
        json.dumps(
            {
                "min_response_ms": 2000,
                "max_attention_failures": None,
                "straightline_share": None,
                "min_median_response_ms": None,
            }
        )
    )
    report = run_default(tmp_path, "pw", "--rules", str(fast), name="fast.json")
    removed = {r["rule"]: r for r in report["hygiene"]["removed"]}
    stored = [
        v
        for v in sc.study.blocks.get()
        .assignments.exclude(state="voided")
        .values_list("trials__vote__response_ms", "trials__attention_expected")
        if v[1] == ""
    ]
    assert removed["too_fast_answer"]["answers_first"] == sum(
        ms is not None and ms < 2000 for ms, _ in stored
    )
    assert report["hygiene"]["kept_answers"] == sum(ms is not None and ms >= 2000 for ms, _ in stored)


# ---------------------------------------------------------------------------------------------
# checklist
# ---------------------------------------------------------------------------------------------


def test_checklist_majority_and_agreement_match_an_independent_count(tmp_path: Path) -> None:
    sc = build_checklist(tmp_path)
    report = run_default(tmp_path, "cl")
    cl = report["checklist"]
    preds = list(
        Predicate.objects.filter(study=sc.study).select_related("candidate__page").order_by("position")
    )
    kept = {"c1", "c2", "c3"}
    answers: dict[str, list[str]] = defaultdict(list)
    for a in sc.main(kept):
        answers[a.unit].append(a.value)
    majority = {}
    for p in preds:
        yes, no = answers[p.external_id].count("YES"), answers[p.external_id].count("NO")
        majority[p.external_id] = "YES" if yes > no else "NO" if no > yes else None
    assert {p["predicate"]: p["majority"] for p in cl["predicates"]} == majority
    for n, p in enumerate(preds):  # the design's majority, too
        assert majority[p.external_id] == CHECKLIST_PATTERNS[n % len(CHECKLIST_PATTERNS)][1]
    assert cl["k"] == 3 and cl["n_predicates_short"] == 0 and cl["n_predicates_over"] == 0
    assert cl["n_answers"] == 3 * 36

    def expected(selection: list[Predicate]) -> tuple[int, int, dict[str, list[float]]]:
        agree = n = 0
        by_brief: dict[str, list[float]] = defaultdict(list)
        for p in selection:
            if majority[p.external_id] is None or not p.automatic:
                continue
            auto = "YES" if p.automatic == "YES" else "NO"  # automatic UNCLEAR counts as NO
            hit = float(auto == majority[p.external_id])
            agree += int(hit)
            n += 1
            by_brief[p.candidate.page.external_id].append(hit)
        return agree, n, by_brief

    source = cl["sources"][0]
    assert source["source"] == "automatic"
    agree, n, by_brief = expected(preds)
    overall = source["overall"]
    assert (overall["n_agree"], overall["n_predicates"]) == (agree, n) and n > 10
    assert overall["value"] == pytest.approx(agree / n)
    assert overall["ci95"]["wilson"] == pytest.approx(
        list(proportion_confint(agree, n, method="wilson")), abs=1e-12
    )
    cp = [stats.beta.ppf(0.025, agree, n - agree + 1), stats.beta.ppf(0.975, agree + 1, n - agree)]
    assert overall["ci95"]["clopper_pearson"] == pytest.approx(cp, abs=1e-9)
    briefs = sorted({p.candidate.page.external_id for p in preds})
    assert overall["ci95"]["bootstrap"] == pytest.approx(
        bootstrap_mean_ci(by_brief, briefs, RESAMPLES, SEED), abs=1e-12
    )
    for entry in source["by_type"]:
        chosen = [p for p in preds if (p.question_type or None) == entry["question_type"]]
        n_agree, n_compared, _ = expected(chosen)
        assert (entry["n_agree"], entry["n_predicates"]) == (n_agree, n_compared)
    assert [e["question_type"] for e in source["by_type"]] == ["Content", "Layout", None]


def test_checklist_agreement_hygiene_and_screened_out(tmp_path: Path) -> None:
    sc = build_checklist(tmp_path)
    report = run_default(tmp_path, "cl")
    h = report["hygiene"]
    assert h["n_participants"] == 5  # c5's only assignment is voided
    assert h["n_screened_out"] == 2  # s1, s2 (two failed attempts, no block); not s3
    assert {p["participant"]: p["rule"] for p in h["excluded_participants"]} == {
        "c4": "too_fast_median",
        "c6": "comprehension",
    }
    assert h["n_attention_checks"] == 2 and h["n_attention_failed"] == 0
    assert h["kept_answers"] == 3 * 36
    # nominal α over c1–c3 (UNCLEAR missing) with the krippendorff package
    units = sorted({a.unit for a in sc.main({"c1", "c2", "c3"})})
    data = np.full((3, len(units)), np.nan)
    for a in sc.main({"c1", "c2", "c3"}):
        if a.value != "UNCLEAR":
            data[int(a.rater[1]) - 1, units.index(a.unit)] = 1.0 if a.value == "YES" else 0.0
    entry = report["agreement"]["entries"][0]
    assert entry["krippendorff_alpha"]["level"] == "nominal"
    assert entry["krippendorff_alpha"]["value"] == pytest.approx(
        krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"), abs=1e-9
    )
    assert entry["n_valid_answers"] == int(np.isfinite(data).sum())


# ---------------------------------------------------------------------------------------------
# rating
# ---------------------------------------------------------------------------------------------


def test_rating_paired_differences_t_interval_and_equivalence(tmp_path: Path) -> None:
    sc = build_rating(tmp_path)
    report = run_default(tmp_path, "rt")
    rating = report["rating"]
    assert (rating["system_a"], rating["system_b"], rating["margin"]) == ("alpha", "beta", 0.5)
    assert [d["dimension"] for d in rating["dimensions"]] == list(RATING_DIFFS)
    kept = sc.main({"q1", "q2"})
    for dim, diffs in RATING_DIFFS.items():
        per: dict[tuple[str, str], list[int]] = defaultdict(list)
        for a in kept:
            per[(a.brief, a.system)].append(a.value[dim])
        briefs = sorted({b for b, _ in per})
        d = np.array([np.mean(per[(b, "alpha")]) - np.mean(per[(b, "beta")]) for b in briefs])
        assert sorted(d) == pytest.approx(sorted(diffs))  # the simulation did what it meant
        mean, se = d.mean(), d.std(ddof=1) / math.sqrt(len(d))
        crit = stats.t.ppf(0.975, len(d) - 1)
        got = next(x for x in rating["dimensions"] if x["dimension"] == dim)
        assert got["mean_difference"] == pytest.approx(mean, abs=1e-12)
        assert got["ci95"]["t"] == pytest.approx([mean - crit * se, mean + crit * se], abs=1e-12)
        by_brief = {b: [float(x)] for b, x in zip(briefs, d, strict=True)}
        assert got["ci95"]["bootstrap"] == pytest.approx(
            bootstrap_mean_ci(by_brief, briefs, RESAMPLES, SEED), abs=1e-12
        )
        inside = bool(mean - crit * se >= -0.5 and mean + crit * se <= 0.5)
        assert got["equivalence"]["equivalent"] is inside
        assert got["n_briefs"] == 10
        # scipy's paired t test on the same per-brief means gives the same t statistic
        a_means = [np.mean(per[(b, "alpha")]) for b in briefs]
        b_means = [np.mean(per[(b, "beta")]) for b in briefs]
        assert stats.ttest_rel(a_means, b_means).statistic == pytest.approx(mean / se)
    verdicts = {d["dimension"]: d["equivalence"]["equivalent"] for d in rating["dimensions"]}
    assert verdicts == {"inside": True, "outside": False, "straddle": False}


def test_rating_system_choice_hygiene_and_agreement(tmp_path: Path) -> None:
    sc = build_rating(tmp_path)
    forward = run_default(tmp_path, "rt")
    backward = run_default(tmp_path, "rt", "--systems", "beta,alpha", name="back.json")
    for f, b in zip(forward["rating"]["dimensions"], backward["rating"]["dimensions"], strict=True):
        assert b["mean_difference"] == pytest.approx(-f["mean_difference"])
        assert b["ci95"]["t"] == pytest.approx([-f["ci95"]["t"][1], -f["ci95"]["t"][0]])
    h = forward["hygiene"]
    assert {p["participant"]: p["rule"] for p in h["excluded_participants"]} == {"q3": "attention"}
    assert h["n_attention_checks"] == 2 and h["n_attention_failed"] == 1
    assert h["n_answers"] == 20 + 1 + 20 + 20 and h["kept_answers"] == 41
    assert forward["rating"]["n_repeat_ratings_excluded"] == 3  # one repeated item × 3 dimensions
    # agreement per dimension: ordinal α over items with the krippendorff package
    kept = sc.main({"q1", "q2"})
    units = sorted({a.unit for a in kept})
    for entry in forward["agreement"]["entries"]:
        data = np.full((2, len(units)), np.nan)
        for a in kept:
            data[int(a.rater[1]) - 1, units.index(a.unit)] = a.value[entry["dimension"]]
        expected = krippendorff.alpha(
            reliability_data=data, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
        )
        assert entry["krippendorff_alpha"]["value"] == pytest.approx(expected, abs=1e-9)
        assert entry["hidden_repeat_agreement"] == {
            "agree": 1,
            "n": 1,
            "value": 1.0,
            "mean_abs_difference": 0.0,
            "within_one": 1.0,
        }


# ---------------------------------------------------------------------------------------------
# Command: determinism, bad input
# ---------------------------------------------------------------------------------------------


def test_command_defaults_and_same_seed_same_bytes(tmp_path: Path) -> None:
    sc = build_rating(tmp_path)
    first = run(tmp_path, "rt", "--bootstrap", "50", name="a.json")
    assert first["bootstrap"] == {"resamples": 50, "seed": sc.study.seed}
    run(tmp_path, "rt", "--bootstrap", "50", name="b.json")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    default = run(tmp_path, "rt", name="c.json")
    assert default["bootstrap"]["resamples"] == 2000
    assert set(default) == {"study", "kind", "title", "bootstrap", "hygiene", "agreement", "rating"}


def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    build_rating(tmp_path)
    import_kind_study("checklist", tmp_path, slug="fresh")
    Study.objects.create(slug="ref", title="Pairwise with reference")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"max_attention_failures": 1,\n oops}')
    unknown = tmp_path / "unknown.json"
    unknown.write_text('{"max_attention": 1}')
    out, html = tmp_path / "out.json", tmp_path / "out.html"
    cases = [
        (("nope",), r"no study with slug 'nope'"),
        (("ref",), r"kind 'pairwise_reference': use agreement_report"),
        (("fresh",), r"has no votes yet: schedule its blocks \(manage.py schedule_blocks fresh --blocks \d+ --block-size \d+"),
        (("rt", "--bootstrap", "0"), r"field 'bootstrap': expected an integer"),
        (("rt", "--seed", "-1"), r"field 'seed': expected a non-negative integer"),
        (("rt", "--systems", "alpha,zeta"), r"field 'systems': unknown system 'zeta'"),
        (("rt", "--systems", "alpha"), r"field 'systems': expected two different system ids"),
        (("rt", "--systems", "alpha,gamma"), r"no kept rating of system 'gamma'"),
        (("fresh", "--systems", "alpha,beta"), r"only a rating study compares two systems"),
        (("rt", "--rules", str(bad_json)), r"bad\.json:2: not valid JSON"),
        (("rt", "--rules", str(unknown)), r"unknown exclusion-rule setting 'max_attention'"),
        (("rt", "--rules", str(tmp_path / "missing.json")), r"missing\.json: cannot read the rules file"),
    ]
    for args, message in cases:
        with pytest.raises(CommandError, match=message) as err:
            extra = () if "--bootstrap" in args else ("--bootstrap", "20")
            call_command(
                "kind_report", *args, "--json", str(out), "--html", str(html), *extra, stdout=io.StringIO()
            )
        assert "\n" not in str(err.value)
        assert not out.exists() and not html.exists()
    bad_option = tmp_path / "share.json"
    bad_option.write_text('{"straightline_share": 2}')
    with pytest.raises(CommandError, match=r"straightline_share must be in \(0, 1\]"):
        call_command("kind_report", "rt", "--json", str(out), "--rules", str(bad_option))
    assert not list(tmp_path.glob("out*")) and not list(tmp_path.glob(".out*"))
    # An HTML path in a missing folder is refused before the JSON is written.
    with pytest.raises(CommandError, match=r"no-such-dir: the folder does not exist"):
        call_command(
            "kind_report",
            "rt",
            "--json",
            str(out),
            "--html",
            str(tmp_path / "no-such-dir" / "r.html"),
            "--bootstrap",
            "20",
        )
    assert not out.exists()


def test_study_options_with_a_bad_rule_are_refused_by_the_service(tmp_path: Path) -> None:
    sc = build_checklist(tmp_path)
    sc.study.options = {**sc.study.options, "exclusion_rules": {"min_median_response_ms": "fast"}}
    sc.study.save()
    from annotation.errors import ValidationFailed

    with pytest.raises(
        ValidationFailed, match=r"options \$\.exclusion_rules: min_median_response_ms: expected a number"
    ):
        kind_report_build(study=sc.study, resamples=10, seed=1)


# ---------------------------------------------------------------------------------------------
# HTML export
# ---------------------------------------------------------------------------------------------


def assert_self_contained(html: str, figures: int = 2) -> None:
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", html, re.I)
    assert "http://" not in html and "https://" not in html
    assert "<link" not in html.lower() and "@import" not in html
    sources = re.findall(r'<img[^>]*\ssrc="([^"]+)"', html)
    assert len(sources) == figures
    for src in sources:
        assert src.startswith("data:image/svg+xml;base64,")
        svg = base64.b64decode(src.split(",", 1)[1])
        assert ElementTree.fromstring(svg).tag.endswith("svg")
        assert b"<script" not in svg and b'xlink:href="http' not in svg


@pytest.mark.parametrize("builder", [build_pairwise, build_checklist, build_rating])
def test_html_export_is_self_contained_and_reproducible(tmp_path: Path, builder: Any) -> None:
    sc = builder(tmp_path)
    html_path = tmp_path / "r.html"
    report = run(tmp_path, sc.study.slug, "--bootstrap", "40", "--html", str(html_path))
    html = html_path.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>")
    assert_self_contained(html)
    assert f"Study report: {sc.study.title}" in html
    assert "Questionnaire hygiene" in html and "Attention checks failed" in html
    if sc.study.kind == "rating":
        d = report["rating"]["dimensions"][0]
        assert f"{d['mean_difference']:.3f}" in html and f"{d['ci95']['t'][0]:.3f}" in html
    elif sc.study.kind == "checklist":
        assert f"{report['checklist']['sources'][0]['overall']['value']:.3f}" in html
    else:
        assert f"{report['score_preference']['metrics'][0]['overall']['value']:.3f}" in html
    again = tmp_path / "again.html"
    run(tmp_path, sc.study.slug, "--bootstrap", "40", "--html", str(again), name="again.json")
    assert again.read_bytes() == html_path.read_bytes()


# ---------------------------------------------------------------------------------------------
# Researcher page, downloads, REST endpoint
# ---------------------------------------------------------------------------------------------


def test_page_for_the_researcher_with_downloads(
    client: Client, tmp_path: Path, researcher: Any, other_researcher: Any
) -> None:
    build_rating(tmp_path, researchers=(researcher,))
    client.force_login(researcher)
    response = client.get("/research/studies/rt/kind-report/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "1000 bootstrap resamples" in body
    # The figures are drawn on requests of their own, so the page shows its numbers at once.
    sources = page_figures(client, body, under="/research/studies/rt/kind-report/figures/", count=2)
    client.force_login(other_researcher)
    assert client.get(sources[0]).status_code == 404
    client.force_login(researcher)
    assert (
        "/research/studies/rt/kind-report.json?" in body and "/research/studies/rt/kind-report.html?" in body
    )
    response = client.get("/research/studies/rt/kind-report/?bootstrap=30&seed=4&systems=beta,alpha")
    assert response.status_code == 200 and "30 bootstrap resamples, seed 4" in response.content.decode()
    assert "<code>beta</code> − <code>alpha</code>" in response.content.decode()
    response = client.get("/research/studies/rt/kind-report.json?bootstrap=30&seed=4&systems=beta,alpha")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="rt-kind-report.json"'
    assert json.loads(response.content) == kind_report_build(
        study=Study.objects.get(slug="rt"), resamples=30, seed=4, systems="beta,alpha"
    )
    response = client.get("/research/studies/rt/kind-report.html?bootstrap=30&seed=4")
    assert response.status_code == 200
    assert_self_contained(response.content.decode())
    response = client.get("/research/studies/rt/kind-report/?systems=alpha,zeta")
    assert response.status_code == 400 and "unknown system &#x27;zeta&#x27;" in response.content.decode()
    assert client.get("/research/studies/rt/kind-report.json?bootstrap=lots").status_code == 400


def test_page_empty_state_and_other_kinds(client: Client, tmp_path: Path, researcher: Any) -> None:
    study = import_kind_study("checklist", tmp_path, slug="fresh", researchers=(researcher,))
    ref = Study.objects.create(slug="ref", title="Reference study")
    ref.researchers.add(researcher)
    client.force_login(researcher)
    response = client.get("/research/studies/fresh/kind-report/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "No votes yet." in body and f"schedule_blocks {study.slug} --blocks " in body
    suggested = unescape(body.split("schedule its blocks (", 1)[1].split(")", 1)[0])
    out = io.StringIO()
    call_command(*shlex.split(suggested)[1:], stdout=out)  # issue 40: the suggestion runs for this study
    assert "left unscheduled" in out.getvalue()
    assert "data:image/svg+xml" not in body and "kind-report.json" not in body
    response = client.get("/research/studies/ref/kind-report/")
    assert response.status_code == 400 and "use agreement_report" in response.content.decode()


def test_page_and_downloads_need_a_researcher_of_the_study(
    client: Client, tmp_path: Path, researcher: Any, other_researcher: Any, rater_user: Any
) -> None:
    build_checklist(tmp_path, researchers=(researcher,))
    urls = [
        "/research/studies/cl/kind-report/",
        "/research/studies/cl/kind-report.json",
        "/research/studies/cl/kind-report.html",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(rater_user)
    for url in urls:
        assert client.get(url).status_code == 403
    client.force_login(other_researcher)
    for url in urls:
        assert client.get(url).status_code == 404
    assert client.post("/research/studies/cl/kind-report/").status_code in (403, 405)


def test_api_returns_the_report(
    client: Client, tmp_path: Path, researcher: Any, other_researcher: Any, rater_user: Any
) -> None:
    sc = build_checklist(tmp_path, researchers=(researcher,))
    url = "/api/studies/cl/kind-report/"
    assert client.get(url + "?bootstrap=5").status_code in (401, 403)
    client.force_login(rater_user)
    assert client.get(url + "?bootstrap=5").status_code == 403
    client.force_login(other_researcher)
    assert client.get(url + "?bootstrap=5").status_code == 404
    client.force_login(researcher)
    response = client.get(url + "?bootstrap=40&seed=9")
    assert response.status_code == 200
    assert response.json() == kind_report_build(study=sc.study, resamples=40, seed=9)
    response = client.get(url + "?bootstrap=0")
    assert response.status_code == 400 and "field 'bootstrap'" in response.json()["detail"]
    response = client.get(url + "?bootstrap=5&systems=alpha,beta")
    assert response.status_code == 400 and "only a rating study" in response.json()["detail"]
    assert client.get(url + "?bootstrap=20").json()["bootstrap"]["seed"] == sc.study.seed


def test_raters_screened_out_without_votes_do_not_make_an_empty_study_report(tmp_path: Path) -> None:
    study = import_kind_study("rating", tmp_path, slug="only-screened")
    Rater.objects.create(study=study, external_id="s1", comprehension_attempts=2, comprehension_passed=False)
    with pytest.raises(CommandError, match="has no votes yet"):
        call_command("kind_report", "only-screened", "--json", str(tmp_path / "x.json"), "--bootstrap", "5")
    assert not (tmp_path / "x.json").exists()
