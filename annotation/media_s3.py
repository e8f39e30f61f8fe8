"""The S3 backend of the media storage (``ARBITER_MEDIA_STORAGE=s3``; annotation/media.py).

Kept apart from ``annotation.media`` so a node on local disk never imports boto3.
"""

from __future__ import annotations

from typing import IO, Any

from botocore.config import Config
from django.conf import settings
from storages.backends.s3 import S3Storage
from storages.utils import clean_name


class PrivateS3Storage(S3Storage):
    """django-storages' S3 backend that never hands out a URL: images reach raters and judges only
    through the trial-token views, so no bucket or presigned URL can leak a key or outlive a trial.

    An unreachable endpoint answers within ``ARBITER_S3_TIMEOUT`` seconds per attempt, at most
    ``ARBITER_S3_ATTEMPTS`` attempts (unless ``AWS_S3_CLIENT_CONFIG`` is set).
    """

    def get_default_settings(self) -> dict[str, Any]:
        defaults: dict[str, Any] = super().get_default_settings()
        if defaults.get("client_config") is None:
            timeout = float(getattr(settings, "ARBITER_S3_TIMEOUT", 5))
            defaults["client_config"] = Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"total_max_attempts": max(1, int(getattr(settings, "ARBITER_S3_ATTEMPTS", 2))), "mode": "standard"},
                s3={"addressing_style": defaults.get("addressing_style") or "path"},
            )
        return defaults

    def url(self, name: str | None, parameters: Any = None, expire: Any = None, http_method: Any = None) -> str:
        raise NotImplementedError("stored images are never served by URL (annotation/media.py)")

    def open_sized(self, name: str) -> tuple[int, IO[bytes]]:
        """One GET: the object's size and its streaming body (``S3File`` would HEAD, then GET)."""
        key = self._normalize_name(clean_name(name))
        reply = self.connection.meta.client.get_object(Bucket=self.bucket_name, Key=key)
        return int(reply["ContentLength"]), reply["Body"]

    def bucket_problem(self) -> str:
        """Empty when the bucket answers; else a line saying what is wrong."""
        from annotation.media import unreachable

        try:
            self.connection.meta.client.head_bucket(Bucket=self.bucket_name)
        except Exception as exc:
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in ("404", "NoSuchBucket", "NotFound"):
                return f"the bucket {self.bucket_name!r} does not exist at {self.endpoint_url or 'AWS S3'}"
            problem = unreachable(exc)
            if problem is None:
                raise
            return f"the bucket {self.bucket_name!r}: {problem}"
        return ""
