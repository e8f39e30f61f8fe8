"""Rater accounts created from the study pages (docs/protocol.md "Who does what": admins create raters),
audited.

A new account has no usable password: the admin hands the rater a one-time set-password link
(Django's password-reset token, valid for ``PASSWORD_RESET_TIMEOUT``), so no password is ever
chosen, sent or seen by anyone but the rater.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from annotation.errors import Conflict, ValidationFailed
from annotation.models import Assignment, Block, Study
from annotation.roles import RATER, ensure_groups
from annotation.services.audit import audit_record
from annotation.services.participants import rater_assign

USERNAME_RE = re.compile(r"^[A-Za-z0-9_.@+-]{1,150}$")


@dataclass(frozen=True)
class RaterInvite:
    user: AbstractBaseUser
    set_password_path: str
    assignment: Assignment | None


def set_password_path(user: AbstractBaseUser) -> str:
    """The one-time set-password link of an account (a path; the page adds its origin)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse("password_reset_confirm", args=[uid, default_token_generator.make_token(user)])  # type: ignore[arg-type]


def rater_account_create(
    *, study: Study, username: str, email: str = "", block: Block | None = None, actor: Any = None
) -> RaterInvite:
    """A new rater account (group ``rater``, no password yet), optionally given a place in ``block``."""
    username = (username or "").strip()
    if not USERNAME_RE.match(username):
        raise ValidationFailed(
            "A username is 1–150 letters, digits or _ . @ + - (no spaces).", field="username"
        )
    email = (email or "").strip()
    if email and ("@" not in email or len(email) > 254):
        raise ValidationFailed("That email address does not look right.", field="email")
    if block is not None and block.study_id != study.pk:
        raise ValidationFailed("That block belongs to another study.", field="block")
    user_model = get_user_model()
    ensure_groups()
    with transaction.atomic():
        if user_model.objects.filter(username__iexact=username).exists():
            raise Conflict(f"The username {username} is taken; choose another.")
        user = user_model.objects.create_user(username=username, email=email)  # type: ignore[attr-defined]
        user.set_unusable_password()
        user.save()
        user.groups.add(Group.objects.get(name=RATER))
        audit_record(action="rater_account_create", user=actor, study=study, target=username,
                     email_given=bool(email))
        assignment = rater_assign(block=block, user=user, actor=actor) if block is not None else None
    return RaterInvite(user=user, set_password_path=set_password_path(user), assignment=assignment)
