"""The append-only audit log: who imported, voided, froze or published what."""

from __future__ import annotations

import getpass
from typing import Any

from annotation.models import AuditEvent, Study


def audit_record(
    *, action: str, user: Any = None, study: Study | None = None, target: str = "", **details: Any
) -> AuditEvent:
    """Append one event. ``user=None`` (a management command) records the operating-system user."""
    if user is not None and getattr(user, "is_authenticated", False):
        label = user.get_username()
        actor = user
    else:
        try:
            label = f"cli:{getpass.getuser()}"
        except (KeyError, OSError):
            label = "cli"
        actor = None
    return AuditEvent.objects.create(
        actor=actor, actor_label=label, action=action, study=study, target=target, details=details
    )
