from __future__ import annotations

import os
import sys

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

application = get_wsgi_application()


def _startup_checks() -> None:
    """S3 chosen but its bucket missing, or a SECRET_KEY other than the other nodes': one line, and
    gunicorn's master stops instead of starting worker after worker
    (docs/decisions/0049-several-web-nodes.md)."""
    from django.core.exceptions import ImproperlyConfigured
    from django.db import connections

    from annotation.services.deployment import node_startup_checks

    try:
        node_startup_checks()
        connections.close_all()  # the loading thread serves nothing; request threads open their own
    except ImproperlyConfigured as exc:
        sys.stderr.write(f"arbiter: {exc}\n")
        sys.stderr.flush()
        os._exit(3)  # gunicorn's WORKER_BOOT_ERROR: the master halts "Worker failed to boot."


from django.conf import settings  # noqa: E402

if settings.ARBITER_STARTUP_CHECKS:
    _startup_checks()
