"""Where stored images live: the local media folder or an S3-compatible bucket (README "Object storage").

Every read and write of a stored image goes through Django's storage API (``storages["default"]``,
chosen by ``ARBITER_MEDIA_STORAGE``): the upload's clean PNG, the shown and neutralized variants,
candidate versions, the judges' request building, the bundle export and the trial images. A key is
``images/<2 hex>/<sha256>.png`` (``annotation.images.CleanImage.relative_path``): it names the
content, never a system, page, candidate or uploaded file.

Two failures are told apart: an object that is not there (:class:`FileNotFoundError`, a 404 for a
rater) and a storage that cannot be reached (:class:`MediaUnavailable`, a 503 that clears by itself
once the bucket answers again).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

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


def read_media(name: str, storage: Storage | None = None) -> bytes:
    """A stored image's bytes. Raises FileNotFoundError or :class:`MediaUnavailable`."""
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
