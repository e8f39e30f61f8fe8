"""Copy a study's stored images between the media folder and the bucket, checking every object
(``manage.py copy_media``; README "Object storage").

Each object is read from the source, checked against its row (size and SHA-256: the key is the
hash of the bytes), written to the target unless an intact copy is there, and read back from the
target and checked again. Nothing is deleted from the source: switch ``ARBITER_MEDIA_STORAGE``
once the copy reports every object checked.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable
from dataclasses import dataclass

from django.core.files.storage import Storage, storages
from django.db.models import Q

from annotation.errors import ArbiterError
from annotation.media import media_digest, media_exists, read_media, save_media
from annotation.models import Candidate, CandidateVersion, Page, StoredImage, Study
from annotation.progress import progress_step

STORAGE_OF = {"local": "media_local", "s3": "media_s3"}


@dataclass
class MediaCopyResult:
    objects: int = 0  # distinct stored images of the studies
    copied: int = 0  # written to the target
    present: int = 0  # already there, intact
    checked: int = 0  # read back from the target: size and hash match


def study_stored_images(studies: Iterable[Study]) -> list[StoredImage]:
    """Every stored image a study refers to: pages, candidates and candidate versions, each variant."""
    ids = list(studies)
    ref: set[int] = set()
    for model, study_path in ((Page, "study__in"), (Candidate, "page__study__in"), (CandidateVersion, "candidate__page__study__in")):
        for row in model.objects.filter(**{study_path: ids}).values_list("image_id", "original_image_id", "neutralized_image_id"):  # type: ignore[attr-defined]
            ref.update(pk for pk in row if pk is not None)
    return list(StoredImage.objects.filter(Q(pk__in=ref)).order_by("pk"))


def _storage(name: str) -> Storage:
    from django.conf import settings

    if name == "s3" and not getattr(settings, "AWS_STORAGE_BUCKET_NAME", None):
        raise ArbiterError("copying to or from the bucket needs AWS_STORAGE_BUCKET_NAME (and AWS_S3_ENDPOINT_URL "
                           "for a server other than AWS S3)")
    try:
        return storages[STORAGE_OF[name]]
    except KeyError:
        raise ArbiterError(f"--to: choose 'local' or 's3', got {name!r}") from None
    except Exception as exc:  # django-storages refuses a bucket without a name
        raise ArbiterError(f"the {name} media storage is not configured ({' '.join(str(exc).split())})") from None


def _intact(stored: StoredImage, storage: Storage) -> bool:
    if not media_exists(str(stored.file.name), storage):
        return False
    size, sha = media_digest(str(stored.file.name), storage)
    return size == stored.size_bytes and sha == stored.sha256


def study_media_copy(*, studies: list[Study], to: str) -> MediaCopyResult:
    """Copy the studies' images to ``to`` ('local' or 's3') from the other storage, checking each."""
    target = _storage(to)
    source = _storage("s3" if to == "local" else "local")
    problem = getattr(target if to == "s3" else source, "bucket_problem", lambda: "")()
    if problem:
        raise ArbiterError(problem)
    images = study_stored_images(studies)
    result = MediaCopyResult(objects=len(images))
    for i, stored in enumerate(images, 1):
        key = str(stored.file.name)
        if _intact(stored, target):
            result.present += 1
        else:
            try:
                data = read_media(key, source)
            except FileNotFoundError:
                raise ArbiterError(f"{key}: missing from the {'s3' if to == 'local' else 'local'} media storage") from None
            if len(data) != stored.size_bytes or hashlib.sha256(data).hexdigest() != stored.sha256:
                raise ArbiterError(f"{key}: the source copy is damaged (size or SHA-256 differs from its record)")
            save_media(key, io.BytesIO(data), target)
            if not _intact(stored, target):
                raise ArbiterError(f"{key}: the copy read back from the target differs (size or SHA-256)")
            result.copied += 1
        result.checked += 1
        progress_step("copying images", i, len(images))
    return result
