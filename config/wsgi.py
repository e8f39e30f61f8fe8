from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.production")

django_application = get_wsgi_application()

from annotation.image_wsgi import ImagePassApplication  # noqa: E402  (needs the settings configured above)

# Images granted by the trial's image pass are answered before Django's handler (annotation/image_wsgi.py).
application = ImagePassApplication(django_application)
