"""Bad study bundles (docs/protocol.md "Files", "Commands"): one line naming the problem, and nothing written.

Every case runs through ``import_study`` (CommandError = exit 1 with that line) and checks that the
row counts of every table and the recursive listing of MEDIA_ROOT are exactly as before.
"""

from __future__ import annotations

import shutil
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.errors import ValidationFailed
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.bundles.reference_format import study_spec_parse
from tests.annotation.test_bundles import copy_bundle, edit_doc, png_bytes, snapshot, zip_folder

Case = Callable[[Path, Path], Path]  # (writable example bundle, scratch dir) -> path to import


def _doc(change: Callable[[dict[str, Any]], None]) -> Case:
    return lambda bundle, scratch: edit_doc(bundle, change)


def _set(path: str, value: Any) -> Case:
    """Set a value by a dotted path with list indices: 'pages.0.targets.0.bbox_1000'."""

    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return _doc(change)


def _delete(path: str) -> Case:
    def change(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]

    return _doc(change)


def _bomb_png(width: int = 30_000, height: int = 30_000) -> bytes:
    """A real decompression bomb: a valid 1-bit PNG of width × height zero pixels (~110 kB)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    row = b"\x00" * (1 + (width + 7) // 8)
    compressor = zlib.compressobj(9)
    body = b"".join(compressor.compress(row) for _ in range(height)) + compressor.flush()
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def _write_image(name: str, data: bytes) -> Case:
    def case(bundle: Path, scratch: Path) -> Path:
        (bundle / name).write_bytes(data)
        return bundle

    return case


def _remove_image(name: str) -> Case:
    def case(bundle: Path, scratch: Path) -> Path:
        (bundle / name).unlink()
        return bundle

    return case


def _raw_json(text: str) -> Case:
    def case(bundle: Path, scratch: Path) -> Path:
        (bundle / "study.json").write_text(text)
        return bundle

    return case


def _zip_with(*extra: tuple[zipfile.ZipInfo | str, bytes]) -> Case:
    def case(bundle: Path, scratch: Path) -> Path:
        target = zip_folder(bundle, scratch / "bundle.zip")
        with zipfile.ZipFile(target, "a") as archive:
            for info, data in extra:
                archive.writestr(info, data)
        return target

    return case


def _symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("images/link.png")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def _empty_file(bundle: Path, scratch: Path) -> Path:
    target = scratch / "empty.zip"
    target.write_bytes(b"")
    return target


def _not_a_zip(bundle: Path, scratch: Path) -> Path:
    target = scratch / "bundle.zip"
    target.write_bytes(b"PK but not really a zip file at all")
    return target


def _lying_header(bundle: Path, scratch: Path) -> Path:
    """A ZIP whose central directory understates the size of study.json."""
    target = zip_folder(bundle, scratch / "bundle.zip")
    data = bytearray(target.read_bytes())
    true_size = (bundle / "study.json").stat().st_size
    central = data.rfind(b"PK\x01\x02", 0, data.find(b"study.json", data.find(b"PK\x01\x02")) + 1)
    # Uncompressed size sits at offset 24 of a central directory header.
    struct.pack_into("<I", data, central + 24, 100)
    assert struct.unpack_from("<I", data, central + 24)[0] != true_size
    target.write_bytes(bytes(data))
    return target


def _folder_symlink_out(bundle: Path, scratch: Path) -> Path:
    secret = scratch / "secret.png"
    secret.write_bytes(png_bytes())
    (bundle / "images" / "e00.png").unlink()
    (bundle / "images" / "e00.png").symlink_to(secret)
    return bundle


def _images_folder_symlink_out(bundle: Path, scratch: Path) -> Path:
    """The whole images/ folder as a link to a folder outside the bundle (folders are resolved once)."""
    outside = scratch / "outside-images"
    shutil.copytree(bundle / "images", outside)
    shutil.rmtree(bundle / "images")
    (bundle / "images").symlink_to(outside, target_is_directory=True)
    return bundle


def _add_comparison(**fields: Any) -> Case:
    return _doc(lambda d: d["comparisons"].append({"id": "c4", "page": "e00", "a": "alpha", "b": "gamma", "set": "human", **fields}))


def _comparison_without_id(doc: dict[str, Any]) -> None:
    del doc["comparisons"][0]["id"]


def _duplicate(section: str, index: int, **changes: Any) -> Case:
    return _doc(lambda d: d[section].append({**d[section][index], **changes}))


CASES: dict[str, tuple[Case, str]] = {
    # (how to break the example, the exact line or a fragment of it)
    "missing image": (_remove_image("images/e00-beta.png"),
                      "study.json $.candidates[1].image: no file 'images/e00-beta.png' in the bundle"),
    "unknown system": (_set("candidates.4.system", "delta"), "study.json $.candidates[4].system: unknown system 'delta'"),
    "unknown page in candidate": (_set("candidates.0.page", "e99"), "study.json $.candidates[0].page: unknown page 'e99'"),
    "comparison on a failed render": (_add_comparison(page="e02", a="alpha", b="gamma"),
                                      "study.json $.comparisons[3].b: system 'gamma' failed to render page 'e02'"),
    "duplicate page id": (_set("pages.1.id", "e00"), "study.json $.pages[1].id: duplicate page id 'e00' (first at $.pages[0])"),
    "duplicate system id": (_duplicate("systems", 0, name="Another"), "study.json $.systems[3].id: duplicate system id 'alpha'"),
    "duplicate axis id": (_duplicate("axes", 2), "study.json $.axes[3].id: duplicate axis id 'TABLE'"),
    "duplicate comparison id": (_add_comparison(id="c1"), "study.json $.comparisons[3].id: duplicate comparison id 'c1'"),
    "duplicate candidate": (_duplicate("candidates", 4),
                            "study.json $.candidates[9]: duplicate candidate for page 'e01' and system 'beta' (first at $.candidates[4])"),
    "reversed duplicate pair": (_add_comparison(id="c9", page="e00", a="beta", b="alpha"),
                                "study.json $.comparisons[3]: duplicate pair 'beta'/'alpha' on page 'e00'"),
    "same system twice": (_add_comparison(b="alpha"), "study.json $.comparisons[3].b: a comparison needs two different systems"),
    "comparison without id": (_doc(_comparison_without_id), "study.json $.comparisons[0].id: required key is missing"),
    "comparison of a missing candidate": (_doc(lambda d: d["candidates"].pop(0)),
                                          "study.json $.comparisons[0].a: system 'alpha' has no candidate for page 'e00'"),
    "bbox over 1000": (_set("pages.0.targets.0.bbox_1000", [66, 450, 1001, 650]),
                       "study.json $.pages[0].targets[0].bbox_1000[2]: 1001 is outside 0…1000"),
    "bbox negative": (_set("pages.0.media.0.bbox_1000", [-1, 450, 100, 650]),
                      "study.json $.pages[0].media[0].bbox_1000[0]: -1 is outside 0…1000"),
    "bbox x0 >= x1": (_set("candidates.0.media.0.bbox_1000", [600, 725, 600, 950]),
                      "study.json $.candidates[0].media[0].bbox_1000: x0 (600) must be less than x1 (600)"),
    "bbox of three numbers": (_set("pages.0.targets.0.bbox_1000", [1, 2, 3]),
                              "study.json $.pages[0].targets[0].bbox_1000: expected [x0, y0, x1, y1], got 3 numbers"),
    "bbox with a string": (_set("pages.0.targets.0.bbox_1000", [1, 2, "3", 4]),
                           "study.json $.pages[0].targets[0].bbox_1000[2]: expected a number, got a string"),
    "target unknown axis": (_set("pages.0.targets.0.axis", "CHART"), "study.json $.pages[0].targets[0].axis: unknown axis 'CHART'"),
    "unknown media kind": (_set("pages.0.media.0.kind", "video"), "study.json $.pages[0].media[0].kind: 'video' is not one of photo, chart"),
    "unknown block type": (_set("pages.0.blocks", [{"type": "banner", "bbox_1000": [0, 0, 10, 10]}]),
                           "study.json $.pages[0].blocks[0].type: 'banner' is not one of title, text, list, table, formula, figure"),
    "block box upside down": (_set("candidates.0.blocks", [{"type": "text", "bbox_1000": [0, 50, 10, 40]}]),
                              "study.json $.candidates[0].blocks[0].bbox_1000: y0 (50) must be less than y1 (40)"),
    "block with text": (_set("candidates.0.blocks", [{"type": "text", "bbox_1000": [0, 0, 10, 10], "text": "x"}]),
                        "study.json $.candidates[0].blocks[0].text: unknown key (expected: type, bbox_1000)"),
    "truncated png": (_write_image("images/e01-beta.png", png_bytes()[:70]), "images/e01-beta.png: the image cannot be decoded ("),
    "30000 x 30000 png": (_write_image("images/e02.png", _bomb_png()), "images/e02.png: the image is too large to decode safely"),
    "25000 px edge": (_write_image("images/e02.png", _bomb_png(25_000, 8)),
                      "images/e02.png: the image is too large: 25000 × 8 pixels"),
    "svg image": (_write_image("images/e00.png", b'<svg xmlns="http://www.w3.org/2000/svg"/>'),
                  "images/e00.png: not a PNG, JPEG or WebP image"),
    "empty image": (_write_image("images/e00.png", b""), "images/e00.png: the image file is empty"),
    "image path with ..": (_set("pages.0.image", "../outside.png"), "study.json $.pages[0].image: image path '../outside.png' contains '..'"),
    "absolute image path": (_set("pages.0.image", "/etc/passwd"), "study.json $.pages[0].image: image path '/etc/passwd' is absolute"),
    "folder symlink leading outside": (_folder_symlink_out, "study.json $.pages[0].image: no file 'images/e00.png' in the bundle"),
    "images folder linked outside": (_images_folder_symlink_out, "study.json $.pages[0].image: no file 'images/e00.png' in the bundle"),
    "zip entry ../x": (_zip_with(("../x", b"x")), "bundle.zip: '../x': unsafe ZIP entry: the path contains '..'"),
    "zip entry absolute": (_zip_with(("/etc/cron.d/x", b"x")), "unsafe ZIP entry: the path is absolute"),
    "zip symlink entry": (_zip_with((_symlink_entry(), b"/etc/passwd")), "bundle.zip: 'images/link.png': unsafe ZIP entry: a symbolic link"),
    "zip duplicate name": (_zip_with(("study.json", b"{}")), "bundle.zip: 'study.json': the ZIP holds this name twice"),
    "zip lying header": (_lying_header, "study.json: the ZIP entry"),
    "empty file": (_empty_file, "empty.zip: the bundle file is empty"),
    "not a zip": (_not_a_zip, "bundle.zip: not a ZIP file"),
    "empty study.json": (_raw_json(""), "study.json: the file is empty"),
    "malformed json": (_raw_json('{\n "slug": "x",\n "title" "y"\n}'), "study.json:3:10: malformed JSON: Expecting ':' delimiter"),
    "json not utf-8": (_raw_json("\udcff"), ""),
    "json duplicate key": (_raw_json('{"slug": "a", "slug": "b"}'), "study.json: duplicate key 'slug' in one object"),
    "json NaN": (_raw_json('{"slug": NaN}'), "study.json: malformed JSON: NaN is not valid JSON"),
    "top level array": (_raw_json("[]"), "study.json $: expected an object, got an array"),
    "title is a number": (_set("title", 5), "study.json $.title: expected a string, got a number"),
    "rendered is a string": (_set("candidates.0.rendered", "yes"), "study.json $.candidates[0].rendered: expected true or false, got a string"),
    "axes is an object": (_set("axes", {}), "study.json $.axes: expected an array, got an object"),
    "rendered candidate without image": (_set("candidates.0.image", None), "study.json $.candidates[0].image: expected a string, got null"),
    "failed render with an image": (_set("candidates.8.image", "images/e02.png"),
                                    "study.json $.candidates[8].image: a failed render (rendered: false) must have image null"),
    "missing required key": (_delete("pages.0.image"), "study.json $.pages[0].image: required key is missing"),
    "missing top-level key": (_delete("systems"), "study.json $.systems: required key is missing"),
    "unknown key": (_set("comparsions", []), "study.json $.comparsions: unknown key"),
    "bad scope": (_set("axes.0.scope", "sometimes"), "study.json $.axes[0].scope: 'sometimes' is not one of fixed, conditional"),
    "bad set": (_set("comparisons.0.set", "pilot"), "study.json $.comparisons[0].set: 'pilot' is not one of human, deployment"),
    "bad slug": (_set("slug", "a b"), "study.json $.slug: 'a b' is not a slug"),
    "reserved slug": (_set("slug", "import"), "study.json $.slug: 'import' is reserved"),
    "kind with foreign keys": (_set("kind", "rating"), "study.json $.axes: unknown key for kind 'rating'"),
    "unknown kind": (_set("kind", "survey"), "study.json $.kind: 'survey' is not one of"),
    "empty page id": (_set("pages.0.id", ""), "study.json $.pages[0].id: must not be empty"),
    "no systems": (_set("systems", []), "study.json $.systems: a study needs at least one system"),
}


def _assert_one_line(message: str, expected: str) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert expected in message, f"{message!r} does not contain {expected!r}"


@pytest.mark.django_db
@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize("name", list(CASES))
def test_bad_bundle_is_refused_with_one_line_and_nothing_written(
    name: str, tmp_path: Path, examples_dir: Path, researcher: Any
) -> None:
    build, expected = CASES[name]
    if name == "json not utf-8":
        bundle = copy_bundle(examples_dir, tmp_path / "bundle")
        (bundle / "study.json").write_bytes(b'{"slug": "\xff"}')
        target, expected = bundle, "study.json: not UTF-8 text (byte 10)"
    else:
        target = build(copy_bundle(examples_dir, tmp_path / "bundle"), tmp_path)
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(target))
    _assert_one_line(str(caught.value), expected)
    assert snapshot(media) == before
    # The service raises the same line to the web view and the API.
    with pytest.raises(ValidationFailed) as again:
        study_import_bundle(path=target, user=researcher)
    assert str(again.value) == str(caught.value)
    assert snapshot(media) == before


@pytest.mark.django_db
def test_existing_slug_is_refused_and_nothing_changes(examples_dir: Path) -> None:
    call_command("import_study", str(examples_dir / "bundle"))
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(examples_dir / "bundle"))
    assert str(caught.value) == "study.json $.slug: a study with slug 'example' already exists"
    assert snapshot(media) == before


@pytest.mark.django_db
def test_a_failure_while_writing_rows_removes_the_published_files(
    examples_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last step (audit row, after the files were published) fails: rows and files roll back."""
    from annotation.models import AuditEvent

    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)

    def explode(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr(AuditEvent.objects, "create", explode)
    with pytest.raises(RuntimeError):
        study_import_bundle(path=examples_dir / "bundle")
    assert snapshot(media) == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("setting", "value", "expected"),
    [
        ("ARBITER_BUNDLE_MAX_ENTRIES", 5, "bundle.zip: the ZIP has 12 entries, over the limit of 5"),
        ("ARBITER_BUNDLE_MAX_UNCOMPRESSED", 10_000, "bundle.zip: the ZIP would unpack to"),
        ("ARBITER_IMAGE_MAX_BYTES", 1_000, "images/e00.png: the file is 1,328 bytes, over the 1,000-byte limit"),
    ],
)
def test_zip_caps_are_checked_before_reading(
    setting: str, value: int, expected: str, tmp_path: Path, examples_dir: Path, settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = zip_folder(examples_dir / "bundle", tmp_path / "bundle.zip")
    setattr(settings, setting, value)
    opened: list[str] = []
    original_open = zipfile.ZipFile.open

    def spy(self: zipfile.ZipFile, name: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(getattr(name, "filename", name))
        return original_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    media = Path(settings.MEDIA_ROOT)
    before = snapshot(media)
    with pytest.raises(ValidationFailed) as caught:
        study_import_bundle(path=target)
    _assert_one_line(str(caught.value), expected)
    assert snapshot(media) == before
    if setting != "ARBITER_IMAGE_MAX_BYTES":
        assert opened == []  # refused from the central directory alone
    else:
        assert "images/e00.png" not in opened  # over its cap: never decompressed


def test_bomb_fixture_is_a_real_bomb() -> None:
    """The 30,000 × 30,000 PNG of the cases above is small on disk and huge decoded."""
    data = _bomb_png()
    assert len(data) < 300_000
    assert struct.unpack(">II", data[16:24]) == (30_000, 30_000)


def test_parser_errors_name_line_and_column() -> None:
    with pytest.raises(ValidationFailed) as caught:
        study_spec_parse(b'{\n  "slug": "x",\n  oops\n}')
    assert str(caught.value).startswith("study.json:3:3: malformed JSON")
