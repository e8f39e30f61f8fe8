"""The study's axes come with the answered trial's own query (``StudyAxesRows``): the same axes,
in the same order, as the ORM reads them, and no query of their own during an answer."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Axis, Study
from annotation.selectors.axes import StudyAxesRows, axes_of_rows
from annotation.services.answers import study_axes, vote_trial
from tests.annotation.test_rater_flow import answer, form_of, join, scheduled

pytestmark = pytest.mark.django_db

FIELDS = ("id", "study_id", "axis_id", "title", "scope", "description", "position")


def _as_tuples(axes: list[Axis]) -> list[tuple[object, ...]]:
    return [tuple(getattr(a, f) for f in FIELDS) for a in axes]


def test_the_aggregated_axes_equal_the_orm_read_in_axis_order() -> None:
    rs = scheduled()
    axes = list(Axis.objects.filter(study=rs.study).order_by("position"))
    assert len(axes) >= 2
    # Stored out of order, with a title, a description and quotes, so order and text both count.
    first = axes[0]
    first.title, first.description = 'Layout "as a whole"', "Où sont les colonnes ?"
    first.save()
    Axis.objects.filter(pk=axes[1].pk).update(position=900)
    expected = _as_tuples(list(Axis.objects.filter(study=rs.study).order_by("position")))
    rows = Study.objects.filter(pk=rs.study.pk).annotate(rows=StudyAxesRows("pk")).values_list("rows", flat=True).get()
    got = axes_of_rows(rs.study.pk, rows)
    assert _as_tuples(got) == expected
    assert all(not a._state.adding and a._state.db == "default" for a in got)


def test_a_study_without_axes_aggregates_to_none() -> None:
    rs = scheduled()
    Axis.objects.filter(study=rs.study).delete()
    rows = Study.objects.filter(pk=rs.study.pk).annotate(rows=StudyAxesRows("pk")).values_list("rows", flat=True).get()
    assert axes_of_rows(rs.study.pk, rows) == []


def test_an_answer_reads_no_axes_of_its_own_and_the_next_trial_still_shows_them() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    assert form_of(html)["axes"]
    trial = vote_trial(form_of(html)["token"])
    assert trial is not None
    assert _as_tuples(study_axes(trial.assignment.block.study)) == _as_tuples(
        list(Axis.objects.filter(study=rs.study).order_by("position"))
    )
    with CaptureQueriesContext(connection) as queries:
        nxt = answer(client, html)
    assert nxt.status_code == 200 and form_of(nxt.content.decode())["axes"]
    table = Axis._meta.db_table
    assert not [q["sql"] for q in queries.captured_queries if f'FROM "{table}"' in q["sql"].split(" WHERE ")[0]
                and "JSON" not in q["sql"].upper()]
