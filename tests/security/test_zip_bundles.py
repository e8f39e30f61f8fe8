"""SECURITY.md row 5: malicious ZIP bundles through ``import_study`` and the upload API.

Every case must be refused with a one-line reason before anything is written (table counts and
the MEDIA_ROOT listing unchanged), and ``manage.py import_study`` must stay under 512 MB of peak
memory (``resource.getrusage`` of the child process) on the bombs and the 100,000-entry archive.

The bombs are built cheaply by hand (``raw_zip``) instead of compressing gigabytes:
- *overlap*: one 10 MiB deflate-of-zeros record (about 10 KB on disk) that 1,000 central-directory
  entries all point at: 10 GiB of honest inflation from about 80 KB;
- *declared*: a 1 KB archive whose headers claim 3 × 3.5 GB;
- *lying header*: an image entry whose headers claim 1,328 bytes while its deflate stream inflates
  to 200 MB (passes the declared-size check; must be caught while reading);
- *honest 200 MB* of zeros (~200 KB on disk), refused by a lowered ``ARBITER_BUNDLE_MAX_UNCOMPRESSED``
  and, with the default cap, by the per-image byte limit.
"""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import stat
import struct
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

ROOT = Path(__file__).resolve().parents[2]
PEAK_MEMORY_LIMIT_KB = 512 * 1024
MiB = 1024 * 1024


# --- helpers shared with test_uploads.py ------------------------------------------------------


def snapshot(media: Path) -> tuple[dict[str, int], list[str]]:
    """Row counts of every project table and every path under MEDIA_ROOT (``.staging`` included)."""
    counts = {
        model._meta.label: model.objects.count()
        for model in apps.get_models()
        if model._meta.app_label in {"annotation", "judges", "calibration", "ranking", "auth", "authtoken"}
    }
    files = sorted(p.relative_to(media).as_posix() for p in media.rglob("*")) if media.exists() else []
    return counts, files


def example_members(examples_dir: Path) -> list[tuple[str, bytes]]:
    bundle = examples_dir / "bundle"
    return [
        (p.relative_to(bundle).as_posix(), p.read_bytes()) for p in sorted(bundle.rglob("*")) if p.is_file()
    ]


def zip_with(target: Path, members: list[tuple[str | zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return target


@dataclass(frozen=True)
class RawMember:
    """One central-directory entry of a hand-made ZIP.

    ``payload`` is the stored (compressed) data; ``size`` and ``crc`` are what the headers claim.
    ``share`` names an earlier member whose local record this entry points at (overlap bombs).
    """

    name: str
    payload: bytes = b""
    size: int = 0
    crc: int = 0
    method: int = zipfile.ZIP_DEFLATED
    mode: int = 0o100644
    share: str | None = None


def raw_zip(target: Path, members: list[RawMember]) -> Path:
    """Write a ZIP byte by byte, trusting nothing: sizes, CRCs and offsets are taken as given."""
    out = io.BytesIO()
    offsets: dict[str, int] = {}
    for m in members:
        if m.share is not None:
            continue
        offsets[m.name] = out.tell()
        name = m.name.encode()
        out.write(
            struct.pack(
                "<4sHHHHHIIIHH",
                b"PK\x03\x04",
                20,
                0,
                m.method,
                0,
                0x21,
                m.crc,
                len(m.payload),
                m.size,
                len(name),
                0,
            )
        )
        out.write(name)
        out.write(m.payload)
    directory_start = out.tell()
    for m in members:
        owner = next(x for x in members if x.name == (m.share or m.name))
        name = m.name.encode()
        out.write(
            struct.pack(
                "<4sBBBBHHHHIIIHHHHHII",
                b"PK\x01\x02",
                20,
                3,
                20,
                0,
                0,
                m.method,
                0,
                0x21,
                m.crc,
                len(owner.payload),
                m.size,
                len(name),
                0,
                0,
                0,
                0,
                m.mode << 16,
                offsets[owner.name],
            )
        )
        out.write(name)
    directory_size = out.tell() - directory_start
    out.write(
        struct.pack(
            "<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(members), len(members), directory_size, directory_start, 0
        )
    )
    target.write_bytes(out.getvalue())
    return target


def deflated_zeros(n: int) -> tuple[bytes, int]:
    """Raw deflate of ``n`` zero bytes and their CRC-32, built a MiB at a time."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = bytes(MiB)
    parts: list[bytes] = []
    crc = 0
    left = n
    while left:
        piece = chunk[: min(left, MiB)]
        parts.append(compressor.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    parts.append(compressor.flush())
    return b"".join(parts), crc


def honest(name: str, data: bytes) -> RawMember:
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    return RawMember(name, compressor.compress(data) + compressor.flush(), len(data), zlib.crc32(data))


# --- the malicious bundles ---------------------------------------------------------------------

Builder = Callable[[Path, Path], Path]  # (examples_dir, scratch) -> bundle file


def _path_traversal(examples_dir: Path, scratch: Path) -> Path:
    return zip_with(scratch / "traversal.zip", [*example_members(examples_dir), ("../x", b"owned")])


def _nested_traversal(examples_dir: Path, scratch: Path) -> Path:
    return zip_with(
        scratch / "traversal.zip", [*example_members(examples_dir), ("images/../../../tmp/x", b"owned")]
    )


def _absolute(examples_dir: Path, scratch: Path) -> Path:
    return zip_with(
        scratch / "absolute.zip", [*example_members(examples_dir), ("/tmp/arbiter-owned", b"owned")]
    )


def _drive_letter(examples_dir: Path, scratch: Path) -> Path:
    return zip_with(scratch / "absolute.zip", [*example_members(examples_dir), ("C:/Windows/x", b"owned")])


def _backslash(examples_dir: Path, scratch: Path) -> Path:
    return zip_with(scratch / "backslash.zip", [*example_members(examples_dir), ("..\\x", b"owned")])


def _symlink(examples_dir: Path, scratch: Path) -> Path:
    """images/e00.png as a link to /etc/passwd: the entry the study names is the link itself."""
    members: list[tuple[str | zipfile.ZipInfo, bytes]] = [
        (name, data) for name, data in example_members(examples_dir) if name != "images/e00.png"
    ]
    link = zipfile.ZipInfo("images/e00.png")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    members.append((link, b"/etc/passwd"))
    return zip_with(scratch / "symlink.zip", members)


def _overlap_bomb(examples_dir: Path, scratch: Path) -> Path:
    """1,000 entries sharing one 10 MiB record: ~80 KB that inflates to 10 GiB."""
    payload, crc = deflated_zeros(10 * MiB)
    members = [honest(name, data) for name, data in example_members(examples_dir)]
    first = RawMember("images/zeros-0000.png", payload, 10 * MiB, crc)
    members.append(first)
    members += [
        RawMember(f"images/zeros-{i:04d}.png", payload, 10 * MiB, crc, share=first.name)
        for i in range(1, 1024)
    ]
    return raw_zip(scratch / "overlap-bomb.zip", members)


def _declared_bomb(examples_dir: Path, scratch: Path) -> Path:
    """About 1 KB of archive whose headers claim 10.5 GB."""
    empty = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = empty.compress(b"") + empty.flush()
    members = [honest("study.json", (examples_dir / "bundle" / "study.json").read_bytes())]
    members += [RawMember(f"images/huge-{i}.png", payload, 3_500_000_000, 0) for i in range(3)]
    return raw_zip(scratch / "declared-bomb.zip", members)


def _lying_header(examples_dir: Path, scratch: Path) -> Path:
    """images/e00.png claims 1,328 bytes; its stream inflates to 200 MB of zeros."""
    payload, _ = deflated_zeros(200 * MiB)
    members = [honest(name, data) for name, data in example_members(examples_dir) if name != "images/e00.png"]
    members.append(RawMember("images/e00.png", payload, 1328, 0x12345678))
    return raw_zip(scratch / "lying-header.zip", members)


def _honest_200mb_image(examples_dir: Path, scratch: Path) -> Path:
    """images/e00.png is honestly 200 MB of zeros (~200 KB compressed)."""
    payload, crc = deflated_zeros(200 * MiB)
    members = [honest(name, data) for name, data in example_members(examples_dir) if name != "images/e00.png"]
    members.append(RawMember("images/e00.png", payload, 200 * MiB, crc))
    return raw_zip(scratch / "zeros-200mb.zip", members)


def _nested_zip(examples_dir: Path, scratch: Path) -> Path:
    """A ZIP bomb inside the bundle in place of an image: never unpacked, refused as not an image."""
    inner = _overlap_bomb(examples_dir, scratch).read_bytes()
    members = [(name, data) for name, data in example_members(examples_dir) if name != "images/e00.png"]
    return zip_with(scratch / "nested.zip", [*members, ("images/e00.png", inner)])


def _many_entries(examples_dir: Path, scratch: Path) -> Path:
    """100,000 entries (ZIP64 end record), about 10 MB."""
    target = scratch / "many-entries.zip"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in example_members(examples_dir):
            archive.writestr(name, data)
        for i in range(100_000):
            archive.writestr(f"images/pad/{i:06d}.png", b"")
    return target


def _json_bomb(examples_dir: Path, scratch: Path) -> Path:
    """A 64 KB archive whose 64 MB study.json (under the 64 MiB cap) is 22 million empty objects.

    Only run in a child process: parsed naively it costs about 2 GB.
    """
    count = (64 * MiB - 10) // 3
    body = b"[" + b"{}," * (count - 1) + b"{}]"
    with zipfile.ZipFile(
        scratch / "json-bomb.zip", "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9
    ) as archive:
        archive.writestr("study.json", body)
    return scratch / "json-bomb.zip"


# name -> (builder, fragment of the one-line refusal)
CASES: dict[str, tuple[Builder, str]] = {
    "dotdot": (_path_traversal, "'../x': unsafe ZIP entry: the path contains '..'"),
    "nested-dotdot": (_nested_traversal, "unsafe ZIP entry: the path contains '..'"),
    "absolute": (_absolute, "'/tmp/arbiter-owned': unsafe ZIP entry: the path is absolute"),
    "drive-letter": (_drive_letter, "unsafe ZIP entry: the path is absolute"),
    "backslash": (_backslash, "unsafe ZIP entry: the path contains a backslash"),
    "symlink": (_symlink, "'images/e00.png': unsafe ZIP entry: a symbolic link"),
    "overlap-bomb-10GiB": (_overlap_bomb, "the ZIP would unpack to 10,737,"),
    "declared-bomb-10GB": (_declared_bomb, "the ZIP would unpack to 10,500,"),
    "lying-header-200MB": (_lying_header, "images/e00.png: the ZIP entry"),
    "zeros-200MB-image": (_honest_200mb_image, "images/e00.png: the file is 209,715,200 bytes, over the"),
    "nested-zip": (_nested_zip, "images/e00.png: not a PNG, JPEG or WebP image"),
    "100k-entries": (_many_entries, "the ZIP has 100,0"),
}
MEMORY_CASES = (
    "overlap-bomb-10GiB",
    "declared-bomb-10GB",
    "lying-header-200MB",
    "zeros-200MB-image",
    "100k-entries",
)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    folder = tmp_path / "scratch"
    folder.mkdir()
    return folder


@pytest.mark.same_on_any_database  # reads the bombs, no database
def test_the_bombs_are_real_bombs(examples_dir: Path, scratch: Path) -> None:
    """The hand-made archives are what they claim: small on disk, huge when inflated."""
    overlap = _overlap_bomb(examples_dir, scratch)
    assert overlap.stat().st_size < 120_000
    with zipfile.ZipFile(overlap) as archive:
        infos = archive.infolist()
        assert sum(i.file_size for i in infos) > 10 * 1024**3
        # Each shared entry really inflates to 10 MiB (read one, through its own local header).
        with archive.open("images/zeros-0000.png") as member:
            assert len(member.read()) == 10 * MiB
    declared = _declared_bomb(examples_dir, scratch)
    assert declared.stat().st_size < 4_000
    lying = _lying_header(examples_dir, scratch)
    assert lying.stat().st_size < 400_000
    inflated = zlib.decompressobj(-15)
    with zipfile.ZipFile(lying) as archive:
        info = archive.getinfo("images/e00.png")
        assert info.file_size == 1328
    raw = lying.read_bytes()
    start = raw.index(b"images/e00.png") + len("images/e00.png")
    total = 0
    stream = raw[start:]
    while stream and not inflated.eof:
        total += len(inflated.decompress(stream, 64 * MiB))
        stream = inflated.unconsumed_tail
    assert total == 200 * MiB
    with zipfile.ZipFile(_many_entries(examples_dir, scratch)) as archive:
        assert len(archive.infolist()) > 100_000


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CASES))
def test_import_study_command_refuses_and_writes_nothing(
    case: str, examples_dir: Path, scratch: Path, _media_root: Path
) -> None:
    builder, fragment = CASES[case]
    bundle = builder(examples_dir, scratch)
    before = snapshot(_media_root)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(bundle))
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message and "Traceback" not in message
    assert snapshot(_media_root) == before
    assert not Path("/tmp/arbiter-owned").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("case", list(CASES))
def test_upload_api_refuses_with_400_and_writes_nothing(
    case: str, examples_dir: Path, scratch: Path, _media_root: Path, researcher: object
) -> None:
    builder, fragment = CASES[case]
    bundle = builder(examples_dir, scratch)
    client = Client()
    client.force_login(researcher)  # type: ignore[arg-type]
    before = snapshot(_media_root)
    with bundle.open("rb") as handle:
        response = client.post("/api/studies/import/", {"file": handle})
    assert response.status_code == 400, response.content[:300]
    detail = response.json()["detail"]
    assert fragment in detail
    # Names the uploaded file or the entry, never a temporary path on the server.
    assert "arbiter-bundle-" not in detail and "pytest-of" not in detail and str(scratch) not in detail
    assert snapshot(_media_root) == before


@pytest.mark.django_db
@pytest.mark.parametrize("outside", ["/etc/passwd", "../../secret.png"])
def test_folder_bundle_link_leading_outside_is_refused(
    outside: str, examples_dir: Path, tmp_path: Path, _media_root: Path
) -> None:
    """The folder form of a bundle: ``images/e00.png`` as a symbolic link out of the bundle."""
    bundle = tmp_path / "folder-bundle"
    shutil.copytree(examples_dir / "bundle", bundle)
    for path in [bundle, *bundle.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    secret = tmp_path / "secret.png"
    secret.write_bytes((examples_dir / "bundle" / "images" / "e00.png").read_bytes())
    (bundle / "images" / "e00.png").unlink()
    (bundle / "images" / "e00.png").symlink_to(outside if outside.startswith("/") else secret)
    before = snapshot(_media_root)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(bundle))
    assert "no file 'images/e00.png' in the bundle" in str(caught.value)
    assert snapshot(_media_root) == before


@pytest.mark.django_db
def test_web_upload_form_refuses_a_bomb_with_a_message(
    examples_dir: Path, scratch: Path, _media_root: Path, researcher: object
) -> None:
    bundle = _overlap_bomb(examples_dir, scratch)
    client = Client()
    client.force_login(researcher)  # type: ignore[arg-type]
    before = snapshot(_media_root)
    with bundle.open("rb") as handle:
        response = client.post("/studies/import/", {"bundle": handle})
    assert response.status_code == 400
    assert b"the ZIP would unpack to" in response.content
    assert snapshot(_media_root) == before


# --- peak memory of `manage.py import_study` in a child process --------------------------------

MEASURE = (
    "import resource, subprocess, sys\n"
    "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stdout.write(done.stdout)\n"
    "sys.stderr.write(done.stderr)\n"
    "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    "sys.exit(done.returncode)\n"
)


@dataclass(frozen=True)
class ImportRun:
    returncode: int
    stdout: str
    stderr: str
    peak_kb: int


@pytest.fixture(scope="module")
def migrated_sqlite(
    tmp_path_factory: pytest.TempPathFactory, django_db_setup: None, django_db_blocker: object
) -> Path:
    """A migrated SQLite file for the child processes (copied from the test database)."""
    path = tmp_path_factory.mktemp("childdb") / "template.sqlite3"
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        if connection.vendor == "sqlite":
            connection.ensure_connection()
            target = sqlite3.connect(path)
            connection.connection.backup(target)
            target.close()
        else:
            env = {
                **os.environ,
                "DJANGO_SETTINGS_MODULE": "config.settings.test",
                "DATABASE_URL": f"sqlite:///{path}",
            }
            subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return path


@pytest.fixture
def child_env(migrated_sqlite: Path, tmp_path: Path) -> Iterator[tuple[dict[str, str], Path, Path]]:
    database = tmp_path / "child.sqlite3"
    database.write_bytes(migrated_sqlite.read_bytes())
    media = tmp_path / "child-media"
    media.mkdir()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": f"sqlite:///{database}",
        "MEDIA_ROOT": str(media),
    }
    yield env, database, media


def run_import_study(env: dict[str, str], bundle: Path) -> ImportRun:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "manage.py", "import_study", str(bundle)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("MAXRSS_KB "), done.stdout + done.stderr
    return ImportRun(done.returncode, "\n".join(lines[:-1]), done.stderr, int(lines[-1].split()[1]))


def child_rows(database: Path) -> dict[str, int]:
    with sqlite3.connect(database) as db:
        tables = [
            "annotation_study",
            "annotation_page",
            "annotation_system",
            "annotation_candidate",
            "annotation_comparison",
            "annotation_storedimage",
            "annotation_auditevent",
        ]
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


@pytest.mark.slow
@pytest.mark.same_on_any_database  # the child runs on a SQLite file of its own
def test_child_import_of_a_good_bundle_succeeds(
    child_env: tuple[dict[str, str], Path, Path], examples_dir: Path, scratch: Path
) -> None:
    """Control: the child-process set-up imports the protocol example, so the refusals below mean
    something."""
    env, database, media = child_env
    bundle = zip_with(scratch / "good.zip", list(example_members(examples_dir)))
    run = run_import_study(env, bundle)
    print(f"import_study good bundle: exit {run.returncode}, peak {run.peak_kb / 1024:.0f} MB")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "example"
    assert child_rows(database)["annotation_study"] == 1
    assert any(media.rglob("*.png"))
    assert run.peak_kb < PEAK_MEMORY_LIMIT_KB


@pytest.mark.slow
@pytest.mark.same_on_any_database  # the child runs on a SQLite file of its own
@pytest.mark.parametrize("case", MEMORY_CASES)
def test_child_import_study_refuses_bombs_under_512_mb(
    case: str, child_env: tuple[dict[str, str], Path, Path], examples_dir: Path, scratch: Path
) -> None:
    env, database, media = child_env
    builder, fragment = CASES[case]
    bundle = builder(examples_dir, scratch)
    rows_before = child_rows(database)
    run = run_import_study(env, bundle)
    print(f"import_study {case}: exit {run.returncode}, peak {run.peak_kb / 1024:.0f} MB")
    assert run.returncode == 1, run.stdout + run.stderr
    error_lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(error_lines) == 1 and fragment in error_lines[0], run.stderr
    assert run.peak_kb < PEAK_MEMORY_LIMIT_KB, f"peak {run.peak_kb / 1024:.0f} MB"
    assert child_rows(database) == rows_before
    assert sorted(media.rglob("*")) == []


@pytest.mark.slow
@pytest.mark.same_on_any_database  # the child runs on a SQLite file of its own
def test_child_import_refuses_a_json_bomb_under_512_mb(
    child_env: tuple[dict[str, str], Path, Path], examples_dir: Path, scratch: Path
) -> None:
    """study.json within its byte cap but made of millions of tiny objects: refused, under 512 MB."""
    env, database, media = child_env
    bundle = _json_bomb(examples_dir, scratch)
    assert bundle.stat().st_size < 100_000
    run = run_import_study(env, bundle)
    print(f"import_study json-bomb: exit {run.returncode}, peak {run.peak_kb / 1024:.0f} MB")
    assert run.returncode == 1
    assert "study.json" in run.stderr
    assert run.peak_kb < PEAK_MEMORY_LIMIT_KB, f"peak {run.peak_kb / 1024:.0f} MB"
    assert child_rows(database)["annotation_study"] == 0
    assert sorted(media.rglob("*")) == []


@pytest.mark.slow
@pytest.mark.same_on_any_database  # the child runs on a SQLite file of its own
def test_child_import_refuses_honest_200mb_over_a_lowered_cap(
    child_env: tuple[dict[str, str], Path, Path], examples_dir: Path, scratch: Path
) -> None:
    """The declared-size cap is configurable; 200 MB of zeros (~200 KB on disk) over a 100 MB cap."""
    env, database, media = child_env
    env = {**env, "ARBITER_BUNDLE_MAX_UNCOMPRESSED": str(100 * MiB)}
    bundle = _honest_200mb_image(examples_dir, scratch)
    assert bundle.stat().st_size < 400_000
    run = run_import_study(env, bundle)
    print(f"import_study 200 MB over a 100 MB cap: exit {run.returncode}, peak {run.peak_kb / 1024:.0f} MB")
    assert run.returncode == 1
    assert "the ZIP would unpack to 209,7" in run.stderr and "over the limit of 104,857,600" in run.stderr
    assert run.peak_kb < PEAK_MEMORY_LIMIT_KB
    assert child_rows(database)["annotation_study"] == 0
    assert sorted(media.rglob("*")) == []


@pytest.mark.slow
@pytest.mark.same_on_any_database  # the child runs on a SQLite file of its own
def test_child_import_of_an_in_limit_60_megapixel_page_stays_under_512_mb(
    child_env: tuple[dict[str, str], Path, Path], examples_dir: Path, scratch: Path
) -> None:
    """A bundle can be small and still pixel-heavy: one solid 7,745 × 7,745 page (under the 60 MP
    and 20,000 px limits, 0.8 MB as PNG) with a media region. Importing it must not cost more than
    the 512 MB the bombs are held to."""
    from PIL import Image

    env, database, _ = child_env
    buffer = io.BytesIO()
    Image.new("RGB", (7745, 7745), (200, 30, 40)).save(buffer, format="PNG", compress_level=1)
    members = [(name, data) for name, data in example_members(examples_dir) if name != "images/e00.png"]
    bundle = zip_with(scratch / "pixel-heavy.zip", [*members, ("images/e00.png", buffer.getvalue())])
    run = run_import_study(env, bundle)
    print(f"import_study pixel-heavy: exit {run.returncode}, peak {run.peak_kb / 1024:.0f} MB")
    assert run.returncode == 0, run.stderr
    assert child_rows(database)["annotation_study"] == 1
    assert run.peak_kb < PEAK_MEMORY_LIMIT_KB, f"peak {run.peak_kb / 1024:.0f} MB"
