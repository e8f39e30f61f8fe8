"""Project errors: messages a researcher can act on (file, line, JSON path, field, expectation)."""

from __future__ import annotations


class ArbiterError(Exception):
    """Bad input or a refused action. ``str(error)`` is one line, shown as-is to the user."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class ValidationFailed(ArbiterError):
    """Input that does not follow the SPEC format. Names where: ``file:line`` or ``file $.path``."""

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
