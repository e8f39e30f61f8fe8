"""compiled_rows: a hot values() query compiled once answers like the ORM for every argument."""

from __future__ import annotations

import pytest

from annotation.models import Trial
from annotation.selectors.compiled import compiled_rows
from tests.annotation.test_rater_flow import scheduled

pytestmark = pytest.mark.django_db


def _query(assignment_id: int, token: str):  # type: ignore[no-untyped-def]
    return (
        Trial.objects.filter(assignment_id=assignment_id, assignment__state="open").exclude(token=token)
        .order_by("position").values("id", "position", "swapped", "assignment__block__study__slug")[:3]
    )


def test_compiled_rows_match_the_orm_for_every_argument() -> None:
    scheduled()
    trials = list(Trial.objects.order_by("assignment_id", "position")[:40])
    for trial in trials:
        expected = list(_query(trial.assignment_id, trial.token))
        got = compiled_rows("test:rows", _query, trial.assignment_id, trial.token)
        assert [{**r, "swapped": bool(r["swapped"])} for r in got] == expected
    assert compiled_rows("test:rows", _query, -1, "nothing") == []


def test_compiled_rows_bind_only_plain_arguments() -> None:
    with pytest.raises(TypeError):
        compiled_rows("test:float", lambda x: Trial.objects.filter(position=x).values("id"), 1.5)
    with pytest.raises(ValueError, match="plain parameter"):  # a transformed argument is not bound as given
        compiled_rows("test:lower", lambda t: Trial.objects.filter(token__icontains=t).values("id"), "ab")
