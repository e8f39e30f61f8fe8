"""The image files a new study is made of: read from this machine or from the media bucket
(``s3://``), probed for format, size and colour mode, and placed into the bundle unchanged."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Any

from django.conf import settings
from PIL import Image

from annotation.errors import ArbiterError, ValidationFailed
from annotation.images import ALLOWED_FORMATS
from annotation.services.bundles.images import read_capped
from annotation.services.new_study.plan import Probe, Source

# What the images new_study reads (annotation.images.ALLOWED_FORMATS) are called: any other file of
# a folder (notes.txt, a .DS_Store, a PDF) is a stray file, listed and left out.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
# HTML outputs (and references) are rendered first (annotation.render), then read as images.
HTML_SUFFIXES = (".html", ".htm")


def probe_source(source: Source) -> Probe:
    """Format, size and colour mode from the header (no pixels decoded)."""
    try:
        data = read_source(source)
    except ArbiterError as exc:
        return Probe(problem=str(exc))
    try:
        with Image.open(io.BytesIO(data), formats=ALLOWED_FORMATS) as image:
            return Probe(size=image.size, mode=image.mode)
    except Image.UnidentifiedImageError:
        return Probe(problem="not a PNG, JPEG or WebP image")
    except (OSError, SyntaxError, ValueError) as exc:
        return Probe(problem=f"the image cannot be read ({' '.join(str(exc).split())})")
    except Image.DecompressionBombError:
        return Probe(problem="the image is too large to decode safely")


def is_html(source: Source) -> bool:
    return source.suffix in HTML_SUFFIXES


def _s3_storage() -> Any:
    """The media storage when it is django-storages' S3 storage, else None."""
    from django.core.files.storage import default_storage

    try:
        from storages.backends.s3 import S3Storage
    except ImportError:
        return None
    storage = getattr(default_storage, "_wrapped", default_storage)
    if not hasattr(storage, "bucket_name"):
        default_storage._setup()  # type: ignore[attr-defined]
        storage = default_storage._wrapped  # type: ignore[attr-defined]
    return storage if isinstance(storage, S3Storage) else None


def bucket_url_as_s3(url: str) -> str:
    """``s3://bucket/key`` for an http(s) URL of an object in the media bucket, else "".

    The URL forms S3 and S3-compatible servers use for the bucket the media storage names: path
    style on the storage's endpoint (``http://127.0.0.1:9000/media/key``) or AWS's
    (``https://s3.eu-west-1.amazonaws.com/media/key``), virtual-host style
    (``https://media.s3.amazonaws.com/key``) and the storage's custom domain. Any query string (a
    presigned URL's signature) is dropped: the object is read with the storage's own credentials.
    """
    from urllib.parse import unquote, urlsplit

    storage = _s3_storage()
    if storage is None:
        return ""
    bucket = str(storage.bucket_name)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = f":{parts.port}" if parts.port else ""
    path = unquote(parts.path)
    endpoints = []
    if getattr(storage, "endpoint_url", None):
        endpoint = urlsplit(str(storage.endpoint_url))
        endpoints.append(((endpoint.hostname or "").lower(), f":{endpoint.port}" if endpoint.port else ""))
    region = getattr(storage, "region_name", None) or ""
    aws_hosts = ["s3.amazonaws.com"] + ([f"s3.{region}.amazonaws.com", f"s3-{region}.amazonaws.com"] if region else [])
    endpoints += [(aws, "") for aws in aws_hosts]
    key = ""
    for endpoint_host, endpoint_port in endpoints:
        if (host, port) == (endpoint_host, endpoint_port) and path.startswith(f"/{bucket}/"):
            key = path[len(bucket) + 2 :]
        elif (host, port) == (f"{bucket}.{endpoint_host}", endpoint_port):
            key = path[1:]
    custom = str(getattr(storage, "custom_domain", "") or "").lower()
    if custom and f"{host}{port}" == custom:
        key = path[1:]
    return f"s3://{bucket}/{key}" if key else ""


def s3_problem(url: str) -> str:
    storage = _s3_storage()
    if storage is None:
        return "s3:// paths are read through the media storage, and it is not S3 (configure S3 media storage, or download the files)"
    bucket = url[len("s3://") :].split("/", 1)[0]
    if bucket != storage.bucket_name:
        return f"only the media bucket {storage.bucket_name!r} is read, not {bucket!r}"
    return ""


def read_source(source: Source) -> bytes:
    limit = int(settings.ARBITER_IMAGE_MAX_BYTES)
    if source.path is not None:
        return read_capped(source.path, where=source.label, limit=limit)
    assert source.url is not None
    storage = _s3_storage()
    key = source.url[len("s3://") :].split("/", 1)[1] if "/" in source.url[len("s3://") :] else ""
    try:
        body = storage.bucket.Object(key).get()["Body"]
        data: bytes = body.read(limit + 1)
    except Exception as exc:  # botocore's errors: the object is missing or not readable
        raise ValidationFailed(f"cannot be read from S3 ({' '.join(str(exc).split())})", where=source.label) from None
    if len(data) > limit:
        raise ValidationFailed(f"the file is over the {limit:,}-byte limit", where=source.label)
    return data


def place_source(source: Source, target: Path) -> None:
    if source.path is not None:
        try:
            os.link(source.path, target)
            return
        except OSError:
            shutil.copyfile(source.path, target)
            return
    target.write_bytes(read_source(source))
