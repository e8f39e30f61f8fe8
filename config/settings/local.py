"""Local development: `make run` (SQLite under var/, tasks in-process unless a broker is set).

`make run` serves with gunicorn, so static files come from WhiteNoise: while debugging, straight
from the apps' and project's static folders (no `collectstatic`), re-read when they change."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG
