"""The session engine: Django's database sessions, read with a compiled query."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.utils import timezone

from annotation.sessions import SessionStore

pytestmark = pytest.mark.django_db


def test_the_engine_is_the_settings_one() -> None:
    assert settings.SESSION_ENGINE == "annotation.sessions"


def test_a_saved_session_loads_in_one_query_and_an_expired_or_unknown_one_does_not(django_assert_num_queries) -> None:  # type: ignore[no-untyped-def]
    store = SessionStore()
    store["rater"] = 41
    store.save()
    key = store.session_key
    with django_assert_num_queries(1):
        assert SessionStore(session_key=key)["rater"] == 41
    other = SessionStore()
    other["rater"] = 7
    other.save()
    assert SessionStore(session_key=other.session_key)["rater"] == 7  # a second key, the same compiled query
    Session.objects.filter(session_key=key).update(expire_date=timezone.now() - timedelta(seconds=1))
    expired = SessionStore(session_key=key)
    assert dict(expired.items()) == {} and expired.session_key is None
    unknown = SessionStore(session_key="x" * 32)
    assert unknown.get("rater") is None and unknown.session_key is None
    assert SessionStore(session_key=None).get("rater") is None
