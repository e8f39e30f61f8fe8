"""SECURITY.md row 12: property-based requests over the OpenAPI schema (schemathesis).

Every operation of ``/api/schema/`` is exercised through the WSGI app as a logged-in researcher
(token authentication) who owns the protocol example study, imported with the real bundle service.
Path slugs point at that study, so requests reach the code behind the 404. Checks: no 5xx, the
response's content type and body match what the schema declares. drf-spectacular emits no OpenAPI
links, so there is nothing to chain statefully; each operation is tested on its own.

Bounded for CI: at most 25 examples per operation, no shrinking, a fixed seed (derandomized).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from annotation.services.bundles.importing import study_import_bundle

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def _load_schema() -> Any:
    """The schema ``/api/schema/`` serves, generated at collection time (no database needed).

    ``schemathesis.pytest.from_fixture`` (lazy loading) does not work with pytest 9 (it sets
    ``node._nodeid``), so the schema is built eagerly and bound to the WSGI app.
    """
    from drf_spectacular.generators import SchemaGenerator

    from config.wsgi import application

    raw = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
    loaded = schemathesis.openapi.from_dict(raw)
    loaded.app = application
    return loaded


schema = _load_schema()


@pytest.fixture(autouse=True)
def _keep_the_test_connection() -> Any:
    """Calls go straight to the WSGI handler, whose request signals close the database connection
    that holds the test's transaction (PostgreSQL); Django's test client unhooks them the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def token(researcher: Any, examples_dir: Path) -> str:
    study_import_bundle(path=examples_dir / "bundle", user=researcher)
    return Token.objects.get_or_create(user=researcher)[0].key


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_api_conforms_to_its_schema(case: Any, token: str) -> None:
    if "slug" in (case.path_parameters or {}):
        case.path_parameters["slug"] = "example"
    case.call_and_validate(
        headers={"Authorization": f"Token {token}"},
        checks=[not_a_server_error, content_type_conformance, response_schema_conformance],
    )
