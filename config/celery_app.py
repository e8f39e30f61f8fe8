"""Celery application.

Unset ``CELERY_BROKER_URL`` means tasks run in-process (eager), the embedded default of
``make run``; set it to a Redis or RabbitMQ URL to use real workers.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.local")

app = Celery("arbiter")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
