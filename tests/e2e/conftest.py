"""The browser and live-server fixtures of ``test_rater_browser`` for every browser test here."""

from __future__ import annotations

from tests.e2e.test_rater_browser import app_url, browser  # noqa: F401
