"""``bulk_rows.rows_insert(..., ignore_conflicts=True)`` skips the rows a unique constraint refuses
and stores the others as ``bulk_create(ignore_conflicts=True)`` does: INSERT OR IGNORE on SQLite,
a temporary table and one INSERT … ON CONFLICT DO NOTHING on PostgreSQL (COPY skips no row)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.models import StoredImage
from annotation.services.bulk_rows import rows_insert

pytestmark = pytest.mark.django_db

COLUMNS = ("sha256", "file", "width", "height", "size_bytes", "mode")


def _row(n: int) -> tuple[Any, ...]:
    sha = hashlib.sha256(str(n).encode()).hexdigest()
    return (sha, f"images/{sha[:2]}/{sha}.png", 600 + n, 800, 4_000_000_000 + n, "RGBA" if n % 2 else "RGB")


def _stored() -> dict[str, tuple[Any, ...]]:
    return {row[0]: row for row in StoredImage.objects.values_list(*COLUMNS)}


def _conflicts_are_skipped() -> None:
    now = timezone.now()
    # Rows 0-2 exist already, with other values than the new rows 1-2 carry: those stay.
    StoredImage.objects.bulk_create(StoredImage(**dict(zip(COLUMNS, (*_row(n)[:2], 1, 1, 1, "L"), strict=True))) for n in range(3))
    before = _stored()
    rows = [_row(n) for n in range(1, 6)]
    assert rows_insert(StoredImage, COLUMNS, rows, constants={"created_at": now}, ignore_conflicts=True) == 5
    stored = _stored()
    assert len(stored) == 6
    for n in range(3):
        assert stored[_row(n)[0]] == before[_row(n)[0]]
    for n in range(3, 6):
        assert stored[_row(n)[0]] == _row(n)
    assert set(StoredImage.objects.filter(sha256__in=[_row(n)[0] for n in range(3, 6)]).values_list("created_at", flat=True)) == {now}
    # Without ignore_conflicts the unique constraint still refuses a row that is there.
    with pytest.raises(IntegrityError), transaction.atomic():
        rows_insert(StoredImage, COLUMNS, [_row(0)], constants={"created_at": now})
    # The temporary table is gone: a second call in the same transaction works.
    assert rows_insert(StoredImage, COLUMNS, [_row(5), _row(6)], constants={"created_at": now}, ignore_conflicts=True) == 2
    assert len(_stored()) == 7


def test_rows_insert_skips_conflicting_rows_and_stores_the_rest() -> None:
    _conflicts_are_skipped()


@pytest.mark.postgres
def test_rows_insert_skips_conflicting_rows_on_postgresql() -> None:
    assert connection.vendor == "postgresql"
    _conflicts_are_skipped()
