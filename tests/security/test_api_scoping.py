"""SECURITY.md row 8: another study's objects, and client-supplied filters that traverse relations.

Personas (STYLE.md): ``rita`` researches study ``mine``; ``oscar`` researches ``theirs``; ``rae`` is
a rater account. Every API operation is enumerated from the OpenAPI schema at run time and every
researcher page from the URL map, so an endpoint added later is probed without editing this file.

For each operation that names an object of ``mine`` (slug, assignment id, leaderboard id,
coefficient-set name), oscar and rae get exactly the answer a non-existent object gets (no
existence oracle), never a 2xx, with every GET/POST/PUT/PATCH/DELETE; afterwards every row of
every project table is unchanged. Query strings such as ``?candidate__system__name=…`` or
``?ordering=-researchers__password`` are either refused (400) or ignored (the same answer as
without them), and no password hash ever appears in a response.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from annotation.models import Assignment, Study
from calibration.models import CoefficientSet
from ranking.models import Leaderboard, StudyPlanRun
from tests.annotation.factories import make_rated_study, make_study

pytestmark = pytest.mark.django_db

METHODS = ("get", "post", "put", "patch", "delete")
MISSING_ID = 987_654_321
SECRET_SET = "v-secret-set"
# Paths that name no study object (or a participant's): covered by other rows and tests.
NOT_STUDY_SCOPED = (
    "/api/auth/token/",
    "/api/schema/",
    "/api/studies/import/",
    "/api/studies/new/",
    "/api/judges/",
    "/api/studies/",
    "/api/rater/",
)
TRAVERSALS = {
    "candidate__system__name": "Alpha",
    "candidate_a__system__name__startswith": "a",
    "researchers__password__startswith": "md5",
    "study__researchers__password__regex": ".*",
    "ordering": "-researchers__password",
    "order_by": "candidate__system__name",
    "o": "study__created_by__password",
    "fields": "password",
    "search": "secret",
}


@dataclass
class World:
    mine: Study
    theirs: Study
    assignment_id: int
    leaderboard_id: int
    leaderboard_token: str
    plan_id: int
    rita: Client
    oscar: Client
    rae: Client


@pytest.fixture
def world(researcher: Any, other_researcher: Any, rater_user: Any, tmp_path: Path) -> World:
    mine = make_rated_study(
        "mine", researchers=[researcher], n_pages=4, n_blocks=2, raters_per_block=2, tmp_dir=tmp_path
    )
    theirs = make_study("theirs", researchers=[other_researcher])
    coefficients = CoefficientSet.objects.create(
        study=mine, name=SECRET_SET, coefficients={"judge-x": 1.0}, source="import"
    )
    leaderboard = Leaderboard.objects.create(
        study=mine, coefficient_set=coefficients, status="done", result={"systems": []}
    )
    plan = StudyPlanRun.objects.create(pilot=mine, parameters={"target": "kappa"}, created_by=researcher)
    assignment = Assignment.objects.filter(block__study=mine).order_by("pk").first()
    assert assignment is not None
    clients = []
    for user in (researcher, other_researcher, rater_user):
        client = Client(raise_request_exception=False)  # a 500 is a finding to list, not a crash
        client.force_login(user)
        clients.append(client)
    return World(mine, theirs, assignment.pk, leaderboard.pk, leaderboard.public_token, plan.pk, *clients)


def fingerprint() -> dict[str, list[dict[str, Any]]]:
    """Every row of every project table (and users, tokens), for before/after comparisons."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for model in apps.get_models():
        if model._meta.app_label in {"annotation", "judges", "calibration", "ranking", "authtoken"} or (
            model._meta.label == "auth.User"
        ):
            rows[model._meta.label] = list(model.objects.order_by("pk").values())
    return rows


@pytest.fixture
def schema(world: World) -> dict[str, Any]:
    response = world.rita.get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


def operations(schema: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def fill(path: str, world: World, *, present: bool, own_slug: str | None = None) -> str | None:
    """The path naming mine's object (``present``) or a missing one; None when it names nothing."""
    values: dict[str, str] = {}
    for name in re.findall(r"{(\w+)}", path):
        if name == "slug":
            values[name] = own_slug or (world.mine.slug if present else "no-such-study")
        elif name in {"id", "pk"} and "/assignments/" in path:
            values[name] = str(world.assignment_id if present else MISSING_ID)
        elif name in {"id", "pk"} and "/leaderboards/" in path:
            values[name] = str(world.leaderboard_id if present else MISSING_ID)
        elif name in {"id", "pk"} and path.startswith("/api/plans/"):
            values[name] = str(world.plan_id if present else MISSING_ID)
        elif name == "name":
            values[name] = SECRET_SET if present else "no-such-set"
        elif name == "token":
            values[name] = world.leaderboard_token if present else "no-such-token-000000000"
        else:
            return None
    if not values:
        return None
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)


def probe_body(path: str) -> dict[str, Any]:
    """A well-formed body, so a refusal cannot hide behind input validation."""
    if path.endswith("/coefficients/"):
        return {"name": "probe-set", "coefficients": {"judge-x": 0.5}}
    if path.endswith("/leaderboards/"):
        return {"coefficients": SECRET_SET, "bootstrap": 10, "seed": 1}
    if path.endswith("/judge-runs/"):
        return {"judge": "judge-x", "repeats": 1}
    if path.endswith("/schedule/"):
        return {"blocks": 1, "block_size": 2, "repeats": 0, "min_gap": 0, "raters": [1], "seed": 1}
    if path.endswith("/void/"):
        return {"reason": "probe"}
    return {}


def call(client: Client, method: str, url: str, body: dict[str, Any] | None = None) -> Any:
    if method == "get":
        return client.get(url)
    return getattr(client, method)(url, json.dumps(body or {}), content_type="application/json")


PASSWORD_HASHES = (b"md5$", b"pbkdf2_sha256$", b"argon2$", b"bcrypt")


def leaks(
    response: Any, *, url: str = "", secrets: tuple[bytes, ...] = (SECRET_SET.encode(), b"Study mine")
) -> list[str]:
    """Secrets of ``mine`` (unless the caller put them in the URL itself) and password hashes."""
    text = b"".join(response.streaming_content) if response.streaming else response.content
    return [s.decode() for s in (*secrets, *PASSWORD_HASHES) if s in text and s.decode() not in url]


# --- another study's objects ------------------------------------------------------------------


def test_schema_has_the_study_scoped_operations(schema: dict[str, Any]) -> None:
    paths = set(schema["paths"])
    for expected in (
        "/api/studies/{slug}/",
        "/api/studies/{slug}/comparisons/",
        "/api/assignments/{id}/void/",
    ):
        assert expected in paths


@pytest.mark.parametrize("persona", ["oscar", "rae"])
def test_other_studies_objects_answer_like_missing_ones_and_nothing_changes(
    world: World, schema: dict[str, Any], persona: str
) -> None:
    client = getattr(world, persona)
    before = fingerprint()
    probed = 0
    problems: list[str] = []
    for path in sorted({p for p, _, _ in operations(schema)}):
        if path in NOT_STUDY_SCOPED or path.startswith("/api/rater/"):
            continue
        target, missing = fill(path, world, present=True), fill(path, world, present=False)
        if target is None or missing is None:
            continue
        for method in METHODS:
            got = call(client, method, target, probe_body(path))
            expected = call(client, method, missing, probe_body(path))
            probed += 1
            if got.status_code != expected.status_code or got.status_code not in (403, 404, 405):
                problems.append(
                    f"{method.upper()} {target}: {got.status_code} (missing object: {expected.status_code})"
                )
            if leaks(got, url=target):
                problems.append(f"{method.upper()} {target} leaks {leaks(got, url=target)}")
    assert probed >= 40
    assert problems == []
    assert fingerprint() == before


PUBLIC = ("/api/auth/token/", "/api/schema/", "/api/leaderboards/{token}/")


def test_anonymous_requests_are_refused_everywhere(world: World, schema: dict[str, Any]) -> None:
    """No session, no token: every operation but the public ones answers 401/403 and writes nothing.

    Participant endpoints (``/api/rater/``) authenticate by the participant's session; without one
    they must not answer 2xx either.
    """
    anonymous = Client(raise_request_exception=False)
    before = fingerprint()
    problems = []
    for path, method, _ in operations(schema):
        if path in PUBLIC:
            continue
        url = fill(path, world, present=True) if "{" in path else path
        if url is None:  # participant tokens: a made-up one
            url = re.sub(r"{\w+}", "no-such-token-000000000", path)
        response = call(anonymous, method, url, probe_body(path))
        allowed = (401, 403, 404) if path.startswith("/api/rater/") else (401, 403)
        if response.status_code not in allowed:
            problems.append(f"{method.upper()} {url}: {response.status_code}")
    assert problems == []
    assert fingerprint() == before


def test_own_slug_with_another_studies_id_is_404(world: World, schema: dict[str, Any]) -> None:
    """oscar names his own study in the path and mine's object id / name after it (IDOR)."""
    before = fingerprint()
    problems = []
    for path, method, _ in operations(schema):
        if "{slug}" not in path or not re.search(r"{(id|pk|name)}", path):
            continue
        url = fill(path, world, present=True, own_slug=world.theirs.slug)
        assert url is not None
        response = call(world.oscar, method, url, probe_body(path))
        if response.status_code != 404 or leaks(response, url=url):
            problems.append(f"{method.upper()} {url}: {response.status_code} {leaks(response, url=url)}")
    for method in METHODS:
        response = call(world.oscar, method, f"/api/assignments/{world.assignment_id}/void/", {"reason": "x"})
        if response.status_code not in (404, 405):
            problems.append(f"{method.upper()} assignment void: {response.status_code}")
    assert problems == []
    assert fingerprint() == before


def test_owner_control_reaches_the_same_objects(world: World, schema: dict[str, Any]) -> None:
    """The probes above name real objects: the owner reads them."""
    for path in (
        "/api/studies/{slug}/",
        "/api/studies/{slug}/comparisons/",
        "/api/studies/{slug}/leaderboards/{id}/",
        "/api/studies/{slug}/coefficients/{name}/",
        "/api/plans/{id}/",
    ):
        if path in schema["paths"]:
            url = fill(path, world, present=True)
            assert url is not None
            assert world.rita.get(url).status_code == 200, url


def _html_routes() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern

    for route, pattern in walk(get_resolver().url_patterns, "/"):
        if route.startswith(("/api/", "/admin/")) or not re.search(
            r"<(slug:slug|int:pk|int:position)>", route
        ):
            continue
        yield route, pattern


def fill_html(route: str, world: World, *, present: bool) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(2)
        if name == "slug":
            return world.mine.slug if present else "no-such-study"
        if name == "pk":
            if route.startswith("/research/assignments/"):
                return str(world.assignment_id if present else MISSING_ID)
            if route.startswith("/plan/"):
                return str(world.plan_id if present else MISSING_ID)
            return str(world.leaderboard_id if present else MISSING_ID)
        if name == "position":
            return "0" if present else str(MISSING_ID)
        if name == "fmt":
            return "json"
        return "x"

    return re.sub(r"<(\w+):(\w+)>", value, route)


@pytest.mark.parametrize("persona", ["oscar", "rae"])
def test_researcher_pages_of_another_study_answer_like_missing_ones(world: World, persona: str) -> None:
    client = getattr(world, persona)
    before = fingerprint()
    problems = []
    routes = list(_html_routes())
    assert len(routes) >= 8
    for route, _ in routes:
        target, missing = fill_html(route, world, present=True), fill_html(route, world, present=False)
        for method in ("get", "post"):
            got = getattr(client, method)(target)
            expected = getattr(client, method)(missing)
            if got.status_code != expected.status_code or got.status_code not in (403, 404, 405):
                problems.append(
                    f"{method.upper()} {target}: {got.status_code} (missing object: {expected.status_code})"
                )
            if leaks(got, url=target):
                problems.append(f"{method.upper()} {target} leaks {leaks(got, url=target)}")
    assert problems == []
    assert fingerprint() == before


# --- client-supplied filters -----------------------------------------------------------------


def _comparable(response: Any) -> Any:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    kind = response.get("Content-Type", "")
    if kind.startswith("application/json"):
        return json.loads(body)
    if kind.startswith("application/zip"):
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            return {name: archive.read(name) for name in archive.namelist()}
    return body


def test_relation_traversing_query_parameters_are_refused_or_ignored(
    world: World, schema: dict[str, Any]
) -> None:
    before = fingerprint()
    problems = []
    checked = 0
    for path, method, operation in operations(schema):
        if method != "get" or path.startswith("/api/rater/") or path == "/api/schema/":
            continue
        url = fill(path, world, present=True) if "{" in path else path
        if url is None:
            continue
        declared = {p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"}
        base = {"bootstrap": "20"} if "bootstrap" in declared else {}
        plain = world.rita.get(url, base)
        probed = world.rita.get(url, {**base, **TRAVERSALS})
        checked += 1
        if leaks(probed, secrets=()):
            problems.append(f"GET {url} leaks {leaks(probed, secrets=())}")
        if probed.status_code == 400:
            continue
        if probed.status_code != plain.status_code or _comparable(probed) != _comparable(plain):
            problems.append(
                f"GET {url}: the relation filters changed the answer ({plain.status_code} → {probed.status_code})"
            )
    assert checked >= 10
    assert problems == []
    assert fingerprint() == before


def test_researcher_html_lists_ignore_or_refuse_odd_query_parameters(world: World) -> None:
    """HTML list pages take ``page`` and ``block``; anything else, or a malformed value, is harmless."""
    problems = []
    for route, _ in _html_routes():
        if route.endswith("/export/"):
            continue  # a download, not a list (and this ORM-built study has no images to export)
        url = fill_html(route, world, present=True)
        for query in (
            {**TRAVERSALS},
            {"block": "researchers__password"},
            {"block": "-1"},
            {"page": "x"},
            {"block": "1.5"},
        ):
            response = world.rita.get(url, query)
            if response.status_code >= 500 or leaks(response, secrets=()):
                problems.append(f"GET {url}?{query}: {response.status_code} {leaks(response, secrets=())}")
    assert problems == []
