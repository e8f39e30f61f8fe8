"""Django's database session engine, its read compiled once (``SESSION_ENGINE``).

Every rater page and answer reads its session: the same primary-key query as Django's own
``db`` engine (unexpired rows only), compiled once per thread (``compiled_instances``) instead
of built by the ORM on every request. Writes, expiry, logout and ``clearsessions`` are Django's.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.core.exceptions import SuspiciousOperation
from django.utils import timezone

from annotation.selectors.compiled import compiled_instances


def _session_query(session_key: str, now: datetime) -> Any:
    return Session.objects.filter(session_key=session_key, expire_date__gt=now).order_by()[:1]


class SessionStore(DatabaseSessionStore):
    def _get_session_from_db(self) -> Session | None:
        try:
            if not isinstance(self.session_key, str):
                raise Session.DoesNotExist
            found = compiled_instances("session", _session_query, self.session_key, timezone.now())
            if not found:
                raise Session.DoesNotExist
            return found[0]  # type: ignore[no-any-return]
        except (Session.DoesNotExist, SuspiciousOperation) as exc:
            if isinstance(exc, SuspiciousOperation):
                logging.getLogger(f"django.security.{exc.__class__.__name__}").warning(str(exc))
            self._session_key = None
            return None
