"""Base class for Arbiter management commands: one-line errors, exit status 1, nothing written."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.errors import ArbiterError
from annotation.progress import terminal_progress


class ArbiterCommand(BaseCommand):
    """Subclasses implement ``run(**options)``; project errors become ``CommandError`` (one line).

    System checks are skipped: they import every view and API module (seconds and ~200 MB per
    command) and belong to ``manage.py check``, ``migrate`` and the servers, which run them.
    """

    requires_system_checks: list[str] = []  # type: ignore[assignment]
    # Long commands show progress on a terminal (stderr a TTY) and stay quiet otherwise (issue 17).
    shows_progress = False

    def handle(self, *args: Any, **options: Any) -> str | None:
        try:
            if self.shows_progress:
                stream = getattr(self.stderr, "_out", None)
                with terminal_progress(self.__module__.rsplit(".", 1)[-1], stream):
                    return self.run(*args, **options)
            return self.run(*args, **options)
        except ArbiterError as exc:
            raise CommandError(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise CommandError(" ".join(str(exc).split())) from None

    def run(self, *args: Any, **options: Any) -> str | None:
        raise NotImplementedError


def researcher_option(username: str | None) -> Any:
    """The account of a command's ``--researcher USERNAME`` (made one of the study's researchers,
    so it sees the study on the web and in the API), or None; a one-line error when unknown."""
    if not username:
        return None
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"--researcher: no account named {username!r} (create it with manage.py createsuperuser or the admin)")
    return user

