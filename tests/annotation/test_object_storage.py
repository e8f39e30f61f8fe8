"""Media in an S3 bucket (annotation/media.py, annotation/media_s3.py), against a real S3-compatible
server (moto's server mode on loopback, tests/s3_server.py): imports, trial images for raters, the
judges' requests, the bundle export, ``copy_media`` both ways, opaque keys, a bucket that goes away."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation import progress
from annotation.media import MediaUnavailable
from annotation.models import Candidate, Comparison, Page, StoredImage, Study, System
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.media_copy import study_stored_images
from tests.annotation.test_rater_flow import join, scheduled

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
IMAGE_RE = re.compile(r'src="(/t/[^"]+\.png)"')
KEY_RE = re.compile(r"images/(?P<prefix>[0-9a-f]{2})/(?P<sha>[0-9a-f]{64})\.png")


def _object(s3_server, bucket: str, key: str) -> bytes:  # type: ignore[no-untyped-def]
    return s3_server.client().get_object(Bucket=bucket, Key=key)["Body"].read()  # type: ignore[no-any-return]


def _assert_opaque(s3_server, bucket: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Every key is the SHA-256 of its object's bytes: nothing a rater could tie to a system or page."""
    keys = s3_server.keys(bucket)
    assert keys
    for key in keys:
        match = KEY_RE.fullmatch(key)
        assert match, key
        assert match["sha"].startswith(match["prefix"])
        assert hashlib.sha256(_object(s3_server, bucket, key)).hexdigest() == match["sha"]
    return keys  # type: ignore[no-any-return]


def _rater_images(study: Study) -> tuple[Client, list[str], str]:
    client = Client()
    html = join(client, study).content.decode()
    urls = list(dict.fromkeys(IMAGE_RE.findall(html)))
    assert urls
    return client, urls, html


def test_an_imported_bundle_lives_in_the_bucket_under_opaque_keys(s3_media, s3_server, examples_dir, settings) -> None:  # type: ignore[no-untyped-def]
    study = study_import_bundle(path=examples_dir / "bundle")
    keys = _assert_opaque(s3_server, s3_media)
    assert keys == sorted(str(s.file.name) for s in study_stored_images([study]))
    assert not list(Path(settings.MEDIA_ROOT).rglob("*.png"))  # nothing on the node's disk
    names = {s.external_id for s in System.objects.filter(study=study)} | {s.name for s in System.objects.filter(study=study)}
    names |= {p.name for p in (examples_dir / "bundle" / "images").iterdir()}
    assert not any(name in key for key in keys for name in names if not re.fullmatch(r"[0-9a-f]+", name))


def test_a_rater_gets_trial_images_from_the_bucket_through_the_trial_token_only(s3_media, s3_server) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client, urls, html = _rater_images(rs.study)
    assert s3_server.endpoint not in html and s3_media not in html and "X-Amz" not in html
    bucket_objects = {_object(s3_server, s3_media, key) for key in s3_server.keys(s3_media)}
    for url in urls:
        response = client.get(url)  # granted by the image pass
        assert response.status_code == 200 and response["Content-Type"] == "image/png"
        assert response.content in bucket_objects
        assert not any(s3_media in v or s3_server.endpoint in v for v in response.headers.values())
        assert "X-Accel-Redirect" not in response and "Location" not in response
    assert Client().get(urls[0]).status_code == 404  # a stranger: no pass, no session


def test_image_requests_answer_503_while_the_bucket_is_away_and_recover(s3_media, s3_server) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client, urls, _html = _rater_images(rs.study)
    with s3_server.paused():
        response = client.get(urls[0])
        assert response.status_code == 503
        assert response["Retry-After"] == "5" and response["Cache-Control"] == "no-store"
        assert b"try again" in response.content and s3_media.encode() not in response.content
        assert "X-Frame-Options" in response  # Django's security headers on the 503 too
        health = Client().get("/healthz")
        assert health.status_code == 503 and health.json()["checks"]["storage"] == "fail"
    assert client.get(urls[0]).status_code == 200
    assert Client().get("/healthz").status_code == 200


def test_judge_requests_are_built_from_the_bucket_and_wait_while_it_is_away(s3_media, s3_server) -> None:  # type: ignore[no-untyped-def]
    import judges.request_building as rb
    from judges.models import Order
    from tests.judges.factories import make_judge

    rs = scheduled()
    judge = make_judge(base_url="http://127.0.0.1:9/v1")
    comparison = rb.load_comparison(Comparison.objects.filter(study=rs.study).order_by("pk").first().pk)  # type: ignore[union-attr]
    axes = rb.study_axes(rs.study.pk)
    rb._cache.clear()
    built = rb.build_judge_request(judge=judge, comparison=comparison, order=Order.PRIMARY, axes=axes)
    assert [i.data[:8] for i in built.request.images] == [b"\x89PNG\r\n\x1a\n"] * 3
    assert s3_server.endpoint.encode() not in built.body and s3_media.encode() not in built.body
    rb._cache.clear()
    with s3_server.paused(), pytest.raises(MediaUnavailable):
        rb.build_judge_request(judge=judge, comparison=comparison, order=Order.SWAPPED, axes=axes)


def test_the_export_round_trips_a_study_whose_images_are_in_the_bucket(s3_media, s3_server, examples_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    study = study_import_bundle(path=examples_dir / "bundle")
    first = study_export_bundle(study=study, path=tmp_path / "first.zip")
    with zipfile.ZipFile(first) as archive:
        exported = {name: archive.read(name) for name in archive.namelist()}
    originals = {str(s.file.name) for s in study_stored_images([study])}
    bucket = {hashlib.sha256(_object(s3_server, s3_media, key)).hexdigest() for key in originals}
    images = {name: data for name, data in exported.items() if name.endswith(".png")}
    assert images and {hashlib.sha256(d).hexdigest() for d in images.values()} <= bucket
    Study.objects.filter(pk=study.pk).delete()
    again = study_import_bundle(path=first)
    second = study_export_bundle(study=again, path=tmp_path / "second.zip")
    with zipfile.ZipFile(second) as archive:
        assert {name: archive.read(name) for name in archive.namelist()} == exported
    folder = study_export_bundle(study=again, path=tmp_path / "folder")
    assert {n: (folder / n).read_bytes() for n in images} == images


def test_copy_media_copies_a_study_to_the_bucket_and_back_checking_every_object(s3_bucket, s3_server, settings) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()  # on the local media folder
    stored = study_stored_images([rs.study])
    media = Path(settings.MEDIA_ROOT)
    out = io.StringIO()
    call_command("copy_media", rs.study.slug, "--to", "s3", stdout=out)
    n = len(stored)
    assert out.getvalue().strip() == f"{n} images: {n} copied, 0 already there, {n} checked (size and SHA-256) in s3"
    assert _assert_opaque(s3_server, s3_bucket) == sorted(str(s.file.name) for s in stored)
    for s in stored:
        assert _object(s3_server, s3_bucket, str(s.file.name)) == (media / str(s.file.name)).read_bytes()
    # A damaged object in the bucket is found and replaced; intact ones are left alone.
    s3_server.client().put_object(Bucket=s3_bucket, Key=str(stored[0].file.name), Body=b"not the image")
    out = io.StringIO()
    call_command("copy_media", "--all", "--to", "s3", stdout=out)
    assert out.getvalue().startswith(f"{n} images: 1 copied, {n - 1} already there, {n} checked")

    # Served from the bucket once the node switches, then back to a media folder that lost its files.
    settings.ARBITER_MEDIA_STORAGE = "s3"
    settings.STORAGES = {**settings.STORAGES, "default": settings.STORAGES["media_s3"]}
    client, urls, _ = _rater_images(rs.study)
    assert client.get(urls[0]).status_code == 200
    for s in stored:
        (media / str(s.file.name)).unlink()
    call_command("copy_media", rs.study.slug, "--to", "local", stdout=io.StringIO())
    for s in stored:
        data = (media / str(s.file.name)).read_bytes()
        assert hashlib.sha256(data).hexdigest() == s.sha256 and len(data) == s.size_bytes


def test_copy_media_refuses_a_missing_bucket_and_a_missing_study_in_one_line(s3_bucket, settings) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    with pytest.raises(CommandError) as missing_study:
        call_command("copy_media", "no-such-study", "--to", "s3")
    assert str(missing_study.value) == "no study with slug 'no-such-study'"
    settings.AWS_STORAGE_BUCKET_NAME = None
    with pytest.raises(CommandError) as unconfigured:
        call_command("copy_media", rs.study.slug, "--to", "s3")
    assert str(unconfigured.value).startswith("copying to or from the bucket needs AWS_STORAGE_BUCKET_NAME")
    settings.AWS_STORAGE_BUCKET_NAME = "arbiter-no-such-bucket"
    settings.STORAGES = {**settings.STORAGES}
    with pytest.raises(CommandError) as missing_bucket:
        call_command("copy_media", rs.study.slug, "--to", "s3")
    assert "the bucket 'arbiter-no-such-bucket' does not exist at http://127.0.0.1:" in str(missing_bucket.value)
    assert "\n" not in str(missing_bucket.value)


def test_an_import_fails_whole_when_the_bucket_goes_away(s3_media, s3_server, examples_dir) -> None:  # type: ignore[no-untyped-def]
    cleaned: list[int] = []

    def pause_after_two_images(stage: str, done: int | None, total: int | None) -> None:
        if stage == "cleaning images" and done is not None:
            cleaned.append(done)
            if done == 2:
                s3_server.pause()  # two images' objects are written; the next write cannot be

    token = progress._reporter.set(pause_after_two_images)
    try:
        with pytest.raises(MediaUnavailable):
            study_import_bundle(path=examples_dir / "bundle")
    finally:
        progress._reporter.reset(token)
        s3_server.resume()
    assert 2 in cleaned
    assert not Study.objects.exists() and not StoredImage.objects.exists()  # no row of the import is left
    # What the bucket kept is unreferenced content: opaque keys, reused by the next import.
    leftover = set(_assert_opaque(s3_server, s3_media)) if s3_server.keys(s3_media) else set()
    study = study_import_bundle(path=examples_dir / "bundle")
    assert leftover <= {str(s.file.name) for s in study_stored_images([study])}
    assert set(s3_server.keys(s3_media)) == {str(s.file.name) for s in study_stored_images([study])}


def test_the_storage_hands_out_no_url(s3_media) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotImplementedError):
        storages["default"].url("images/00/" + "0" * 64 + ".png")


def test_a_node_whose_bucket_is_missing_stops_at_start_with_one_line(s3_server) -> None:  # type: ignore[no-untyped-def]
    env = {
        **os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.production", "DJANGO_SECRET_KEY": "k" * 50,
        "ARBITER_MEDIA_STORAGE": "s3", "AWS_STORAGE_BUCKET_NAME": "arbiter-no-such-bucket",
        "AWS_S3_ENDPOINT_URL": s3_server.endpoint, "AWS_S3_REGION_NAME": "us-east-1",
        "AWS_ACCESS_KEY_ID": "arbiter-test", "AWS_SECRET_ACCESS_KEY": "arbiter-test-secret",
    }
    done = subprocess.run([sys.executable, "-c", "import config.wsgi"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("arbiter:")] == [
        f"arbiter: ARBITER_MEDIA_STORAGE=s3: the bucket 'arbiter-no-such-bucket' does not exist at {s3_server.endpoint}"
    ]


def test_blind_images_rebuilds_the_shown_images_from_originals_in_the_bucket(s3_media, s3_server, examples_dir) -> None:  # type: ignore[no-untyped-def]
    from annotation.services.display_images import study_images_blind

    study = study_import_bundle(path=examples_dir / "bundle")
    before = set(s3_server.keys(s3_media))
    result = study_images_blind(study=study)  # reads each original from the bucket, writes what is missing
    assert result.holders > 0 and result.changed == 0  # the import already made them: nothing changes
    assert set(s3_server.keys(s3_media)) == before
    from annotation.models import Page

    page = Page.objects.filter(study=study, neutralized_image__isnull=False).select_related("neutralized_image").first()
    assert page is not None and page.neutralized_image_id != page.original_image_id
    shown_key = str(page.neutralized_image.file.name)  # type: ignore[union-attr]
    s3_server.client().delete_object(Bucket=s3_media, Key=shown_key)  # a lost display image
    study_images_blind(study=study)
    assert set(s3_server.keys(s3_media)) == before  # rebuilt from the original, under the same key
    assert hashlib.sha256(_object(s3_server, s3_media, shown_key)).hexdigest() == page.neutralized_image.sha256  # type: ignore[union-attr]


def test_new_study_reads_a_manifest_whose_images_are_in_the_bucket_by_s3_and_http_urls(
    s3_media, s3_server, tmp_path  # type: ignore[no-untyped-def]
) -> None:
    """A manifest may name the bucket's objects as ``s3://bucket/key`` or by the URL the S3
    server serves them at (path style on the storage's endpoint); a URL of another host, or of
    another bucket, is refused in one line, and nothing is written."""
    from tests.annotation.test_new_study import png

    client = s3_server.client()
    for name, shade in (("refs/p0.png", 0), ("refs/p1.png", 10), ("gpt/p0.png", 40), ("gpt/p1.png", 50),
                        ("claude/p0.png", 80), ("claude/p1.png", 90)):
        client.put_object(Bucket=s3_media, Key=f"inbox/{name}", Body=png(tmp_path / "x.png", shade=shade).read_bytes())
    endpoint = s3_server.endpoint.rstrip("/")
    manifest = tmp_path / "manifest.csv"
    manifest.write_text(
        "page_id,reference_path,system,image_path\n"
        f"p0,s3://{s3_media}/inbox/refs/p0.png,gpt,s3://{s3_media}/inbox/gpt/p0.png\n"
        f"p0,s3://{s3_media}/inbox/refs/p0.png,claude,{endpoint}/{s3_media}/inbox/claude/p0.png\n"
        f"p1,{endpoint}/{s3_media}/inbox/refs/p1.png,gpt,{endpoint}/{s3_media}/inbox/gpt/p1.png?X-Amz-Signature=x\n"
        f"p1,{endpoint}/{s3_media}/inbox/refs/p1.png,claude,s3://{s3_media}/inbox/claude/p1.png\n"
    )
    out = io.StringIO()
    call_command("new_study", "pairwise_reference", "--manifest", str(manifest), "--slug", "from-bucket",
                 "--keep-bundle", str(tmp_path / "kept"), stdout=out, stderr=io.StringIO())
    study = Study.objects.get(slug="from-bucket")
    assert sorted(study.systems.values_list("name", flat=True)) == ["claude", "gpt"]
    assert Comparison.objects.filter(study=study).count() == 2
    # Every image came from the bucket, each its own object (six shades, six originals), and what
    # the import stored is in the bucket under opaque keys.
    originals = {c.image_id for c in Candidate.objects.filter(page__study=study)}
    originals |= {p.image_id for p in Page.objects.filter(study=study)}
    assert len(originals) == 6 and None not in originals
    kept = {k for k in s3_server.keys(s3_media) if not k.startswith("inbox/")}
    assert kept and all(KEY_RE.fullmatch(k) for k in kept)

    for wrong in (f"http://example.org/{s3_media}/inbox/gpt/p0.png", f"{endpoint}/other-bucket/inbox/gpt/p0.png"):
        manifest.write_text(f"page,reference,system,image\np0,s3://{s3_media}/inbox/refs/p0.png,gpt,{wrong}\n")
        with pytest.raises(CommandError) as failed:
            call_command("new_study", "pairwise_reference", "--manifest", str(manifest), "--slug", "refused",
                         stdout=io.StringIO(), stderr=io.StringIO())
        assert str(failed.value).startswith(f"{manifest}:2: {wrong}: only paths relative to the manifest, s3:// and")
        assert "\n" not in str(failed.value)
    assert not Study.objects.filter(slug="refused").exists()
