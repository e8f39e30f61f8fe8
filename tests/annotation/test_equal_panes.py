"""Issue 45 items 2 and 3: the reference and both candidates are treated alike (media neutralized on
every pane or on none; the dry run asks when a PNG page has no media regions) and shown at one
CSS-pixel scale (HTML rendered at the references' width; the dry run reports a width mismatch)."""

from __future__ import annotations

import functools
import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from PIL import Image, ImageDraw

from annotation.errors import ValidationFailed
from annotation.images import NEUTRAL_FILL
from annotation.models import Candidate, NewStudyRun, Page, StoredImage, Study
from annotation.services.new_study import NewStudyInput, new_study_plan
from annotation.services.new_study.options import media_rows_from_table, with_media_choice
from tests.annotation.render.conftest import browser_available
from tests.annotation.test_new_study import png

BLUE = (0, 0, 255)
# A 15 px-tall blue bar 20 px from the top, and a photo (a red SVG) at 100..300 × 100..250 of a
# 400 px-wide page; the same in the PNG reference (drawn) and in the HTML pages (rendered).
PAGE = (
    "<body style='margin:0;background:#fff;height:300px'>"
    "<div style='position:absolute;left:40px;top:20px;width:300px;height:15px;background:#00f'></div>"
    "<img src='a.svg' style='position:absolute;left:100px;top:100px' width=200 height=150></body>"
)
SVG = "<svg xmlns='http://www.w3.org/2000/svg' width='200' height='150'><rect width='200' height='150' fill='#c00'/></svg>"
RENDER = {"mode": "canvas", "timeout_s": 6, "settle_ms": 200}  # no viewport: the references' width


def reference_png(path: Path, width: int = 400) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (width, 300), "white")
    draw = ImageDraw.Draw(image)
    draw.rectangle((40, 20, 339, 34), fill=BLUE)  # 15 rows: 20..34
    draw.rectangle((100, 100, 299, 249), fill=(200, 0, 0))
    image.save(path)


def _pixels(stored: StoredImage | None) -> Image.Image:
    assert stored is not None
    with Image.open(Path(settings.MEDIA_ROOT) / stored.file.name) as image:
        return image.convert("RGB")


def bar_height(image: Image.Image) -> int:
    """Rows of the blue bar in the column through its middle."""
    x = round(190 * image.width / 400)
    return sum(1 for y in range(image.height) if image.getpixel((x, y)) == BLUE)


def test_a_media_table_is_read_typed_or_as_a_file_and_checked_by_line() -> None:
    typed = media_rows_from_table("p0,,photo,100,250,750,800\np1,gpt,none\n", where="media")
    assert typed == [
        {"page": "p0", "system": "", "kind": "photo", "bbox_1000": [100.0, 250.0, 750.0, 800.0]},
        {"page": "p1", "system": "gpt", "kind": "none"},
    ]
    jsonl = '{"page": "p0", "kind": "chart", "x0": 0, "y0": 0, "x1": 10.5, "y1": 20}\n'
    assert media_rows_from_table(jsonl, where="m.jsonl")[0]["bbox_1000"] == [0.0, 0.0, 10.5, 20.0]
    with pytest.raises(ValidationFailed) as caught:
        media_rows_from_table("page,system,kind,x0,y0,x1,y1\np0,,photo,0,0,10,10\np1,,photo,50,0,20,10\n", where="media.csv")
    assert str(caught.value).startswith("media.csv:3") and "x0 (50.0) must be less than x1 (20.0)" in str(caught.value)
    with pytest.raises(ValidationFailed) as caught:
        media_rows_from_table("p0,,picture,0,0,10,10", where="media")  # typed, no header: line 1
    assert str(caught.value).startswith("media:1") and "'picture' is not one of photo, chart, none" in str(caught.value)
    # The choice: no neutralization is settings.neutralize_media false; given twice otherwise, refused.
    assert with_media_choice({"settings": {"seed": 1}}, neutralize="no", where="x")["settings"] == {
        "seed": 1, "neutralize_media": False}
    with pytest.raises(ValidationFailed):
        with_media_choice({"settings": {"neutralize_media": True}}, neutralize="no", where="x")


def _png_folders(root: Path) -> None:
    for i in range(2):
        png(root / "refs" / f"p{i}.png", size=(60, 80), shade=10 * i)
        png(root / "gpt" / f"p{i}.png", size=(60, 80), shade=10 * i + 1)
        png(root / "claude" / f"p{i}.png", size=(60, 80), shade=10 * i + 2)


def _input(root: Path, **options: Any) -> NewStudyInput:
    return NewStudyInput(
        kind="pairwise_reference", reference=root / "refs",
        systems=(("gpt", root / "gpt"), ("claude", root / "claude")), options={"slug": "eq", **options},
    )


@pytest.mark.django_db
def test_a_page_with_media_on_some_panes_only_is_refused_until_the_researcher_chooses(tmp_path: Path) -> None:
    _png_folders(tmp_path)
    # gpt's image of p0 has a photo region; the reference and claude's image have none known.
    media = [{"page": "p0", "system": "gpt", "kind": "photo", "bbox_1000": [100, 100, 500, 500]}]
    plan = new_study_plan(data=_input(tmp_path, media=media))
    assert plan.unequal_pages() == ["p0: media regions in gpt; none known for the reference, claude (an image file)"]
    report = plan.report()
    assert "media neutralization: on (0 of 2 references with media regions)" in report
    assert "pages shown unequally (media neutralized on some panes only): 1\n  p0: " in report
    error = plan.first_error()
    assert error is not None and "\n" not in error and "--media FILE" in error and "--no-neutralize" in error
    # Either choice makes the panes equal: the other images' regions (none here) …
    media += [{"page": "p0", "system": "", "kind": "none"}, {"page": "p0", "system": "claude", "kind": "none"}]
    assert new_study_plan(data=_input(tmp_path, media=media)).first_error() is None
    # … or no neutralization, where nothing is hidden on any pane.
    off = new_study_plan(data=_input(tmp_path, media=media[:1], settings={"neutralize_media": False}))
    assert off.unequal_pages() == [] and off.first_error() is None
    assert "media neutralization: off" in off.report()
    # The command refuses in one line; with the media table it makes the study, the regions on
    # their images (and no `media` key in study.json).
    table = tmp_path / "media.csv"
    table.write_text("page,system,kind,x0,y0,x1,y1\np0,gpt,photo,100,100,500,500\n")
    folders = ["--reference", str(tmp_path / "refs"), "--system", f"gpt={tmp_path / 'gpt'}",
               "--system", f"claude={tmp_path / 'claude'}"]
    with pytest.raises(CommandError) as caught:
        call_command("new_study", "pairwise_reference", *folders, "--slug", "eq", "--media", str(table),
                     stdout=io.StringIO(), stderr=io.StringIO())
    assert "1 page would show real media beside neutralized media" in str(caught.value)
    assert not Study.objects.exists()
    table.write_text("p0,gpt,photo,100,100,500,500\np0,,photo,0,0,1000,200\np0,claude,none\n")
    call_command("new_study", "pairwise_reference", *folders, "--slug", "eq", "--media", str(table),
                 stdout=io.StringIO(), stderr=io.StringIO())
    page = Page.objects.get(study__slug="eq", external_id="p0")
    assert page.media == [{"kind": "photo", "bbox_1000": [0.0, 0.0, 1000.0, 200.0]}] and page.neutralized_image_id
    assert _pixels(page.neutralized_image).getpixel((10, 8)) == NEUTRAL_FILL
    gpt = Candidate.objects.get(page=page, system__external_id="gpt")
    assert gpt.media and gpt.neutralized_image_id
    call_command("new_study", "pairwise_reference", *folders, "--slug", "eq-off", "--no-neutralize",
                 "--media", str(table), stdout=io.StringIO(), stderr=io.StringIO())
    assert Study.objects.get(slug="eq-off").neutralize_media is False


@pytest.mark.browser
@pytest.mark.django_db
def test_png_and_html_references_and_html_candidates_neutralized_alike_at_one_scale(tmp_path: Path) -> None:
    """A PNG reference (p0) and an HTML reference (p1) beside HTML candidates with a photo: the
    dry run asks for p0's regions; given, every pane's photo is a grey box; the HTML reference
    got its regions from its DOM; and the 15 px bar is 15 px tall in every shown image (rendered
    at the references' 400 px width, not the default 1,280)."""
    browser_available()
    root = tmp_path / "in"
    reference_png(root / "refs" / "p0.png")
    reference_png(root / "refs" / "p2.png", width=300)  # another width: its page renders at 300 px
    (root / "refs" / "p1.html").write_text(PAGE)
    (root / "refs" / "a.svg").write_text(SVG)
    for system in ("gpt", "claude"):
        (root / system).mkdir()
        for i in range(3):
            (root / system / f"p{i}.html").write_text(PAGE)
        (root / system / "a.svg").write_text(SVG)
    folders = ["pairwise_reference", "--reference", str(root / "refs"), "--system", f"gpt={root / 'gpt'}",
               "--system", f"claude={root / 'claude'}", "--option", f"render={json.dumps(RENDER)}"]
    dry = io.StringIO()
    with pytest.raises(CommandError):
        call_command("new_study", *folders, "--slug", "eq", "--dry-run", stdout=dry, stderr=io.StringIO())
    report = dry.getvalue()
    assert "HTML rendered with: viewport 400x720," in report
    assert "render viewport: each page's reference's width (one scale per trial, 1 at another than the study's)\n" in report
    assert "width mismatches (renders and their reference at two scales): 0\n" in report
    assert "pages shown unequally (media neutralized on some panes only): 2\n  p0: media regions in gpt, claude; none known for the reference" in report
    (root / "media.csv").write_text("p0,,photo,250,333.33,750,833.34\np2,,photo,333.33,333.33,1000,833.34\n")
    call_command("new_study", *folders, "--slug", "eq", "--media", str(root / "media.csv"),
                 stdout=io.StringIO(), stderr=io.StringIO())
    study = Study.objects.get(slug="eq")
    assert study.neutralize_media and study.options["render"]["viewport"] == "400x720"
    for page in Page.objects.filter(study=study).select_related("image", "neutralized_image"):
        assert page.media and page.neutralized_image_id, page.external_id  # p1's from its DOM
        shown = [_pixels(page.neutralized_image)]
        for candidate in page.candidates.select_related("image", "neutralized_image"):
            assert candidate.rendered and candidate.neutralized_image_id
            shown.append(_pixels(candidate.neutralized_image))
        width = 300 if page.external_id == "p2" else 400
        assert page.meta.get("render_viewport") == ("300x720" if width == 300 else None)
        for image in shown:  # the photo is a grey box on every pane, the bar at one scale
            assert image.width == width
            assert image.getpixel((150, 130)) == NEUTRAL_FILL
            assert bar_height(image) == 15
    # A viewport the researcher gives is kept; the dry run lists the mismatch and the viewport
    # that removes it.
    wide = {**RENDER, "viewport": "500x300"}
    plan = new_study_plan(data=NewStudyInput(
        kind="pairwise_reference", reference=root / "refs", systems=(("gpt", root / "gpt"),),
        options={"slug": "eq-wide", "render": wide, "settings": {"neutralize_media": False}},
    ))
    remedy = " removes it (or none: each page at its reference's width)"
    assert plan.width_mismatches() == [
        "p0: reference 400 px wide, renders 500 px (text shown at ×0.80); render viewport 400x300" + remedy,
        "p2: reference 300 px wide, renders 500 px (text shown at ×0.60); render viewport 300x300" + remedy,
    ]
    assert "width mismatches (renders and their reference at two scales): 2\n" in plan.report()
    plan.close()


def _uploaded(client: Any, data: dict[str, Any], threads: list[Any], capture: Any) -> NewStudyRun:
    """Post the upload form, run the background run it queued (as the server's queue would), and
    return the run: the form never renders or makes a study inside its request."""
    with capture(execute=True):
        answer = client.post("/studies/new/", data)
    run = NewStudyRun.objects.order_by("-pk").first()
    assert answer.status_code == 302 and run is not None and answer["Location"] == f"/studies/new/runs/{run.token}/"
    threads[-1].run()
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_the_upload_page_takes_the_choice_typed_and_the_study_page_says_every_pane(
    tmp_path: Path, researcher: Any, settings: Any, monkeypatch: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from django.test import Client

    from tests.annotation.test_new_study import zipped
    from tests.task_threads import record_task_threads

    threads = record_task_threads(settings, monkeypatch)
    _png_folders(tmp_path)
    client = Client()
    client.force_login(researcher)
    page = client.get("/studies/new/").content.decode()
    assert 'name="media"' in page and 'name="neutralize"' in page
    names = ("refs", "gpt", "claude")
    form = {"kind": "pairwise_reference", "reference": "refs", "slug": "eq-page", "media": "p0,gpt,photo,100,100,500,500"}
    upload = functools.partial(_uploaded, client, threads=threads, capture=django_capture_on_commit_callbacks)
    asked = upload({**form, "archive": zipped(tmp_path, names=names), "dry_run": "1"})
    assert "a real run would stop: 1 page would show real media beside neutralized media" in asked.report, asked.report
    # Typed rows for the other two images: equal, and made.
    form["media"] += "\np0,,none\np0,claude,none\n"
    made = upload({**form, "archive": zipped(tmp_path, names=names)})
    assert made.status == "done" and made.study is not None and made.study.slug == "eq-page", made.error
    detail = client.get("/studies/eq-page/").content.decode()
    assert "media neutralized on every pane (reference and candidates)" in detail
    assert "0 failed renders, 1 with media regions" in detail
    assert "1 page has media regions on candidates and none on the reference" in detail  # p0: none, as typed
    # Or no neutralization, chosen on the form.
    off = {**form, "slug": "eq-off", "media": "p0,gpt,photo,100,100,500,500", "neutralize": "no"}
    assert upload({**off, "archive": zipped(tmp_path, names=names)}).status == "done"
    assert Study.objects.get(slug="eq-off").neutralize_media is False
    assert "media shown as it is" in client.get("/studies/eq-off/").content.decode()
    # A media table inside the .zip, beside its folders, is read as the media field would be.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            for path in sorted((tmp_path / name).iterdir()):
                archive.write(path, f"{name}/{path.name}")
        archive.writestr("media.csv", "page,system,kind,x0,y0,x1,y1\np0,gpt,photo,100,100,500,500\np0,,none,,,,\n")
    zipped_media = SimpleUploadedFile("folders.zip", buffer.getvalue(), content_type="application/zip")
    inside = upload({"kind": "pairwise_reference", "reference": "refs", "slug": "eq-zip",
                     "archive": zipped_media, "dry_run": "1"})
    assert "first, p0: media regions in gpt; none known for claude (an image file)" in inside.report, inside.report


def test_a_width_mismatch_is_named_with_its_remedy() -> None:
    """Width mismatches without a browser: the plan's probes say the sizes. With a viewport the
    researcher gave, the viewport of the reference's width removes the mismatch; with the widths
    taken from the references, only a width no viewport takes can be left."""
    from annotation.services.new_study.plan import NewStudyPlan, Probe, Source

    def plan(*, auto: bool) -> NewStudyPlan:
        refs = {p: Source(label=f"refs/{p}.png", path=Path(f"/r/{p}.png")) for p in ("p0", "p1")}
        renders = {(p, "gpt"): Source(label=f"gpt/{p}.html", path=Path(f"/w/{p}.png")) for p in ("p0", "p1")}
        made = NewStudyPlan(kind="pairwise_reference", options={}, pages=["p0", "p1"], systems=["gpt"],
                            references=refs, images=renders, viewport_from_references=auto,
                            render={"viewport": "1000x720", "scale": 2.0})
        made.rendered = {s.label for s in renders.values()}
        made.probes = {"refs/p0.png": Probe(size=(2000, 3000), mode="RGB"), "refs/p1.png": Probe(size=(1600, 900), mode="RGB"),
                       "gpt/p0.html": Probe(size=(2000, 2500), mode="RGB"), "gpt/p1.html": Probe(size=(2000, 1800), mode="RGB")}
        return made

    assert plan(auto=True).width_mismatches() == [
        "p1: reference 1,600 px wide, renders 2,000 px (text shown at ×0.80); "
        "its width over the scale is outside a viewport's 100 to 8192 px"
    ]
    assert plan(auto=False).width_mismatches() == [
        "p1: reference 1,600 px wide, renders 2,000 px (text shown at ×0.80); render viewport 800x720 removes it "
        "(or none: each page at its reference's width)"
    ]


@pytest.mark.django_db
def test_the_study_page_names_pages_whose_reference_shows_media_beside_boxes(researcher: Any) -> None:
    """A bundle imported with regions on its candidates but not on a page's reference (new_study
    refuses it unless the researcher says the reference has none) is named on the study page,
    until neutralization is off."""
    from django.test import Client

    from tests.annotation.rater_factories import make_rater_study

    rs = make_rater_study(pages=3)
    rs.study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    assert "media neutralized on every pane" in client.get(f"/studies/{rs.study.slug}/").content.decode()
    Page.objects.filter(study=rs.study, external_id__in=["pg000", "pg001"]).update(media=[], neutralized_image=None)
    page = client.get(f"/studies/{rs.study.slug}/").content.decode()
    assert "2 pages have media regions on candidates and none on the reference" in page
    Study.objects.filter(pk=rs.study.pk).update(neutralize_media=False)
    page = client.get(f"/studies/{rs.study.slug}/").content.decode()
    assert 'id="media-unequal"' not in page and "media shown as it is" in page
