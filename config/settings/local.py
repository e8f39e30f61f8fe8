"""Local development: `make run` (SQLite under var/, tasks in-process unless a broker is set)."""

from __future__ import annotations

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
