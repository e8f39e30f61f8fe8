"""A trial records the candidate versions it displayed (paper B.5), once, when first shown.

Here a candidate's version is bumped in the middle of an assignment (as ``import_study --update``
does): the trials already shown keep the version they displayed, later ones record the new one.
The images stay blinded: the served URLs carry only the trial token, never a system or a version.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client

from annotation.models import Candidate, Trial
from annotation.services.candidate_versions import trials_record_versions
from tests.annotation.test_rater_flow import answer, form_of, join, scheduled


@pytest.mark.django_db
def test_shown_trials_keep_the_version_they_displayed() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    first = Trial.objects.get(token=form_of(html)["token"])
    assert (first.version_a, first.version_b) == (1, 1)
    assert not Trial.objects.filter(shown_at__isnull=True).exclude(version_a__isnull=True).exists()
    # Every candidate of the study is replaced once now.
    Candidate.objects.filter(page__study=rs.study).update(version=2)
    html = answer(client, html).content.decode()
    second = Trial.objects.get(token=form_of(html)["token"])
    first.refresh_from_db()
    assert (first.version_a, first.version_b) == (1, 1) and first.vote.label in ("A", "B")
    assert (second.version_a, second.version_b) == (2, 2)
    # Blinding: nothing in the served page names a system or a version.
    for url in re.findall(r'src="([^"]+\.png)"', html):
        assert url.startswith("/t/") and "v2" not in url and not any(s.external_id in url for s in rs.study.systems.all())


@pytest.mark.django_db
def test_recording_is_once_only() -> None:
    rs = scheduled()
    trial = Trial.objects.filter(assignment__block__study=rs.study, comparison__isnull=False).first()
    assert trial is not None
    assert trials_record_versions(trial_ids=[trial.pk]) == 1
    Candidate.objects.filter(page__study=rs.study).update(version=5)
    assert trials_record_versions(trial_ids=[trial.pk]) == 0
    trial.refresh_from_db()
    assert (trial.version_a, trial.version_b) == (1, 1)
