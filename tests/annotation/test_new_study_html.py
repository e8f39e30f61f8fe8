"""``new_study`` with HTML outputs (issue 38): each page rendered with the study's render settings
(annotation.render), a page that failed to render is that system's failed render, the PNG goes
through the same path as an uploaded image, and the renderer's media regions become the
candidate's. Real Chromium (Debian's); skipped without it."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from PIL import Image
from rest_framework.test import APIClient

from annotation.models import Candidate, Predicate, Study
from annotation.render import chromium
from annotation.services.bundles.exporting import study_export_to_temporary_zip
from annotation.services.new_study.uploads import new_study_from_upload
from tests.annotation.render.conftest import browser_available
from tests.annotation.test_new_study import png

RENDER = json.dumps({"viewport": "400x300", "mode": "canvas", "timeout_s": 6, "max_height": 1000, "settle_ms": 200})
# A red photo box at known coordinates: 100..300 × 75..225 of a 400 × 300 canvas.
PHOTO = (
    "<body style='margin:0;background:#fff'><img src='a.svg' style='position:absolute;left:100px;top:75px' "
    "width=200 height=150><p>text</p></body>"
)
SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='200' height='150'><rect width='200' height='150' fill='#c00'/></svg>"
TEXT = "<body style='margin:0'><h1>Page</h1><p>only text</p></body>"
LOOP = "<body>x<script>while (true) {}</script></body>"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("new_study", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


@pytest.fixture
def html_folders(tmp_path: Path) -> Path:
    """refs/p0, p1 (PNG); html/p0 (a photo), html/p1 (text); bad/p0 (text), bad/p1 (an endless loop)."""
    root = tmp_path / "in"
    for i in range(2):
        png(root / "refs" / f"p{i}.png", size=(400, 300), shade=10 * i)
    (root / "html").mkdir()
    (root / "html" / "p0.html").write_text(PHOTO)
    (root / "html" / "a.svg").write_text(SVG)
    (root / "html" / "p1.html").write_text(TEXT)
    (root / "bad").mkdir()
    (root / "bad" / "p0.html").write_text(TEXT)
    (root / "bad" / "p1.html").write_text(LOOP)
    return root


def args(root: Path, *more: str) -> list[str]:
    return [
        "pairwise_reference", "--reference", str(root / "refs"), "--system", f"html={root / 'html'}",
        "--system", f"bad={root / 'bad'}", "--option", f"render={RENDER}", *more,
    ]


@pytest.mark.browser
@pytest.mark.django_db
def test_html_outputs_render_into_a_study_with_failed_renders_and_media(
    html_folders: Path, tmp_path: Path, researcher: Any
) -> None:
    browser_available()
    dry = io.StringIO()
    with pytest.raises(CommandError) as asked:
        call_command("new_study", *args(html_folders, "--slug", "h", "--dry-run"), stdout=dry, stderr=io.StringIO())
    assert "\n" not in str(asked.value) and "--media FILE" in str(asked.value) and "--no-neutralize" in str(asked.value)
    report = dry.getvalue()
    assert "HTML rendered with: viewport 400x300, scale 1.0, mode canvas," in report
    assert "rendered html: 2 pages rendered, 0 failed\n" in report
    assert "rendered bad: 1 pages rendered, 1 failed\n" in report
    assert "failed renders (HTML): 1\n  bad: p1: " in report
    # html/a.svg is p0's asset (issue 45): served to its page, not a stray file.
    assert "not images: 0\n" in report and "stray files: 0\n" in report
    assert "assets beside the HTML pages (served to them when they render): 1\n" in report
    # The PNG reference p0 has no media regions beside a rendered photo: the dry run asks.
    assert "pages shown unequally (media neutralized on some panes only): 1\n  p0: media regions in html; " in report
    assert "a real run would stop: 1 page would show real media beside neutralized media" in report
    assert not Study.objects.exists()

    media = tmp_path / "media.csv"
    media.write_text("page,system,kind,x0,y0,x1,y1\np0,,photo,250,250,750,750\np1,,none,,,,\n")
    err = io.StringIO()
    call_command(
        "new_study", *args(html_folders, "--slug", "h", "--keep-bundle", str(tmp_path / "kept"), "--researcher", researcher.username),
        "--media", str(media), stdout=io.StringIO(), stderr=err,
    )
    assert "1 HTML page failed to render, kept as failed renders" in err.getvalue()
    study = Study.objects.get(slug="h")
    candidates = {(c.page.external_id, c.system.external_id): c for c in Candidate.objects.filter(page__study=study)}
    assert candidates["p1", "bad"].rendered is False and candidates["p1", "bad"].image_id is None
    assert all(candidates[k].rendered for k in [("p0", "html"), ("p1", "html"), ("p0", "bad")])
    photo = candidates["p0", "html"]
    assert [m["kind"] for m in photo.media] == ["photo"]
    assert [round(v) for v in photo.media[0]["bbox_1000"]] == [250, 250, 750, 750]
    assert candidates["p1", "html"].media == []
    # Their blocks (docs/protocol.md "Blocks from the DOM"), type and box only: a figure where the
    # photo is, then the paragraph; a heading and a paragraph on the text page; none on a failed render.
    assert (photo.blocks[0]["type"], [round(v) for v in photo.blocks[0]["bbox_1000"]]) == ("figure", [250, 250, 750, 750])
    assert [b["type"] for b in photo.blocks] == ["figure", "text"]
    assert [b["type"] for b in candidates["p1", "html"].blocks] == ["title", "text"]
    assert all(set(b) == {"type", "bbox_1000"} for c in candidates.values() for b in c.blocks)
    assert candidates["p1", "bad"].blocks == [] and study.pages.get(external_id="p0").blocks == []  # a PNG reference
    # The render settings are stored with the study, exported in its bundle and shown on its page.
    assert study.options["render"]["viewport"] == "400x300" and study.options["render"]["mode"] == "canvas"
    kept = next((tmp_path / "kept").iterdir())
    assert json.loads((kept / "study.json").read_text())["render"]["viewport"] == "400x300"
    exported = json.loads(zipfile.ZipFile(study_export_to_temporary_zip(study=study)).read("study.json"))
    assert exported["render"] == study.options["render"]
    assert next(c for c in exported["candidates"] if c["page"] == "p1" and c["system"] == "html")["blocks"] == \
        candidates["p1", "html"].blocks
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/studies/{study.slug}/").content.decode()
    assert "HTML outputs rendered with: viewport 400x300 · scale 1.0 · canvas · max height 1000 px" in page
    assert sorted(p.suffix for p in (kept / "images").iterdir()) == [".png"] * 5  # 2 references + 3 renders


@pytest.mark.django_db
def test_a_study_with_html_stops_with_one_line_without_a_browser(html_folders: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(chromium, "CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(CommandError) as caught:
        run(*args(html_folders, "--slug", "h"))
    assert "\n" not in str(caught.value) and "apt-get install chromium" in str(caught.value)
    # Image-only studies never start a browser.
    png(html_folders / "imgs" / "p0.png", size=(400, 300))
    png(html_folders / "imgs" / "p1.png", size=(400, 300))
    run("pairwise_reference", "--reference", str(html_folders / "refs"), "--system", f"img={html_folders / 'imgs'}",
        "--slug", "img")
    assert Study.objects.filter(slug="img").exists()
    # A render setting out of range is one line naming the option, before any browser is looked for.
    with pytest.raises(CommandError) as caught:
        run("rating", "--system", f"html={html_folders / 'html'}", "--slug", "h2", "--option", 'render={"viewport": "big"}')
    assert str(caught.value).startswith("option render.viewport: expected WIDTHxHEIGHT")
    # A page's time limit is capped at 60 s (issue 50): a looping page holds a browser a minute at most.
    with pytest.raises(CommandError) as caught:
        run("rating", "--system", f"html={html_folders / 'html'}", "--slug", "h3", "--option", 'render={"timeout_s": 600}')
    assert str(caught.value) == "option render.timeout_s: expected 0.5 to 60 seconds, got 600"


# Reads outside its folder (the reference beside it, /etc/passwd) would paint the page red; its own
# ok.txt paints the green square, so the scripts are seen to have run.
HOSTILE = """<body style='margin:0;background:#fff'><div id=box style='width:100px;height:100px'></div>
<img src='../refs/p0.png'><img src='/etc/passwd'><iframe src='file:///etc/passwd'></iframe>
<script>
const paint = (ok, colour) => { if (ok) document.getElementById('box').style.background = colour; };
fetch('ok.txt').then(r => paint(r.ok, '#0f0'));
for (const url of ['../refs/p0.png', '/etc/passwd', '../../../../etc/passwd'])
  fetch(url).then(r => paint(r.ok, '#f00')).catch(() => {});
</script></body>"""


@pytest.mark.browser
@pytest.mark.django_db
def test_an_uploaded_html_page_renders_with_requests_outside_its_folder_refused(html_folders: Path, researcher: Any) -> None:
    browser_available()
    def upload() -> SimpleUploadedFile:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for i in range(2):
                archive.write(html_folders / "refs" / f"p{i}.png", f"refs/p{i}.png")
                archive.writestr(f"sys/p{i}.html", HOSTILE)
            archive.writestr("sys/ok.txt", "ok")
        return SimpleUploadedFile("folders.zip", buffer.getvalue(), content_type="application/zip")

    options = {"slug": "up", "render": json.loads(RENDER)}
    plan, _ = new_study_from_upload(upload=upload(), kind="pairwise_reference", reference="refs", options=options, dry_run=True)
    assert plan.render_counts == {"sys": [2, 0]} and not plan.render_failed
    # The page's folder (sys/) is all it may read: refs/ beside it and /etc/passwd are refused.
    assert plan.render_refused["folders.zip/sys/p0.html"] == ["file:///etc/passwd"]
    rendered = plan.images["p0", "sys"].path
    assert rendered is not None
    with Image.open(rendered) as image:
        colours = {colour for _, colour in image.convert("RGB").getcolors(1 << 20) or []}
    assert (0, 255, 0) in colours  # its own file was read
    assert (255, 0, 0) not in colours and (0, 100, 200) not in colours  # nothing outside sys/ was
    client = APIClient()
    client.force_authenticate(researcher)
    # Its refused images are media regions, the PNG references have none: no neutralization, chosen.
    form = {"kind": "pairwise_reference", "reference": "refs", "options": json.dumps(options), "neutralize": "no"}
    made = client.post("/api/studies/new/", {**form, "file": upload()}, format="multipart")
    assert made.status_code == 201, made.content
    candidates = Candidate.objects.filter(page__study__slug="up")
    assert candidates.count() == 2 and all(c.rendered for c in candidates)


@pytest.mark.browser
@pytest.mark.django_db
def test_manifest_rows_of_html_references_and_outputs(html_folders: Path) -> None:
    browser_available()
    (html_folders / "refs_html").mkdir()
    (html_folders / "refs_html" / "p0.html").write_text(PHOTO)
    (html_folders / "refs_html" / "a.svg").write_text(SVG)
    manifest = html_folders / "manifest.csv"
    manifest.write_text(
        "page,reference,system,image\n"
        "p0,refs_html/p0.html,html,html/p1.html\n"
        "p0,,png,refs/p1.png\n"
    )
    (html_folders / "media.csv").write_text("p0,png,none\n")  # the PNG candidate has no media
    run("pairwise_reference", "--manifest", str(manifest), "--slug", "m", "--option", f"render={RENDER}",
        "--media", str(html_folders / "media.csv"))
    study = Study.objects.get(slug="m")
    page = study.pages.get()
    assert page.image_id is not None and [m["kind"] for m in page.media] == ["photo"]  # a rendered reference
    assert [b["type"] for b in page.blocks] == ["figure", "text"]  # ... with its blocks
    assert sorted(c.rendered for c in Candidate.objects.filter(page=page)) == [True, True]


BLANK = "<body style='margin:0;background:#fff'></body>"  # one colour: a failed render


@pytest.mark.browser
@pytest.mark.django_db
def test_a_blank_html_output_is_a_failure_the_study_page_and_both_rules_report(tmp_path: Path, researcher: Any) -> None:
    """docs/protocol.md "Failed renders in the leaderboard", end to end: "bad" renders a blank page
    for p0 and p1 (failed renders) and a text page for p2; the judge prefers "bad" wherever it
    rendered. AmbiHTMLBench ranks it first, AesCode (its four losses) last; both checked against
    outcomes listed by hand and fitted by scipy."""
    from ranking.leaderboard import leaderboard_compute
    from ranking.rendering import leaderboard_html
    from tests.ranking.test_render_failure_rule import check_against_hand, judge_everything

    browser_available()
    root = tmp_path / "in"
    for i in range(3):
        png(root / "refs" / f"p{i}.png", size=(400, 300), shade=10 * i)
        for system in ("good", "fair"):
            (root / system).mkdir(exist_ok=True)
            (root / system / f"p{i}.html").write_text(TEXT)
    (root / "bad").mkdir()
    (root / "bad" / "p0.html").write_text(BLANK)
    (root / "bad" / "p1.html").write_text(BLANK)
    (root / "bad" / "p2.html").write_text(TEXT)
    reports = {}
    for rule in ("ambihtmlbench", "aescode"):
        call_command(
            "new_study", "pairwise_reference", "--reference", str(root / "refs"),
            *[f"--system={s}={root / s}" for s in ("good", "fair", "bad")],
            "--option", f"render={RENDER}", "--render-failures", rule, "--slug", f"blank-{rule}",
            "--researcher", researcher.username, stdout=io.StringIO(), stderr=io.StringIO(),
        )
        study = Study.objects.get(slug=f"blank-{rule}")
        failed = Candidate.objects.filter(page__study=study, rendered=False)
        assert sorted((c.page.external_id, c.system.external_id) for c in failed) == [("p0", "bad"), ("p1", "bad")]
        client = Client()
        client.force_login(researcher)
        page = client.get(f"/studies/{study.slug}/").content.decode()
        assert '<td class="num">67% (2 of 3)</td>' in page and '<td class="num">0% (0 of 3)</td>' in page
        reports[rule] = leaderboard_compute(
            study=study, coefficient_set=judge_everything(study, set_name=f"set-{rule}"), resamples=30, seed=2
        )
        html = leaderboard_html(study=study, report=reports[rule])
        name = {"ambihtmlbench": "AmbiHTMLBench", "aescode": "AesCode"}[rule]
        assert f"Render failures: <strong>{name}</strong> rule" in html and "<code>bad</code> 67% (2 of 3)" in html
    judged = [("good", "fair", 0.5)] * 3 + [("good", "bad", 0.0), ("fair", "bad", 0.0)]
    check_against_hand(reports["ambihtmlbench"], judged)
    check_against_hand(reports["aescode"], judged + [("good", "bad", 1.0), ("fair", "bad", 1.0)] * 2)
    assert reports["ambihtmlbench"]["systems"][0]["system"] == "bad"
    assert reports["aescode"]["systems"][-1]["system"] == "bad"


SLIDE = "<body style='margin:0'><h1>Quarterly report</h1><p>inside the slide</p></body>"
WIDE = "<body style='margin:0'><h1>Annual summary</h1><div style='width:500px;height:40px;background:#c00'></div></body>"


@pytest.mark.browser
@pytest.mark.django_db
def test_checklist_predicates_answered_from_the_render(tmp_path: Path) -> None:
    """docs/protocol.md "Checks computed from the render": a predicates file's ``check`` rows get
    their automatic answer from the item's render; a failed render's predicates are left out with
    its item, and its rendered check counted NO."""
    browser_available()
    root = tmp_path / "in"
    for system, html in (("ok", SLIDE), ("wide", WIDE), ("bad", BLANK)):
        (root / system).mkdir(parents=True)
        (root / system / "p0.html").write_text(html)
    questions = (
        ("rendered", "", "Did the slide render?"),
        ("text_visible", "quarterly  REPORT", "Does it say Quarterly report?"),
        ("inside_canvas", "", "Does the content stay on the slide?"),
    )
    rows = ["page,system,question,check,text"]
    rows += [f"p0,{s},{q},{check},{text}" for s in ("ok", "wide") for check, text, q in questions]
    rows += ["p0,bad,Did the slide render?,rendered,", "p0,ok,Is it pretty?,,"]
    (tmp_path / "predicates.csv").write_text("\n".join(rows) + "\n")
    base = [
        "checklist", *[f"--system={s}={root / s}" for s in ("ok", "wide", "bad")],
        "--predicates", str(tmp_path / "predicates.csv"), "--option", f"render={RENDER}", "--slug", "checks",
    ]
    dry = io.StringIO()
    call_command("new_study", *base, "--dry-run", stdout=dry, stderr=io.StringIO())
    assert (
        "checks answered from the render: inside_canvas NO 1, inside_canvas YES 1, rendered NO 1, rendered YES 2, "
        "text_visible NO 1, text_visible YES 1\n" in dry.getvalue()
    )
    call_command("new_study", *base, stdout=io.StringIO(), stderr=io.StringIO())
    answers = {
        (p.candidate.system.external_id, p.question): p.automatic
        for p in Predicate.objects.filter(study__slug="checks").select_related("candidate__system")
    }
    assert answers == {
        ("ok", "Did the slide render?"): "YES",
        ("ok", "Does it say Quarterly report?"): "YES",
        ("ok", "Does the content stay on the slide?"): "YES",
        ("wide", "Did the slide render?"): "YES",
        ("wide", "Does it say Quarterly report?"): "NO",
        ("wide", "Does the content stay on the slide?"): "NO",  # its 500 px box on a 400 px slide
        ("ok", "Is it pretty?"): "",  # no check, no automatic answer
    }


def test_a_check_on_an_image_item_or_an_unknown_check_is_one_line(tmp_path: Path) -> None:
    png(tmp_path / "imgs" / "p0.png", size=(400, 300))
    (tmp_path / "html").mkdir()
    (tmp_path / "html" / "p0.html").write_text(SLIDE)
    for row, message in (
        ("p0,imgs,Q?,rendered,", f"a check is answered from an HTML output's render; {tmp_path}/imgs/p0.png is an image"),
        ("p0,html,Q?,pretty,", "unknown check 'pretty' (expected one of: rendered, text_visible, inside_canvas)"),
        ("p0,html,Q?,text_visible,", "the text column goes with the text_visible check"),
    ):
        (tmp_path / "predicates.csv").write_text("page,system,question,check,text\n" + row + "\n")
        with pytest.raises(CommandError) as caught:
            run("checklist", f"--system=imgs={tmp_path / 'imgs'}", f"--system=html={tmp_path / 'html'}",
                "--predicates", str(tmp_path / "predicates.csv"), "--slug", "c", "--dry-run")
        assert "\n" not in str(caught.value) and str(caught.value).startswith(f"{tmp_path}/predicates.csv:2: ")
        assert message in str(caught.value)


@pytest.mark.browser
@pytest.mark.django_db
@pytest.mark.parametrize("kind", ["pairwise_reference", "pairwise"])
def test_pairwise_html_outputs_keep_their_page_text_for_the_lens(
    kind: str, html_folders: Path, tmp_path: Path, researcher: Any
) -> None:
    """docs/protocol.md "The disagreement lens": a pairwise study's rendered HTML candidates keep
    their page's blocks with text (``CandidateBlocks``, researchers only), the bundle exports them
    as ``dom_blocks`` and an import reads them back unchanged; what the trial page draws
    (``Candidate.blocks``) stays type and box only; the lens counts characters."""
    from annotation.models import CandidateBlocks
    from annotation.services.bundles.importing import study_import_bundle
    from calibration.services.lens import text_measure

    browser_available()
    root = html_folders
    # bad/p1 fails as a blank page, at once: the endless loop's failure (6 s, the render timeout)
    # is test_html_outputs_render_into_a_study_with_failed_renders_and_media's.
    (root / "bad" / "p1.html").write_text(BLANK)
    if kind == "pairwise_reference":
        run(*args(root, "--slug", "kt", "--researcher", researcher.username, "--no-neutralize"))
    else:
        (tmp_path / "briefs.csv").write_text("page,text\np0,A page with a photo\np1,A page of text\n")
        run(
            "pairwise", "--system", f"html={root / 'html'}", "--system", f"bad={root / 'bad'}",
            "--briefs", str(tmp_path / "briefs.csv"), "--option", f"render={RENDER}", "--slug", "kt",
        )
    study = Study.objects.get(slug="kt")
    kept = {
        (row.candidate.page.external_id, row.candidate.system.external_id): row.blocks
        for row in CandidateBlocks.objects.filter(candidate__page__study=study).select_related(
            "candidate__page", "candidate__system"
        )
    }
    assert set(kept) == {("p0", "html"), ("p1", "html"), ("p0", "bad")}  # not the failed render
    assert [(b["type"], b["text"]) for b in kept["p1", "html"]["blocks"]] == [("title", "Page"), ("text", "only text")]
    assert all(set(b) == {"type", "bbox_1000"} for c in Candidate.objects.filter(page__study=study) for b in c.blocks)
    assert text_measure(study=study) == "characters"
    # The bundle's round trip.
    exported = zipfile.ZipFile(study_export_to_temporary_zip(study=study))
    folder = tmp_path / "bundle"
    exported.extractall(folder)
    document = json.loads((folder / "study.json").read_text())
    listed = document["candidates"] if kind == "pairwise_reference" else document["items"]
    assert sum("dom_blocks" in c for c in listed) == 3
    document["slug"] = "kt-again"
    (folder / "study.json").write_text(json.dumps(document))
    again = study_import_bundle(path=folder)
    assert {
        (row.candidate.page.external_id, row.candidate.system.external_id): row.blocks
        for row in CandidateBlocks.objects.filter(candidate__page__study=again).select_related(
            "candidate__page", "candidate__system"
        )
    } == kept
