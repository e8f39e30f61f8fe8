"""Project errors: messages a researcher can act on (file, line, JSON path, field, expectation)."""

from __future__ import annotations


class ArbiterError(Exception):
    """Bad input or a refused action. ``str(error)`` is one line, shown as-is to the user."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class ValidationFailed(ArbiterError):
    """Input that does not follow the protocol format. Names where: ``file:line`` or ``file $.path``."""

    def __init__(self, message: str, *, where: str = "", field: str = "") -> None:
        parts = [p for p in (where, f"field '{field}'" if field else "") if p]
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.where = where
        self.field = field


class Forbidden(ArbiterError):
    status_code = 403


class NotFound(ArbiterError):
    status_code = 404


class Conflict(ArbiterError):
    """The request conflicts with stored state (a frozen set, an idempotency key reused, ...)."""

    status_code = 409


EXCERPT_CHARS = 40


def excerpt(value: object, *, limit: int = EXCERPT_CHARS) -> str:
    """A short, escaped piece of text read from a file, fit to name in an error message.

    Error messages may reach people who must not read the file (SECURITY.md: an error never echoes
    a file's content), so a value taken from a file is quoted (``repr``: control characters and
    quotes escaped) and cut to ``limit`` characters with "…" marking the cut.
    """
    text = str(value)
    cut = len(text) > limit
    shown = repr(text[:limit])
    return f"{shown}…" if cut else shown


def excerpt_path(value: str, *, limit: int = 120) -> str:
    """A path read from a file (a manifest's row), shown as written when it is short and printable,
    else as :func:`excerpt`."""
    return value if len(value) <= limit and value.isprintable() else excerpt(value, limit=limit)
