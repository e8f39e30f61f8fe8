"""Checks a node runs when it starts and when the load balancer asks (``/healthz``;
docs/decisions/0049-several-web-nodes.md).

Several web nodes serve one study behind a load balancer: each must sign sessions, CSRF tokens
and image passes with the same ``SECRET_KEY``, or a rater whose next request lands on another
node loses their session. The first node to start stores an HMAC of a constant under its key;
every later one compares (a key being rotated through ``SECRET_KEY_FALLBACKS`` updates the value).
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils.crypto import constant_time_compare, salted_hmac

from annotation.media import media_problem, rater_image_storage
from annotation.models import DeploymentCheck

logger = logging.getLogger(__name__)

SECRET_KEY_CHECK = "secret_key"
_SALT = "arbiter.deployment.secret-key-agreement"
_CONSTANT = "every node of one deployment signs with the same SECRET_KEY"
# Set once this process has seen every migration applied (they are not unapplied under it).
_migrated: set[str] = set()


def secret_key_value(secret: str | bytes | None = None) -> str:
    return salted_hmac(_SALT, _CONSTANT, secret=secret or settings.SECRET_KEY, algorithm="sha256").hexdigest()


def secret_key_agreement() -> None:
    """Refuse (ImproperlyConfigured, one line) a SECRET_KEY other than the one the database's other
    nodes use. Before ``migrate`` (no table yet) or without a database there is nothing to compare."""
    value = secret_key_value()
    try:
        row, created = DeploymentCheck.objects.get_or_create(name=SECRET_KEY_CHECK, defaults={"value": value})
    except DatabaseError:
        return
    if created or constant_time_compare(row.value, value):
        return
    if any(constant_time_compare(row.value, secret_key_value(old)) for old in settings.SECRET_KEY_FALLBACKS):
        DeploymentCheck.objects.filter(pk=row.pk).update(value=value)  # the key is being rotated
        return
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY differs from the key the other nodes of this database use: give every node the "
        "same key (or list the old one in SECRET_KEY_FALLBACKS while rotating)"
    )


def storage_startup_check() -> None:
    """S3 chosen but the bucket missing (or unreachable): one line, before the node serves."""
    if settings.ARBITER_MEDIA_STORAGE == "s3":
        problem = media_problem()
        if problem:
            raise ImproperlyConfigured(f"ARBITER_MEDIA_STORAGE=s3: {problem}")


def node_startup_checks() -> None:
    """What a web node checks before it serves (config/wsgi.py)."""
    storage_startup_check()
    secret_key_agreement()


def database_ready() -> bool:
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() is not None
    except DatabaseError as exc:
        logger.warning("readiness: the database cannot be reached (%s)", " ".join(str(exc).split()))
        return False


def migrations_ready() -> bool:
    if DEFAULT_DB_ALIAS in _migrated:
        return True
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError:
        return False
    if pending:
        logger.warning("readiness: %d migrations are not applied", len(pending))
        return False
    _migrated.add(DEFAULT_DB_ALIAS)
    return True


def storage_ready() -> bool:
    try:
        # With the rater reads' short timeout: a bucket that hangs fails the check in under a
        # second instead of holding a web thread ARBITER_S3_TIMEOUT x attempts.
        problem = media_problem(rater_image_storage())
    except Exception as exc:  # any failure of the storage is "not ready", never a 500
        problem = " ".join(str(exc).split()) or type(exc).__name__
    if problem:
        logger.warning("readiness: the media storage is not ready (%s)", problem)
    return not problem


READINESS_CHECKS = {"database": database_ready, "migrations": migrations_ready, "storage": storage_ready}


def readiness(names: list[str] | None = None) -> dict[str, bool]:
    """Each named readiness check (all by default) and whether it passed; the database first, so the
    migration check is skipped (failed) without one."""
    chosen = [n for n in READINESS_CHECKS if names is None or n in names]
    results: dict[str, bool] = {}
    for name in chosen:
        if name == "migrations" and results.get("database") is False:
            results[name] = False
            continue
        results[name] = READINESS_CHECKS[name]()
    return results
