"""``new_study`` by upload reads only what was uploaded (SECURITY.md row 29; issue 37 item 1).

The ``manifest`` and ``reference`` fields of ``POST /api/studies/new/`` and of the ``/studies/new/``
form once named any path on the server: an absolute path replaced the upload's folder and ``../``
climbed out of it, and the error echoed the file (``/proc/self/environ``: the secret key, the
database password, the API keys). Each attack here goes to a real gunicorn (the settings ``make
run`` uses) whose environment holds a random marker; the marker, the files' contents and the
listings of the named folders must never come back, and nothing may be created.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.http_servers import free_port, wait_until_serving

pytestmark = [pytest.mark.slow, pytest.mark.same_on_any_database]  # a gunicorn on its own SQLite file

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "pw-arbiter-123"
MARKER = f"arbiter-marker-{secrets.token_hex(12)}"
SECRET = f"secret-key-{secrets.token_hex(24)}"


def _png(size: tuple[int, int] = (60, 80), shade: int = 0) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (shade, shade, shade)).save(buffer, format="PNG")
    return buffer.getvalue()


def _zip(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# An honest upload: references and two systems' folders.
FOLDERS = _zip({
    **{f"refs/p{i}.png": _png(shade=i) for i in range(3)},
    **{f"gpt/p{i}.png": _png(shade=10 + i) for i in range(3)},
    **{f"claude/p{i}.png": _png(shade=20 + i) for i in range(3)},
})


class Server:
    """A real gunicorn on a migrated SQLite file, with the marker in its environment, and a
    researcher's API token and logged-in browser session."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "config.settings.local",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": SECRET,
            "ARBITER_TEST_MARKER": MARKER,
            "DATABASE_URL": f"sqlite:///{home / 'site.sqlite3'}",
            "MEDIA_ROOT": str(home / "media"),
            "ARBITER_BUNDLE_ARCHIVE": str(home / "bundles"),
        }
        for name in ("CACHE_URL", "CELERY_BROKER_URL"):
            self.env.pop(name, None)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=self.env, check=True)
        code = (
            "from django.contrib.auth import get_user_model; from django.contrib.auth.models import Group;"
            "from annotation.roles import ensure_groups; ensure_groups();"
            f"u = get_user_model().objects.create_user('rita', password={PASSWORD!r});"
            "u.groups.add(Group.objects.get(name='researcher'))"
        )
        subprocess.run([sys.executable, "manage.py", "shell", "--no-imports", "-c", code], cwd=ROOT, env=self.env, check=True)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "-b", f"127.0.0.1:{port}",
             "--workers", "1", "--threads", "2", "--log-level", "warning", "config.wsgi:application"],
            cwd=ROOT, env=self.env, start_new_session=True,
        )  # fmt: skip
        wait_until_serving(f"{self.url}/accounts/login/", self.process)
        answer = httpx.post(f"{self.url}/api/auth/token/", data={"username": "rita", "password": PASSWORD}, timeout=30)
        assert answer.status_code == 200, answer.text
        self.token = answer.json()["token"]
        self.browser = httpx.Client(base_url=self.url, timeout=60)
        login = self.browser.get("/accounts/login/")
        done = self.browser.post(
            "/accounts/login/",
            data={"username": "rita", "password": PASSWORD, "csrfmiddlewaretoken": _csrf(login.text)},
            headers={"Referer": f"{self.url}/accounts/login/"},
        )
        assert done.status_code == 302, done.text

    def api(self, archive: bytes, **fields: str) -> httpx.Response:
        return httpx.post(
            f"{self.url}/api/studies/new/",
            headers={"Authorization": f"Token {self.token}"},
            data={"kind": "pairwise_reference", **fields},
            files={"file": ("upload.zip", archive, "application/zip")},
            timeout=60,
        )

    def form(self, archive: bytes, **fields: str) -> httpx.Response:
        page = self.browser.get("/studies/new/")
        assert page.status_code == 200
        return self.browser.post(
            "/studies/new/",
            data={"kind": "pairwise_reference", "csrfmiddlewaretoken": _csrf(page.text), **fields},
            files={"archive": ("upload.zip", archive, "application/zip")},
            headers={"Referer": f"{self.url}/studies/new/"},
        )

    def studies(self) -> int:
        answer = httpx.get(f"{self.url}/api/studies/", headers={"Authorization": f"Token {self.token}"}, timeout=30)
        assert answer.status_code == 200
        return int(answer.json()["count"])

    def stop(self) -> None:
        self.browser.close()
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _csrf(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, "no CSRF token on the page"
    return found.group(1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    site = Server(tmp_path_factory.mktemp("new-study-paths"))
    yield site
    site.stop()


@pytest.fixture(scope="module")
def server_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the server's own images that no upload contains."""
    folder = tmp_path_factory.mktemp("server-images")
    for i in range(3):
        (folder / f"p{i}.png").write_bytes(_png(shade=200 + i))
    (folder / f"{MARKER}.png").write_bytes(_png(shade=250))
    return folder


def _first_line(path: str) -> str:
    return Path(path).read_text().splitlines()[0]


def _assert_nothing_leaked(answer: httpx.Response, *secrets_: str) -> None:
    assert answer.status_code < 500, answer.text
    body = answer.text
    for secret in (MARKER, SECRET, *secrets_):
        assert secret not in body, f"{secret[:12]}… came back in the answer"
    assert "DJANGO_SECRET_KEY" not in body and "DATABASE_URL" not in body


WAYS = ("api", "form")


def _send(server: Server, way: str, archive: bytes, **fields: str) -> httpx.Response:
    """The upload, then what the researcher sees once its run ends (the run's JSON, or its page):
    400 when it failed, 200 otherwise. The run is made in the server's background queue."""
    answer = server.api(archive, **fields) if way == "api" else server.form(archive, **fields)
    if way == "api" and answer.status_code == 202:
        url, headers = answer.json()["url"], {"Authorization": f"Token {server.token}"}
        get = lambda: httpx.get(f"{server.url}{url}", headers=headers, timeout=30)  # noqa: E731
    elif way == "form" and answer.status_code == 302 and "/studies/new/runs/" in answer.headers["Location"]:
        url = answer.headers["Location"]
        get = lambda: server.browser.get(url)  # noqa: E731
    else:
        return answer
    deadline = time.monotonic() + 60
    while True:
        seen = get()
        status = seen.json()["status"] if way == "api" else re.search(r'data-status="(\w+)"', seen.text)[1]
        if status not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return httpx.Response(400 if status == "failed" else 200, text=seen.text)


@pytest.mark.parametrize("way", WAYS)
def test_the_process_environment_is_not_read_as_a_manifest(server: Server, way: str) -> None:
    answer = _send(server, way, FOLDERS, manifest="/proc/self/environ", dry_run="1")
    assert answer.status_code == 400
    assert "manifest" in answer.text and "must name a path inside the uploaded .zip" in answer.text
    _assert_nothing_leaked(answer)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("manifest", ["/etc/passwd", "../../../../etc/hostname", "refs/../../../../etc/passwd"])
def test_server_files_are_not_read_as_a_manifest(server: Server, way: str, manifest: str) -> None:
    answer = _send(server, way, FOLDERS, manifest=manifest, dry_run="1")
    assert answer.status_code == 400
    assert "must name a path inside the uploaded .zip" in answer.text
    _assert_nothing_leaked(answer, _first_line("/etc/passwd"), *([_first_line("/etc/hostname")] if len(_first_line("/etc/hostname")) > 3 else []))


@pytest.mark.parametrize("way", WAYS)
def test_a_server_folder_is_not_listed_as_the_references(server: Server, way: str) -> None:
    answer = _send(server, way, FOLDERS, reference="/etc", dry_run="1")
    assert answer.status_code == 400
    assert "reference" in answer.text and "must name a path inside the uploaded .zip" in answer.text
    _assert_nothing_leaked(answer, "passwd", "hostname")


@pytest.mark.parametrize("way", WAYS)
def test_a_real_run_never_makes_a_study_of_the_servers_images(server: Server, server_folder: Path, way: str) -> None:
    before = server.studies()
    for reference in (str(server_folder), f"../../../../../../..{server_folder}"):
        answer = _send(server, way, FOLDERS, reference=reference, options=f'{{"slug": "leak-{way}-{secrets.token_hex(3)}"}}')
        assert answer.status_code == 400, answer.text
        # The folder holds an image named after the marker: a listing of it would show the marker.
        _assert_nothing_leaked(answer)
    assert server.studies() == before


@pytest.mark.parametrize("way", WAYS)
def test_an_uploaded_manifests_content_comes_back_only_as_a_short_escaped_piece(server: Server, way: str) -> None:
    """A manifest inside the upload whose header is a long unknown column: the column is named by
    its first characters, never the whole header line."""
    header = "x" * 30 + MARKER
    archive = _zip({"m.csv": f"page,{header}\np0,1\n".encode(), "refs/p0.png": _png()})
    answer = _send(server, way, archive, manifest="m.csv", dry_run="1")
    assert answer.status_code == 400
    assert "unknown column" in answer.text and "…" in answer.text
    _assert_nothing_leaked(answer)


@pytest.mark.parametrize("way", WAYS)
def test_names_inside_the_upload_still_work(server: Server, way: str) -> None:
    """Control: the same fields naming what was uploaded are read as before."""
    archive = _zip({
        "sub/m.csv": b"page,reference,system,image\np0,refs/p0.png,gpt,gpt/p0.png\np0,refs/p0.png,claude,claude/p0.png\n",
        "sub/refs/p0.png": _png(), "sub/gpt/p0.png": _png(shade=9), "sub/claude/p0.png": _png(shade=19),
    })  # fmt: skip
    answer = _send(server, way, archive, manifest="sub/m.csv", dry_run="1", options='{"slug": "inside"}')
    assert answer.status_code == 200, answer.text
    assert "a real run would import this" in answer.text
    answer = _send(server, way, FOLDERS, reference="refs", dry_run="1")
    assert answer.status_code == 200, answer.text
    assert "system gpt: 3 images" in answer.text and "system claude: 3 images" in answer.text


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("pattern", [r"^(a+)+$", r"^(a|aa)+$", r"^(a|a?)+$"])
def test_a_pathological_pattern_answers_within_seconds(server: Server, way: str, pattern: str) -> None:
    """Issue 37 item 2: ``^(a+)+$`` over ``aaaa…a!.png`` held a worker until gunicorn killed it."""
    names = [f"{'a' * n}!.png" for n in range(28, 35)]
    archive = _zip({**{f"refs/{n}": _png() for n in names}, **{f"gpt/{n}": _png(shade=5) for n in names}})
    started = time.monotonic()
    answer = _send(server, way, archive, reference="refs", match=pattern, dry_run="1", options='{"slug": "slow"}')
    elapsed = time.monotonic() - started
    assert answer.status_code < 500 and elapsed < 5, (answer.status_code, elapsed)
    # The server is free at once for the next request.
    assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
