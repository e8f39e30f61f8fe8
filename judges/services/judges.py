"""Registering judges (docs/protocol.md "Judges and calibration", "Commands" ``add_judge``). Endpoints are
admin-configured only."""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from annotation.errors import Conflict, ValidationFailed
from annotation.services.audit import audit_record
from judges.models import Judge, Provider
from judges.providers import ADAPTERS, REGISTRABLE, check_base_url

CALLABLE_PROVIDERS = REGISTRABLE
TOKEN_PARAMS = ("auto", "max_tokens", "max_completion_tokens")
REASONING_EFFORTS = ("", "minimal", "low", "medium", "high")
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


def parse_price(value: Any, field: str) -> float | None:
    """A price in dollars per million tokens: a non-negative finite number, or None."""
    if value is None or value == "":
        return None
    try:
        price = float(value) if not isinstance(value, bool) else float("nan")
    except (TypeError, ValueError):
        price = float("nan")
    if not (price >= 0 and price != float("inf")):
        raise ValidationFailed(f"expected a price in dollars per million tokens (a number ≥ 0), got {value!r}",
                               field=field)
    return price


def _capabilities(out: dict[str, Any]) -> None:
    """Check the parameters-sent settings (protocol is silent; see
    docs/decisions/0036-judges-on-todays-providers.md)."""
    token_param = out.get("token_param")
    if token_param is not None and token_param not in TOKEN_PARAMS:
        raise ValidationFailed(f"expected one of {', '.join(TOKEN_PARAMS)}, got {token_param!r}", field="token_param")
    effort = out.get("reasoning_effort")
    if effort is not None:
        effort = "" if str(effort).lower() == "none" else str(effort).lower()
        if effort not in REASONING_EFFORTS:
            raise ValidationFailed(f"expected none, minimal, low, medium or high, got {out['reasoning_effort']!r}",
                                   field="reasoning_effort")
        out["reasoning_effort"] = effort
    seed = out.get("seed")
    if isinstance(seed, str):
        if seed.lower() == "none":
            out["seed"] = None
            out["_clear_seed"] = True
        elif re.fullmatch(r"-?\d{1,18}", seed.strip()):
            out["seed"] = int(seed)
        else:
            raise ValidationFailed(f"expected an integer or none, got {seed!r}", field="seed")
    elif seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ValidationFailed(f"expected an integer or none, got {seed!r}", field="seed")
    for name in ("price_input_per_mtok", "price_output_per_mtok"):
        if name in out:
            out[name] = parse_price(out[name], name)
    discount = out.get("batch_discount")
    if discount is not None:
        try:
            discount = float(discount)
        except (TypeError, ValueError):
            discount = float("nan")
        if not 0.0 <= discount < 1.0:
            raise ValidationFailed(f"expected a fraction 0 ≤ d < 1 (0.5 = half price), got {out['batch_discount']!r}",
                                   field="batch_discount")
        out["batch_discount"] = discount
    adapt = out.get("adapt_parameters")
    if adapt is not None and not isinstance(adapt, bool):
        raise ValidationFailed(f"expected true or false, got {adapt!r}", field="adapt_parameters")
    version = out.get("api_version")
    if version is not None and not re.fullmatch(r"[A-Za-z0-9._-]{0,40}", str(version)):
        raise ValidationFailed(f"expected an API version like 2023-06-01, got {version!r}", field="api_version")


def judge_validate_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Check and normalize judge settings (shared by the command, the admin and the API)."""
    out = dict(fields)
    provider = out.get("provider") or Provider.OPENAI
    out["provider"] = provider
    if provider not in CALLABLE_PROVIDERS:
        raise ValidationFailed(f"unknown provider {provider!r}: expected one of {', '.join(CALLABLE_PROVIDERS)}",
                               field="provider")
    if not str(out.get("model") or "").strip():
        raise ValidationFailed("a model id is required", field="model")
    base_url = str(out.get("base_url") or "") or ADAPTERS[provider].default_base_url
    if not base_url:
        raise ValidationFailed(f"a base URL is required for {provider}", field="base_url")
    out["base_url"] = check_base_url(base_url)
    _capabilities(out)
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
        judge = Judge.objects.create(name=name, **{k: v for k, v in clean.items() if v is not None and k[0] != "_"})
        audit_record(action="judges.add", user=user, target=name, provider=judge.provider, model=judge.model,
                     base_url=judge.base_url)
    return judge


def judge_update(*, name: str, user: Any = None, **fields: Any) -> Judge:
    """Change the given settings of a registered judge (``add_judge NAME --update ...``); None keeps a setting."""
    with transaction.atomic():
        judge = Judge.objects.select_for_update().filter(name=name.strip()).first()
        if judge is None:
            raise ValidationFailed(f"no judge named {name!r} to update (drop --update to register it)", field="name")
        if judge.provider == Provider.IMPORTED:
            raise ValidationFailed(f"judge {name} is imported-only; register a callable judge under another name",
                                   field="provider")
        given = {k: v for k, v in fields.items() if v is not None}
        current = {k: getattr(judge, k) for k in ("provider", "model", "base_url")}
        clean = judge_validate_fields({**current, **given})
        changed = {k: v for k, v in clean.items() if k in given}
        if clean.get("_clear_seed"):
            changed["seed"] = None
        for key, value in changed.items():
            setattr(judge, key, value)
        # A setting given by hand replaces what a run learned about it.
        from judges.providers.base import ADAPTATIONS

        learned = {param: entry for param, entry in (judge.learned_parameters or {}).items()
                   if not set(ADAPTATIONS.get(param, ({},))[0]) & set(changed)}
        if learned != (judge.learned_parameters or {}):
            judge.learned_parameters = learned
            changed["learned_parameters"] = learned
        judge.save(update_fields=list(changed) or None)
        audit_record(action="judges.update", user=user, target=judge.name, fields=sorted(changed))
    return judge


def judge_learn_parameters(*, judge_id: int, refused: dict[str, str]) -> dict[str, str]:
    """Record what a run learned: the model refused these parameters and a call without them succeeded.

    ``refused``: parameter → the provider's message. The judge's settings change as
    ``judges.providers.base.ADAPTATIONS`` says (temperature no longer sent, ...), and each
    parameter gets an entry in ``learned_parameters`` (what changed, the flag that undoes it, what
    the provider said, when). Returns parameter → what changed, for the ones new to the judge
    (a call that learned what another already recorded changes nothing).
    """
    from django.utils import timezone

    from judges.providers.base import ADAPTATIONS

    new: dict[str, str] = {}
    with transaction.atomic():
        judge = Judge.objects.select_for_update().get(pk=judge_id)
        learned = dict(judge.learned_parameters or {})
        fields: dict[str, Any] = {}
        for param, said in refused.items():
            change, changed, undo = ADAPTATIONS[param]
            fields.update(change)
            if param not in learned:
                learned[param] = {"changed": changed, "undo": f"add_judge {judge.name} --update {undo}",
                                  "said": said[:300], "at": timezone.now().isoformat(timespec="seconds")}
                new[param] = changed
        for key, value in fields.items():
            setattr(judge, key, value)
        judge.learned_parameters = learned
        judge.save(update_fields=[*fields, "learned_parameters"])
        if new:
            audit_record(action="judges.learn", user=None, target=judge.name, fields=sorted(fields),
                         refused=sorted(new))
    return new
