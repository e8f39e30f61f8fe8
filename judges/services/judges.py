"""Registering judges (SPEC §6, §9 ``add_judge``). Endpoints are admin-configured only."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from annotation.errors import Conflict, ValidationFailed
from annotation.services.audit import audit_record
from judges.models import Judge, Provider
from judges.providers import check_base_url

CALLABLE_PROVIDERS = (Provider.OPENAI, Provider.ANTHROPIC)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,119}$")
_RATE = re.compile(r"^\s*(?P<n>\d+(?:\.\d+)?)\s*(?:/\s*(?P<unit>s|sec|second|m|min|minute))?\s*$", re.IGNORECASE)


def parse_rate(value: str | float | None) -> float | None:
    """``"2/s"``, ``"30/m"`` or a number (per second) → calls per second; None or "" → unlimited."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        rate = float(value)
    else:
        match = _RATE.match(str(value))
        if not match:
            raise ValidationFailed(f"expected a rate like 2/s or 30/m, got {value!r}", field="rate")
        rate = float(match.group("n"))
        if (match.group("unit") or "s").lower().startswith("m"):
            rate /= 60
    if rate <= 0:
        raise ValidationFailed("the rate must be positive", field="rate")
    return rate


def judge_validate_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Check and normalize judge settings (shared by the command, the admin and the API)."""
    out = dict(fields)
    provider = out.get("provider", Provider.OPENAI)
    if provider not in CALLABLE_PROVIDERS:
        raise ValidationFailed(f"expected openai or anthropic, got {provider!r}", field="provider")
    if not str(out.get("model") or "").strip():
        raise ValidationFailed("a model id is required", field="model")
    out["base_url"] = check_base_url(str(out.get("base_url") or ""))
    env = str(out.get("api_key_env") or "")
    if env and not _ENV_NAME.match(env):
        raise ValidationFailed(
            "expected the NAME of an environment variable (letters, digits, _), not the key itself",
            field="api_key_env",
        )
    for name, low in (
        ("max_image_edge", 64),
        ("max_image_bytes", 4096),
        ("max_request_bytes", 16384),
        ("concurrency", 1),
        ("max_tokens", 16),
    ):
        value = out.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValidationFailed(f"expected an integer ≥ {low}, got {value!r}", field=name)
    if "rate_per_second" in out:
        out["rate_per_second"] = parse_rate(out["rate_per_second"])
    timeout = out.get("timeout_seconds")
    if timeout is not None and not (isinstance(timeout, int | float) and 0.1 <= float(timeout) <= 3600):
        raise ValidationFailed(f"expected seconds between 0.1 and 3600, got {timeout!r}", field="timeout")
    return out


def judge_create(*, name: str, user: Any = None, **fields: Any) -> Judge:
    """Register a callable judge. The API key stays in the environment: only its variable's name is kept."""
    name = name.strip()
    if not name or len(name) > 120:
        raise ValidationFailed("expected a judge name of 1–120 characters", field="name")
    clean = judge_validate_fields(fields)
    with transaction.atomic():
        if Judge.objects.filter(name=name).exists():
            raise Conflict(f"a judge named {name!r} already exists")
        judge = Judge.objects.create(name=name, **{k: v for k, v in clean.items() if v is not None})
        audit_record(action="judges.add", user=user, target=name, provider=judge.provider, model=judge.model,
                     base_url=judge.base_url)
    return judge
