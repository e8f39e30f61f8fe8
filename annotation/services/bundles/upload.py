"""An uploaded bundle (web form and REST API): checked against the upload cap, then read from a
file on disk like a bundle given to the command.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings

from annotation.errors import ValidationFailed
from annotation.models import Study
from annotation.services.bundles.importing import study_import_bundle

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from django.core.files.uploadedfile import UploadedFile


def study_import_upload(*, upload: UploadedFile, user: AbstractBaseUser | AnonymousUser | None = None) -> Study:
    """Import an uploaded ``.zip`` bundle (web form and REST API). Same rules as the command."""
    return with_uploaded_bundle(upload, lambda path, name: study_import_bundle(path=path, user=user, label=name))


def with_uploaded_bundle[T](upload: UploadedFile, read: Callable[[Path, str], T]) -> T:
    """``read(path, name)`` of an uploaded bundle, within the upload size cap, from a file on disk."""
    name = os.path.basename(upload.name or "bundle.zip")
    limit = int(settings.ARBITER_MAX_UPLOAD_BYTES)
    if upload.size is not None and upload.size > limit:
        raise ValidationFailed(f"the upload is {upload.size:,} bytes, over the {limit:,}-byte limit", where=name)
    if upload.size == 0:
        raise ValidationFailed("the bundle file is empty", where=name)
    temporary_path = getattr(upload, "temporary_file_path", None)
    if temporary_path is not None:
        return read(Path(temporary_path()), name)
    with tempfile.NamedTemporaryFile(prefix="arbiter-bundle-", suffix=".zip") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
        handle.flush()
        return read(Path(handle.name), name)
