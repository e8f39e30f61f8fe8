"""Issue 30 item 4: gold trials for ``pairwise_reference`` — scheduling rate and counterbalance,
the degraded images, blinding, exclusion from data, the ``gold`` rule, and the reports applying
a study's saved exclusion rules by default (``--no-rules`` for the raw figures)."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from PIL import Image

from annotation.models import (
    GOLD_EXPECTED,
    Assignment,
    AssignmentState,
    Candidate,
    Page,
    StoredImage,
    Study,
    Trial,
    Vote,
)
from annotation.selectors.progress import rater_quality
from annotation.selectors.votes import gold_votes_frame, votes_frame
from annotation.services.gold import degraded_pixels
from annotation.services.scheduling import assignment_plan_copy, blocks_schedule, schedule_rows
from tests.annotation.factories import make_rated_study
from tests.annotation.rater_factories import make_rater_study
from tests.annotation.test_blinding import _assert_blind, _secrets
from tests.calibration.cal_factories import make_calibration_study
from tests.calibration.test_agreement_report import agreement_body

pytestmark = pytest.mark.django_db


def _png(stored: StoredImage) -> Image.Image:
    with Image.open(Path(settings.MEDIA_ROOT) / stored.file.name) as image:
        image.load()
        assert image.format == "PNG"
        return image.copy()


def test_schedule_places_gold_at_the_rate_counterbalanced_with_degraded_copies_of_the_reference() -> None:
    rs = make_rater_study(pages=6)
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=3, min_gap=2, raters=[4, 4], seed=5, gold=4)
    rs.study.refresh_from_db()
    assert rs.study.options["gold_trials"] == 4
    sides: Counter[bool] = Counter()
    for a in Assignment.objects.filter(block__study=rs.study):
        trials = list(a.trials.order_by("position"))
        assert [t.position for t in trials] == list(range(1, 8 + 3 + 4 + 1))
        gold = [t for t in trials if t.attention_expected == GOLD_EXPECTED]
        assert len(gold) == 4 and trials[0] not in gold and all(t.gold_image_id for t in gold)
        assert sum(t.swapped for t in gold) == 2  # the identical side alternates within an assignment
        sides.update(t.swapped for t in gold)
        for t in trials:
            if t.is_repeat:  # repeats still point at their original's comparison and orientation
                assert (t.repeat_of.comparison_id, t.repeat_of.swapped) == (t.comparison_id, t.swapped)
        for t in gold:
            ref = t.comparison.page.image
            real = {(c.image.width, c.image.height) for c in t.comparison.page.candidates.filter(image__isnull=False)}
            for shown in (t.gold_match_image, t.gold_image):
                assert (shown.width, shown.height) in real  # a real candidate's size, never the reference's
                assert re.fullmatch(r"images/[0-9a-f]{2}/[0-9a-f]{64}\.png", shown.file.name)  # opaque key
                pixels = _png(shown)
                assert pixels.mode == "RGB" and pixels.size == (shown.width, shown.height)
            copy, degraded = _png(t.gold_match_image), _png(t.gold_image)
            reference = _png(t.comparison.page.neutralized_image or ref).convert("RGB")
            top = (0, 0, ref.width, min(ref.height, copy.height))
            assert copy.crop(top).tobytes() == reference.crop(top).tobytes()  # the reference, fitted
            assert (degraded.width, degraded.height) != (copy.width, copy.height) or len(real) == 1
            assert degraded.tobytes() != copy.tobytes()
    assert sides == {True: 16, False: 16}
    # The schedule export marks them; a reopened slot keeps them.
    assert sum(1 for r in schedule_rows(rs.study) if r["attention"] == GOLD_EXPECTED) == 32
    source = Assignment.objects.filter(block__study=rs.study).first()
    Assignment.objects.filter(pk=source.pk).update(state=AssignmentState.VOIDED)
    copy = assignment_plan_copy(source=source)
    assert copy.trials.filter(attention_expected=GOLD_EXPECTED, gold_image__isnull=False).count() == 4


def test_gold_candidate_sizes_cannot_be_told_from_real_candidate_sizes() -> None:
    """Over a study whose candidates differ in height, the sizes shown in gold trials are real
    candidates' sizes with the frequencies of real trials (chi-squared test of homogeneity), and
    no gold trial shows the reference's size.

    A page's gold images are made once and shown in all its gold trials, so the independent draws
    are the pages' gold pairs, not the trials: the test counts each page's pair once. The draw is
    seeded by the page's row, which differs between databases, so the level is 0.001 (a correct
    draw fails one run in a thousand) rather than 0.05 (one in twenty)."""
    from scipy.stats import chi2_contingency

    rs = make_rater_study(pages=24, failed_render=False)
    blocks_schedule(study=rs.study, blocks=2, block_size=30, repeats=0, min_gap=2, raters=[3, 3], seed=7, gold=8)
    real: Counter[tuple[int, int]] = Counter()
    gold: Counter[tuple[int, int]] = Counter()
    gold_pairs: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}
    reference_sized = 0
    trials = Trial.objects.filter(assignment__block__study=rs.study).select_related(
        "comparison__page__image", "comparison__candidate_a__image", "comparison__candidate_b__image",
        "gold_image", "gold_match_image")
    for t in trials:
        page = t.comparison.page.image
        if t.attention_expected == GOLD_EXPECTED:
            shown = [t.gold_match_image, t.gold_image]
            gold.update((i.width, i.height) for i in shown)
            pair = ((shown[0].width, shown[0].height), (shown[1].width, shown[1].height))
            assert gold_pairs.setdefault(t.comparison.page_id, pair) == pair  # one pair per page
            reference_sized += all((i.width, i.height) == (page.width, page.height) for i in shown)
        else:
            real.update((c.image.width, c.image.height) for c in (t.comparison.candidate_a, t.comparison.candidate_b))
    assert sum(gold.values()) == 2 * 8 * 6 and reference_sized == 0
    assert set(gold) <= set(real) and len(gold) > 1
    drawn = Counter(size for pair in gold_pairs.values() for size in pair)
    assert all(a != b for a, b in gold_pairs.values())  # two distinct real candidates' sizes
    sizes = sorted(real)
    _, p_value, _, _ = chi2_contingency([[real[k] for k in sizes], [drawn[k] for k in sizes]])
    assert p_value > 0.001, (real, drawn)


def test_gold_byte_sizes_cannot_be_told_from_real_pairs() -> None:
    """Issue 37 item 3: the degraded copy's PNG was about a quarter of the copy's, so the two
    candidates' ``Content-Length`` differed 4.1–4.7× in every gold trial against at most 1.43× in
    real trials. Over a study of many pages, the byte ratio of each page's gold pair (counted once,
    as in the size test above) is compared with the real trials' pairs: the largest is within the
    real spread, and the distributions cannot be told apart (Mann–Whitney U at level 0.001)."""
    from scipy.stats import mannwhitneyu

    rs = make_rater_study(pages=30, failed_render=False, image_size=(240, 480))
    blocks_schedule(study=rs.study, blocks=2, block_size=40, repeats=0, min_gap=2, raters=[3, 3], seed=11, gold=10)
    trials = Trial.objects.filter(assignment__block__study=rs.study).select_related(
        "comparison__candidate_a__neutralized_image", "comparison__candidate_b__neutralized_image", "gold_image",
        "gold_match_image")
    real: list[float] = []
    gold: dict[int, float] = {}
    for t in trials:
        if t.attention_expected == GOLD_EXPECTED:
            a, b = t.gold_match_image.size_bytes, t.gold_image.size_bytes
            gold[t.comparison.page_id] = max(a, b) / min(a, b)
            assert t.gold_image.file.open("rb").read()[12:16] == b"IHDR"  # no padding chunk in front
        else:
            # The candidates as shown: the study neutralizes media.
            a = t.comparison.candidate_a.neutralized_image.size_bytes
            b = t.comparison.candidate_b.neutralized_image.size_bytes
            real.append(max(a, b) / min(a, b))
    assert len(gold) >= 10 and len(real) > 100
    assert max(gold.values()) <= max(real) * 1.05, (sorted(gold.values()), max(real))
    assert mannwhitneyu(list(gold.values()), real).pvalue > 0.001


def test_gold_panes_are_made_from_the_panes_as_shown() -> None:
    """Issue 45: in a study that neutralizes media, a gold trial's copy shows the reference's media
    as a grey box (as the reference pane does), and its byte ratio is that of two real candidates
    as shown, their neutralized variants (not of the images under them)."""
    from annotation.images import NEUTRAL_FILL

    rs = make_rater_study(pages=4, failed_render=False, image_size=(240, 480))
    blocks_schedule(study=rs.study, blocks=1, block_size=12, repeats=0, min_gap=2, raters=[2], seed=3, gold=4)
    gold = Trial.objects.filter(assignment__block__study=rs.study, attention_expected=GOLD_EXPECTED).select_related(
        "gold_image", "gold_match_image", "comparison__page")
    assert gold.count() >= 4
    for t in gold:
        copy = _png(t.gold_match_image)
        # The photo region [600, 725, 934, 950] of the page, at the copy's width: the grey box.
        x = round(0.75 * copy.width)
        y = round(0.80 * 480 * copy.width / 240)
        assert copy.getpixel((x, y)) == NEUTRAL_FILL
        shown = [
            (c.neutralized_image.width, c.neutralized_image.height, c.neutralized_image.size_bytes)
            for c in t.comparison.page.candidates.select_related("neutralized_image")
        ]
        ratio = t.gold_image.size_bytes / t.gold_match_image.size_bytes
        sizes = {(t.gold_match_image.width, t.gold_match_image.height), (t.gold_image.width, t.gold_image.height)}
        pairs = [b[2] / a[2] for a in shown for b in shown if a is not b and {a[:2], b[:2]} == sizes]
        assert any(abs(ratio - r) <= 0.03 * r for r in pairs), (ratio, pairs)


def test_the_degraded_copy_reaches_a_byte_size_and_stays_degraded() -> None:
    from annotation.images import encode_png
    from annotation.services.gold import degraded_at_byte_size

    image = Image.new("RGB", (240, 480), "white")
    for y in range(0, 480, 12):
        image.paste((20, 20, 20), (10, y, 10 + (y * 37) % 220, y + 4))
    sharp = len(encode_png(image))
    for target in (sharp, int(sharp * 1.3), int(sharp * 0.8)):
        out = degraded_at_byte_size(image, seed=3, target=target)
        assert abs(len(encode_png(out)) - target) <= 0.02 * target
        diff = sum(abs(a - b) for a, b in zip(image.convert("L").tobytes(), out.convert("L").tobytes(), strict=True))
        assert diff / (240 * 480) > 20
    assert encode_png(degraded_at_byte_size(image, seed=3, target=sharp)) == encode_png(
        degraded_at_byte_size(image, seed=3, target=sharp))  # the same study gets the same bytes


def test_fitted_keeps_the_reference_on_top_and_pads_with_white() -> None:
    from annotation.services.gold import fitted

    image = Image.new("RGB", (100, 200), (10, 20, 30))
    taller, shorter, wider = fitted(image, (100, 260)), fitted(image, (100, 150)), fitted(image, (50, 120))
    assert taller.size == (100, 260) and taller.getpixel((0, 199)) == (10, 20, 30)
    assert taller.getpixel((99, 259)) == (255, 255, 255)
    assert shorter.size == (100, 150) and shorter.getcolors() == [(15000, (10, 20, 30))]
    assert wider.size == (50, 120) and wider.getpixel((25, 50)) == (10, 20, 30) and wider.getpixel((25, 110)) == (255, 255, 255)


def test_degraded_copy_is_visibly_different_and_the_same_size() -> None:
    image = Image.new("RGB", (120, 240), "white")
    for y in range(0, 240, 12):
        image.paste((20, 20, 20), (10, y, 110, y + 4))
    out = degraded_pixels(image, seed=1)
    assert out.size == image.size and out.mode == "RGB"
    diff = sum(abs(a - b) for a, b in zip(image.convert("L").tobytes(), out.convert("L").tobytes(), strict=True))
    assert diff / (120 * 240) > 20  # mean grey-level change per pixel


def test_gold_out_of_range_is_refused_naming_the_field() -> None:
    from annotation.errors import ValidationFailed

    rs = make_rater_study(pages=6)
    with pytest.raises(ValidationFailed, match="gold"):
        blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=0, min_gap=2, raters=[1, 1], seed=5, gold=9)


def test_a_gold_trial_is_indistinguishable_from_a_data_trial_and_never_data() -> None:
    rs = make_rater_study(pages=6)
    # Every page and candidate with blocks of its own (issue 45): a gold trial's panes carry its
    # comparison's blocks, as a data trial of that pair does.
    for n, page in enumerate(Page.objects.filter(study=rs.study)):
        page.blocks = [{"type": "title", "bbox_1000": [0, 10 + n, 500, 20 + n]}]
        page.save(update_fields=["blocks"])
    for n, candidate in enumerate(Candidate.objects.filter(page__study=rs.study)):
        candidate.blocks = [{"type": "title", "bbox_1000": [0, 30 + n, 500, 40 + n]}, {"type": "text", "bbox_1000": [0, 50, 900, 90]}]
        candidate.save(update_fields=["blocks"])
    blocks_schedule(study=rs.study, blocks=2, block_size=8, repeats=3, min_gap=2, raters=[1, 1], seed=5, gold=2)
    secrets = _secrets(rs)
    client = Client()
    seen = []

    def get(url: str, **kw):  # type: ignore[no-untyped-def]
        r = client.get(url, **kw)
        seen.append((url, r))
        return r

    r = get(f"/s/{rs.study.link_token}/?participant=gold-1")
    html = get(r["Location"]).content.decode()
    pages: dict[str, str] = {}
    sizes: dict[str, dict[str, tuple[int, int, str, str]]] = {}
    while m := re.search(r'action="/t/([^/"]+)/vote/"', html):
        token = m.group(1)
        pages[token] = html
        sizes[token] = {}
        for slot in ("ref", "left", "right"):
            response = client.get(f"/t/{token}/{slot}.png")
            assert response.status_code == 200
            body = b"".join(response.streaming_content)
            with Image.open(io.BytesIO(body)) as image:
                sizes[token][slot] = (*image.size, image.format or "", response["Content-Type"])
            get(f"/t/{token}/{slot}.png")  # a fresh copy for the blinding search
        axes = re.findall(r'name="axis:([A-Z_]+)" value="0"', html)
        key = re.search(r'name="idempotency_key" value="([^"]+)"', html).group(1)
        trial = Trial.objects.get(token=token)
        # Answer every gold trial wrongly: the degraded side, as displayed.
        verdict = ("A" if trial.swapped else "B") if trial.attention_expected == GOLD_EXPECTED else "A"
        r = client.post(f"/t/{token}/vote/", {"verdict": verdict, "confidence": "3", "idempotency_key": key,
                                              **{f"axis:{a}": "0" for a in axes}}, HTTP_HX_REQUEST="true")
        html = r.content.decode()
    assert "Thank you" in html and len(pages) == 8 + 3 + 2
    _assert_blind(seen, secrets)
    gold = list(Trial.objects.filter(assignment__rater__external_id="gold-1", attention_expected=GOLD_EXPECTED))
    assert len(gold) == 2

    def masked(t: Trial) -> str:
        text = pages[t.token].replace(t.token, "TOKEN")
        for pattern, repl in (
            (r'name="idempotency_key" value="[^"]+"', 'name="idempotency_key" value="K"'),
            (r'name="csrfmiddlewaretoken" value="[^"]+"', ""), (r'"X-CSRFToken": "[^"]+"', ""),
            (r'nonce="[^"]+"', ""), (r"\d+ of \d+", "N of M"), (r'value="\d+"></progress>', 'value="N"></progress>'),
            (r'\s*<span class="time-left[^<]*</span>', ""), (r'<details class="instructions" data-instructions( open)?>', ""),
            (r'data-blocks="[^"]*"', "data-blocks"),  # compared below, whichever side shows them
        ):
            text = re.sub(pattern, repl, text)
        return text

    for g in gold:
        main = Trial.objects.get(assignment=g.assignment, comparison=g.comparison, is_repeat=False, attention_expected="")
        assert masked(g) == masked(main)  # same page, same markup: only the opaque tokens differ
        shown_blocks = [sorted(re.findall(r'data-blocks="([^"]*)"', pages[t.token])) for t in (g, main)]
        assert shown_blocks[0] == shown_blocks[1] and len(shown_blocks[0]) == 5  # ref (and its flicker copies), A, B
        ref, left, right = (sizes[g.token][s] for s in ("ref", "left", "right"))
        # Same format and content type as the reference; each candidate has a real candidate's size.
        assert left[2:] == right[2:] == ref[2:] == ("PNG", "image/png")
        real = {(c.image.width, c.image.height) for c in g.comparison.page.candidates.filter(image__isnull=False)}
        assert {left[:2], right[:2]} <= real and left[:2] != right[:2]
    # Gold answers are never data: not in the votes every analysis reads, nor in the export.
    frame = votes_frame(study=rs.study)
    assert len(frame) == 8 + 3 and set(frame["position"]).isdisjoint({g.position for g in gold})
    g = gold_votes_frame(study=rs.study)
    assert len(g) == 2 and not g["passed"].any()
    quality = [q for q in rater_quality(rs.study) if q.assignment.rater and q.assignment.rater.external_id == "gold-1"]
    assert quality[0].gold_trials == 2 and quality[0].gold_passed == 0
    assert any("gold" in f for f in quality[0].flags) and not any("attention" in f for f in quality[0].flags)


def _add_gold(study: Study, *, wrong: set[str]) -> None:
    """Append two answered gold trials to every assignment (raters in ``wrong`` answer them wrongly)."""
    stored = StoredImage.objects.create(sha256="0" * 64, file="images/00/" + "0" * 64 + ".png", width=1, height=1,
                                        size_bytes=1, mode="RGB")
    for a in Assignment.objects.filter(block__study=study, rater__isnull=False).select_related("rater"):
        last = a.trials.order_by("-position").first()
        for g in range(2):
            trial = Trial.objects.create(assignment=a, position=last.position + 1 + g, comparison=last.comparison,
                                         swapped=g == 1, attention_expected=GOLD_EXPECTED, gold_image=stored)
            label = "B" if a.rater.external_id in wrong else "A"  # canonical A is the identical side
            Vote.objects.create(trial=trial, label=label, confidence=3, response_ms=4000)


def test_reports_apply_saved_rules_by_default_and_no_rules_gives_raw_figures(tmp_path: Path) -> None:
    study = make_rated_study("gold-rated", tmp_dir=tmp_path, seed=11)
    raw_path = tmp_path / "before.json"
    call_command("agreement_report", study.slug, "--json", str(raw_path), "--bootstrap", "20", stdout=io.StringIO())
    before = json.loads(raw_path.read_text())
    assert "exclusions" not in before  # no saved rules, no gold: as before
    junk = str(votes_frame(study=study)["rater"].iloc[0])
    _add_gold(study, wrong={junk})
    Study.objects.filter(pk=study.pk).update(options={**study.options, "gold_trials": 2})
    out = tmp_path / "default.json"
    stdout = io.StringIO()
    html = tmp_path / "default.html"
    call_command("agreement_report", study.slug, "--json", str(out), "--html", str(html), "--bootstrap", "20",
                 stdout=stdout)
    report = json.loads(out.read_text())
    page = html.read_text()
    assert "saved exclusion rules were applied" in page and f"<td>{junk}</td><td>gold</td>" in page
    ex = report["exclusions"]
    assert ex["applied_by_default"] is True
    assert ex["excluded_raters"] == [{"participant": junk, "rule": "gold", "rules": ["gold"]}]
    assert ex["n_kept_raters"] == ex["n_raters"] - 1
    assert f"excluded: {junk} (gold)" in stdout.getvalue() and "saved exclusion rules" in stdout.getvalue()
    assert report["n_main_annotations"] < before["n_main_annotations"]
    raw = tmp_path / "raw.json"
    call_command("agreement_report", study.slug, "--json", str(raw), "--bootstrap", "20", "--no-rules",
                 stdout=io.StringIO())
    raw_report = json.loads(raw.read_text())
    assert "exclusions" not in raw_report
    # Gold trials never enter the human reference: the raw figures equal those before gold existed.
    assert {k: raw_report[k] for k in ("n_main_annotations", "n_valid_annotations", "n_comparisons")} == {
        k: before[k] for k in ("n_main_annotations", "n_valid_annotations", "n_comparisons")
    }
    # Saved rules that switch the gold rule off are what the default applies.
    Study.objects.filter(pk=study.pk).update(options={"gold_trials": 2, "exclusion_rules": {
        "max_gold_failure_share": None, "min_median_response_ms": None, "straightline_share": None}})
    call_command("agreement_report", study.slug, "--json", str(out), "--bootstrap", "20", stdout=io.StringIO())
    assert json.loads(out.read_text())["exclusions"]["excluded_raters"] == []


def test_calibrate_excludes_a_rater_who_fails_gold_by_default(tmp_path: Path) -> None:
    cal = make_calibration_study("gold-cal")
    junk = str(votes_frame(study=cal.study)["rater"].iloc[0])
    _add_gold(cal.study, wrong={junk})
    cal.study.options = {**(cal.study.options or {}), "exclusion_rules": {"min_median_response_ms": None}}
    cal.study.save(update_fields=["options"])
    out = tmp_path / "cal.json"
    stdout = io.StringIO()
    call_command("calibrate", cal.study.slug, "--json", str(out), "--html", str(tmp_path / "cal.html"),
                 "--bootstrap", "50", stdout=stdout)
    assert f"<td>{junk}</td><td>gold</td>" in (tmp_path / "cal.html").read_text()
    ex = json.loads(out.read_text())["exclusions"]
    assert [r["participant"] for r in ex["excluded_raters"]] == [junk] and ex["excluded_raters"][0]["rule"] == "gold"
    assert f"{junk} (gold)" in stdout.getvalue()
    raw = tmp_path / "raw.json"
    call_command("calibrate", cal.study.slug, "--json", str(raw), "--bootstrap", "50", "--no-rules",
                 stdout=io.StringIO())
    assert "exclusions" not in json.loads(raw.read_text())
    from django.core.management import CommandError

    (tmp_path / "r.json").write_text("{}")
    with pytest.raises(CommandError, match="--no-rules"):
        call_command("calibrate", cal.study.slug, "--json", str(raw), "--rules", str(tmp_path / "r.json"),
                     "--no-rules", stdout=io.StringIO())


def test_calibrate_says_when_the_saved_rules_excluded_every_rater(tmp_path: Path) -> None:
    from django.core.management import CommandError

    cal = make_calibration_study("gold-all-out")
    raters = set(votes_frame(study=cal.study)["rater"].astype(str))
    _add_gold(cal.study, wrong=raters)
    cal.study.options = {**(cal.study.options or {}), "gold_trials": 2}
    cal.study.save(update_fields=["options"])
    # Not "no comparison has a valid human vote" alone: the votes exist, the rules removed them.
    with pytest.raises(CommandError, match=rf"no comparison has a valid human vote \(the study's saved exclusion "
                       rf"rules \(default; --no-rules for the raw figures\) kept 0 of {len(raters)} raters"):
        call_command("calibrate", cal.study.slug, "--json", str(tmp_path / "c.json"), "--bootstrap", "20",
                     stdout=io.StringIO())
    call_command("calibrate", cal.study.slug, "--json", str(tmp_path / "c.json"), "--bootstrap", "20",
                 "--no-rules", stdout=io.StringIO())


def test_the_agreement_page_applies_the_saved_rules_and_says_so(client: Client, researcher, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    study = make_rated_study("gold-page", researchers=[researcher], tmp_dir=tmp_path, seed=11)
    junk = str(votes_frame(study=study)["rater"].iloc[0])
    _add_gold(study, wrong={junk})
    client.force_login(researcher)
    raw = agreement_body(client, client.get("/studies/gold-page/agreement/?bootstrap=20").content.decode())
    assert 'id="exclusions"' not in raw  # no saved rules yet: the raw figures, as before
    Study.objects.filter(pk=study.pk).update(options={**study.options, "exclusion_rules": {}})
    page = agreement_body(client, client.get("/studies/gold-page/agreement/?bootstrap=20").content.decode())
    assert 'id="exclusions"' in page and "saved exclusion rules were applied" in page
    assert f"<td>{junk}</td><td>gold</td>" in page


def test_schedule_blocks_command_takes_gold() -> None:
    rs = make_rater_study(pages=6)
    out = io.StringIO()
    call_command("schedule_blocks", rs.study.slug, "--blocks", "2", "--block-size", "8", "--repeats", "3",
                 "--min-gap", "2", "--raters", "2,2", "--gold", "2", stdout=out)
    assert "8 comparisons, 2 planned assignments, 13 trials each (2 gold)" in out.getvalue()
    assert Trial.objects.filter(assignment__block__study=rs.study, attention_expected=GOLD_EXPECTED).count() == 8


def test_gold_answers_csv_from_the_command_the_api_and_the_study_page(client: Client, researcher, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The votes CSV keeps its protocol columns without gold answers; ``export_votes --gold`` and
    ``GET /api/studies/SLUG/votes/gold/`` give one row per answered gold trial."""
    import csv

    study = make_rated_study("gold-csv", researchers=[researcher], tmp_dir=tmp_path, seed=11)
    junk = str(votes_frame(study=study)["rater"].iloc[0])
    _add_gold(study, wrong={junk})
    Study.objects.filter(pk=study.pk).update(options={**study.options, "gold_trials": 2})
    votes, gold = tmp_path / "votes.csv", tmp_path / "gold.csv"
    out = io.StringIO()
    call_command("export_votes", study.slug, str(votes), "--gold", str(gold), stdout=out)
    n_gold = Trial.objects.filter(assignment__block__study=study, attention_expected=GOLD_EXPECTED).count()
    assert f"wrote {n_gold} gold answers" in out.getvalue()
    with votes.open(newline="") as fh:
        header = next(csv.reader(fh))
        assert header[:13] == ["comparison", "page", "system_a", "system_b", "block", "rater", "position", "swapped",
                               "repeat", "label", "confidence", "rationale", "response_ms"]
        assert sum(1 for _ in fh) == len(votes_frame(study=study))  # no gold rows
    with gold.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == ["rater", "block", "position", "gold", "page", "comparison", "swapped", "expected", "label",
                             "correct", "response_ms"]
    assert len(rows) == n_gold and {r["expected"] for r in rows} == {"A"}
    assert {r["correct"] for r in rows if r["rater"] == junk} == {"0"} and {r["label"] for r in rows if r["rater"] == junk} == {"B"}
    assert {r["correct"] for r in rows if r["rater"] != junk} == {"1"}
    client.force_login(researcher)
    response = client.get(f"/api/studies/{study.slug}/votes/gold/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert response.content == gold.read_bytes()
    page = client.get(f"/studies/{study.slug}/").content.decode()
    assert f'href="/api/studies/{study.slug}/votes/gold/"' in page
    client.logout()
    assert client.get(f"/api/studies/{study.slug}/votes/gold/").status_code in (401, 403)


def _gold_bundle(examples_dir: Path, target: Path, gold: list[dict[str, str]]) -> Path:
    from tests.annotation.test_bundles import copy_bundle, edit_doc

    bundle = copy_bundle(examples_dir, target)
    Image.new("RGB", (64, 90), (120, 120, 120)).save(bundle / "images" / "gold-blurred.png")
    return edit_doc(bundle, lambda doc: doc.__setitem__("gold", gold))


SUPPLIED = [
    {"id": "g1", "page": "e00", "a": "images/e00-alpha.png", "b": "images/gold-blurred.png", "answer": "A"},
    {"id": "g2", "page": "e01", "a": "images/gold-blurred.png", "b": "images/e01-beta.png", "answer": "B"},
]


def test_gold_supplied_in_the_bundle_is_imported_scheduled_and_exported_again(tmp_path: Path, examples_dir: Path) -> None:
    from annotation.models import SuppliedGold
    from annotation.services.bundles.exporting import study_export_bundle
    from annotation.services.bundles.importing import study_import_bundle

    study = study_import_bundle(path=_gold_bundle(examples_dir, tmp_path / "b", SUPPLIED))
    rows = list(SuppliedGold.objects.filter(study=study).select_related("page", "image_a", "image_b", "original_b"))
    assert [(g.external_id, g.page.external_id, g.answer) for g in rows] == [("g1", "e00", "A"), ("g2", "e01", "B")]
    page_width = rows[0].page.image.width
    assert rows[0].image_a.width == rows[0].image_b.width == page_width  # through the display pass
    assert (rows[0].original_b.width, rows[0].original_b.height) == (64, 90)
    exported = study_export_bundle(study=study, path=tmp_path / "out")
    doc = json.loads((exported / "study.json").read_text())
    assert [(g["id"], g["page"], g["answer"]) for g in doc["gold"]] == [("g1", "e00", "A"), ("g2", "e01", "B")]
    assert all((exported / g[side]).is_file() for g in doc["gold"] for side in ("a", "b"))
    with Image.open(exported / doc["gold"][0]["b"]) as image:
        assert image.size == (64, 90)  # the original, as uploaded
    doc["slug"] = "again"
    (exported / "study.json").write_text(json.dumps(doc))
    again = study_import_bundle(path=exported)
    again_doc = json.loads((study_export_bundle(study=again, path=tmp_path / "out2") / "study.json").read_text())
    assert again_doc["gold"] == doc["gold"]

    n = study.comparisons.filter(set="human").count()
    blocks_schedule(study=study, blocks=1, block_size=n, repeats=0, min_gap=1, raters=[4], seed=3, gold=2)
    gold = list(Trial.objects.filter(assignment__block__study=study, attention_expected=GOLD_EXPECTED)
                .select_related("supplied_gold", "comparison__page"))
    assert len(gold) == 8 and all(t.supplied_gold is not None for t in gold)
    for t in gold:
        entry = t.supplied_gold
        assert t.comparison.page_id == entry.page_id
        right, other = (entry.image_a_id, entry.image_b_id) if entry.answer == "A" else (entry.image_b_id, entry.image_a_id)
        assert (t.gold_match_image_id, t.gold_image_id) == (right, other)  # the right image is canonical A
    assert sum(t.swapped for t in gold) == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"page": "nope"}, r"study.json \$.gold\[1\].page: unknown page 'nope'"),
        ({"answer": "TIE"}, r"study.json \$.gold\[1\].answer: 'TIE' is not one of A, B"),
        ({"id": "g1"}, r"study.json \$.gold\[1\].id: duplicate gold id 'g1' \(first at \$.gold\[0\]\)"),
        ({"b": "images/missing.png"}, r"images/missing.png"),
        ({"b": "../x.png"}, r"study.json \$.gold\[1\].b: image path"),
    ],
)
def test_bad_gold_entries_are_refused_in_one_line_and_nothing_is_written(
    tmp_path: Path, examples_dir: Path, change: dict[str, str], message: str
) -> None:
    from annotation.errors import ValidationFailed
    from annotation.services.bundles.importing import study_import_bundle

    bundle = _gold_bundle(examples_dir, tmp_path / "b", [SUPPLIED[0], {**SUPPLIED[1], **change}])
    with pytest.raises(ValidationFailed, match=message) as caught:
        study_import_bundle(path=bundle)
    assert "\n" not in str(caught.value)
    assert not Study.objects.exists() and not StoredImage.objects.exists()


@pytest.mark.parametrize("gold", [2, 3, 4, 5])
@pytest.mark.parametrize("side", ["A", "B"])
def test_a_rater_who_always_clicks_one_side_is_caught_with_any_number_of_gold_trials(gold: int, side: str) -> None:
    """docs/protocol.md "Gold trials: the exclusion test": each rater's gold trials put the identical
    side left and right in turn (within one of half), so an always-left (always-right) rater fails
    about half of them, which the gold rule cannot tell from an honest rater's bad luck with 2 or 4
    gold trials; the straight-lining rule, on by default, flags them whatever the number. Two
    raters (both slot parities) answer every trial with the same displayed side."""
    import secrets as token_secrets

    from annotation.services.answers import VoteInput, trial_next, vote_submit
    from annotation.services.participants import participant_claim, participant_rater_get_or_create
    from stats.gold_rule import gold_critical_failures

    study = make_rater_study(slug=f"one-side-{gold}-{side}", pages=6).study
    blocks_schedule(study=study, blocks=1, block_size=10, repeats=1, min_gap=2, raters=[2], seed=9, gold=gold)
    for r in range(2):
        rater = participant_rater_get_or_create(study=study, external_id=f"{side}-{r}")
        assignment = participant_claim(study=study, rater=rater)
        while (view := trial_next(assignment=assignment, study=study)) is not None:
            vote_submit(VoteInput(trial_token=view.trial.token, rater_id=rater.pk, verdict=side, confidence=3,
                                  axes={a["id"]: 0 for a in view.axes}, rationale="",
                                  idempotency_key=token_secrets.token_urlsafe(12)))
    c = gold_critical_failures(gold)
    for q in rater_quality(study):
        trials = Trial.objects.filter(assignment=q.assignment, attention_expected=GOLD_EXPECTED)
        # The identical candidate is canonical A (the match image): left when not swapped.
        left = sum(1 for t in trials if not t.swapped)
        assert len(trials) == gold and abs(2 * left - gold) <= 1  # balanced per rater
        failed = gold - left if side == "A" else left
        assert q.gold_trials - q.gold_passed == failed
        assert any(f.startswith("straight-lining") for f in q.flags), q.flags
        assert any(f.startswith("failed gold") for f in q.flags) == (c is not None and failed >= c), q.flags
