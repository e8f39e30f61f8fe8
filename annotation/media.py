"""Where stored images live: the local media folder or an S3-compatible bucket (README "Object storage").

Every read and write of a stored image goes through Django's storage API (``storages["default"]``,
chosen by ``ARBITER_MEDIA_STORAGE``): the upload's clean PNG, the shown and neutralized variants,
candidate versions, the judges' request building, the bundle export and the trial images. A key is
``images/<2 hex>/<sha256>.png`` (``annotation.images.CleanImage.relative_path``): it names the
content, never a system, page, candidate or uploaded file.

Two failures are told apart: an object that is not there (:class:`FileNotFoundError`, a 404 for a
rater) and a storage that cannot be reached (:class:`MediaUnavailable`, a 503 that clears by itself
once the bucket answers again).

A rater's image read from the bucket (``read_media(..., rater=True)``) is bounded so that a bucket
that hangs, rather than refuses, cannot take the web threads the rest of the site needs
(docs/deploy.md, "Losing a node"): one attempt with a short connect and read timeout
(``ARBITER_IMAGE_READ_TIMEOUT``), at most ``ARBITER_IMAGE_READS`` such reads at once per process
(a request finding them all taken waits up to ``ARBITER_IMAGE_READ_WAIT`` for one, else answers
503), and after a read that failed nobody waits:
a free slot asks the bucket again, every other request is a 503 at once, until a read succeeds.
Imports, exports and judge calls keep the storage's own, longer timeouts.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from django.conf import settings
from django.core.files.base import File
from django.core.files.storage import FileSystemStorage, Storage, storages

from annotation.errors import ArbiterError

# The body of an image request's 503 while the bucket cannot be reached (no key, no endpoint named).
MEDIA_UNAVAILABLE_TEXT = "The images cannot be loaded right now; try again in a moment.\n"


class MediaUnavailable(ArbiterError):
    """The media storage (the bucket) cannot be reached or refused the request: try again later."""

    status_code = 503


def media_storage() -> Storage:
    return storages["default"]


def media_is_local() -> bool:
    """The media folder on this machine (the fast image path then sends files with ``sendfile``)."""
    return isinstance(storages["default"], FileSystemStorage)


def unreachable(exc: BaseException) -> MediaUnavailable | None:
    """The storage error ``exc`` as :class:`MediaUnavailable`, or ``None`` when it is not one."""
    if type(exc).__module__.split(".")[0] not in ("botocore", "boto3", "s3transfer", "urllib3"):
        return None
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        error = response.get("Error", {})
        return MediaUnavailable(
            f"the media storage refused the request ({error.get('Code', '?')}: {error.get('Message', '')})"
        )
    return MediaUnavailable(f"the media storage cannot be reached ({' '.join(str(exc).split())})")


def _missing(exc: BaseException) -> bool:
    if isinstance(exc, FileNotFoundError):
        return True
    response = getattr(exc, "response", None)
    return isinstance(response, dict) and response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound")


@contextmanager
def _storage_errors(name: str) -> Iterator[None]:
    """A missing object as FileNotFoundError, an unreachable storage as :class:`MediaUnavailable`."""
    try:
        yield
    except MediaUnavailable:
        raise
    except Exception as exc:
        if _missing(exc):
            raise FileNotFoundError(name) from None
        problem = unreachable(exc)
        if problem is not None:
            raise problem from None
        raise


def open_media(name: str, storage: Storage | None = None) -> tuple[int, IO[bytes]]:
    """A stored image's size and an open binary handle (close it). On S3 one GET, streamed.

    Raises FileNotFoundError or :class:`MediaUnavailable`.
    """
    storage = storage or media_storage()
    with _storage_errors(name):
        if isinstance(storage, FileSystemStorage):
            handle: IO[bytes] = open(storage.path(name), "rb")  # noqa: SIM115  (the caller closes it)
            return os.fstat(handle.fileno()).st_size, handle
        open_sized = getattr(storage, "open_sized", None)
        if open_sized is not None:
            return open_sized(name)  # type: ignore[no-any-return]
        opened = storage.open(name, "rb")
        return int(opened.size), opened  # type: ignore[return-value]
    raise AssertionError("unreachable")  # pragma: no cover  (for mypy: the block returns or raises)


class _ReadGate:
    """The per-process bound on rater image reads from a remote storage (see the module docstring)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._semaphore = threading.BoundedSemaphore(slots)
        self._failing_until = 0.0

    @contextmanager
    def slot(self, *, wait: float, pause: float) -> Iterator[None]:
        """A slot for one read, or :class:`MediaUnavailable` when none frees in time.

        Every slot taken: wait up to ``wait`` for one (a read ends within its timeout). Within
        ``pause`` of a failed read, never wait: a free slot probes the bucket (the first success
        ends the pause), the rest are 503 at once, and so is a request whose wait ended in it.
        """
        if not self._semaphore.acquire(blocking=False):
            if time.monotonic() < self._failing_until or not self._semaphore.acquire(timeout=wait):
                raise MediaUnavailable(f"the media storage is slow: {self.slots} image read(s) of this process waiting")
            if time.monotonic() < self._failing_until:  # the read it waited for failed
                self._semaphore.release()
                raise MediaUnavailable("the media storage failed a moment ago and is being asked again")
        try:
            yield
        except MediaUnavailable:
            self._failing_until = time.monotonic() + pause
            raise
        else:
            self._failing_until = 0.0
        finally:
            self._semaphore.release()


_gate_lock = threading.Lock()
_gates: dict[int, _ReadGate] = {}
# The base storage -> (its timeout, the rater reads' copy of it): per storage instance, so tests
# that swap STORAGES get a fresh copy.
_rater_storages: weakref.WeakKeyDictionary[Storage, tuple[float, Storage]] = weakref.WeakKeyDictionary()


def _read_gate() -> _ReadGate:
    slots = max(1, int(settings.ARBITER_IMAGE_READS))
    with _gate_lock:
        return _gates.setdefault(slots, _ReadGate(slots))


def rater_image_storage(storage: Storage | None = None) -> Storage:
    """The media storage as a rater's image read uses it: on S3, a client of its own with one
    attempt and ``ARBITER_IMAGE_READ_TIMEOUT`` to connect and per read (the same bucket)."""
    storage = storage or media_storage()
    if getattr(storage, "open_sized", None) is None or getattr(storage, "rater_reads", False):
        return storage
    timeout = float(settings.ARBITER_IMAGE_READ_TIMEOUT)
    with _gate_lock:
        found = _rater_storages.get(storage)
        if found is None or found[0] != timeout:
            from botocore.config import Config

            config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": 1},
                            s3={"addressing_style": getattr(storage, "addressing_style", None) or "path"})
            raw = settings.STORAGES.get("default", {}).get("OPTIONS")
            options: dict[str, object] = dict(raw) if isinstance(raw, dict) else {}
            copy = type(storage)(**{**options, "client_config": config})
            copy.rater_reads = True  # type: ignore[attr-defined]
            found = _rater_storages[storage] = (timeout, copy)
        return found[1]


def read_media(name: str, storage: Storage | None = None, *, rater: bool = False) -> bytes:
    """A stored image's bytes. Raises FileNotFoundError or :class:`MediaUnavailable`.

    ``rater``: a rater's image request; from a remote storage the read is bounded in time and in
    number per process (the module docstring), and a stalled bucket is a prompt 503.
    """
    if rater:
        storage = rater_image_storage(storage)
        if not isinstance(storage, FileSystemStorage):
            timeout = float(settings.ARBITER_IMAGE_READ_TIMEOUT)
            with _read_gate().slot(wait=float(settings.ARBITER_IMAGE_READ_WAIT), pause=2 * timeout):
                return read_media(name, storage)
    _size, handle = open_media(name, storage)
    try:
        with _storage_errors(name):
            return handle.read()
    finally:
        handle.close()


def copy_media_to(name: str, target: IO[bytes], storage: Storage | None = None) -> None:
    """Stream a stored image into an open binary file (the bundle export)."""
    _size, handle = open_media(name, storage)
    try:
        with _storage_errors(name):
            shutil.copyfileobj(handle, target, 1024 * 1024)
    finally:
        handle.close()


def media_exists(name: str, storage: Storage | None = None) -> bool:
    storage = storage or media_storage()
    with _storage_errors(name):
        return bool(storage.exists(name))
    raise AssertionError("unreachable")  # pragma: no cover


def save_media(name: str, content: IO[bytes], storage: Storage | None = None) -> None:
    """Write an object under exactly ``name`` (keys are content hashes: an existing one is the same bytes)."""
    storage = storage or media_storage()
    with _storage_errors(name):
        if isinstance(storage, FileSystemStorage) and storage.exists(name):
            storage.delete(name)  # a damaged copy being replaced (copy_media)
        saved = storage.save(name, File(content, name=name))
        if saved != name:  # pragma: no cover  (a concurrent writer of the same content)
            storage.delete(saved)


def delete_media(name: str, storage: Storage | None = None) -> None:
    storage = storage or media_storage()
    with _storage_errors(name):
        storage.delete(name)


def media_digest(name: str, storage: Storage | None = None) -> tuple[int, str]:
    """Size and SHA-256 of a stored object, read back from the storage."""
    _size, handle = open_media(name, storage)
    digest = hashlib.sha256()
    size = 0
    try:
        with _storage_errors(name):
            while chunk := handle.read(1024 * 1024):
                digest.update(chunk)
                size += len(chunk)
    finally:
        handle.close()
    return size, digest.hexdigest()


def media_problem(storage: Storage | None = None) -> str:
    """Empty when the media storage answers; else a line saying why not (readiness, start-up check)."""
    storage = storage or media_storage()
    if isinstance(storage, FileSystemStorage):
        root = storage.location
        return "" if os.path.isdir(root) or not os.path.exists(root) else f"MEDIA_ROOT {root} is not a folder"
    bucket_problem = getattr(storage, "bucket_problem", None)
    return str(bucket_problem()) if bucket_problem is not None else ""
