"""The rater hot path (issue 18): the trial's image pass, X-Accel-Redirect and Server-Timing."""

from __future__ import annotations

import re
import time

import pytest
from django.conf import settings as django_settings
from django.test import Client

from annotation.models import Trial
from annotation.rater import images as image_pass
from tests.annotation.test_rater_flow import answer, form_of, join, scheduled

pytestmark = pytest.mark.django_db

IMAGE_RE = re.compile(r'src="(/t/[^"]+\.png)"')


def _images(html: str) -> list[str]:
    return list(dict.fromkeys(IMAGE_RE.findall(html)))


def _body(response) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content)


def test_the_pass_serves_the_trials_images_without_a_query_and_reveals_no_file(
    settings, django_assert_max_num_queries  # type: ignore[no-untyped-def]
) -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    value = client.cookies[image_pass.COOKIE_NAME].value
    trial = Trial.objects.select_related("comparison__candidate_a", "comparison__candidate_b").get(
        token=form_of(html)["token"]
    )
    stored = {trial.comparison.candidate_a.neutralized_image.file.name, trial.comparison.candidate_b.neutralized_image.file.name}
    for name in stored:  # opaque: neither the content-hash name nor its hash appears
        assert name not in value and name.rsplit("/", 1)[-1].split(".")[0] not in value
    cookie = client.cookies[image_pass.COOKIE_NAME]
    assert cookie["httponly"] and cookie["path"] == "/t/"
    for url in _images(html):
        with django_assert_max_num_queries(0):
            response = client.get(url)
            body = _body(response)
        assert response.status_code == 200 and body.startswith(b"\x89PNG")
    left = _body(client.get(f"/t/{trial.token}/left.png"))
    shown = trial.comparison.candidate_b if trial.swapped else trial.comparison.candidate_a
    assert left == (settings.MEDIA_ROOT / shown.neutralized_image.file.name).read_bytes()
    assert client.get(f"/t/{trial.token}/item.png").status_code == 404  # not a slot of this trial


def test_a_pass_is_bound_to_its_session_and_trial(django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    alice, bob = Client(), Client()
    a_html = join(alice, rs.study, "alice").content.decode()
    join(bob, rs.study, "bob")
    url = _images(a_html)[0]
    # Bob copies Alice's pass into his own session: it does not open under his session key.
    bob.cookies[image_pass.COOKIE_NAME] = alice.cookies[image_pass.COOKIE_NAME].value
    assert bob.get(url).status_code == 404
    # Nor without any session, nor altered.
    stranger = Client()
    stranger.cookies[image_pass.COOKIE_NAME] = alice.cookies[image_pass.COOKIE_NAME].value
    assert stranger.get(url).status_code == 404
    value = alice.cookies[image_pass.COOKIE_NAME].value
    tampered = value[:-2] + ("A" if value[-2] != "A" else "B") + value[-1]
    assert image_pass.cookie_files(
        value=tampered, session_key=alice.cookies[django_settings.SESSION_COOKIE_NAME].value,
        trial_token=form_of(a_html)["token"],
    ) is None
    # Without a valid pass the owner is still served, by the trial row and the session.
    alice.cookies[image_pass.COOKIE_NAME] = tampered
    with django_assert_max_num_queries(2):
        response = alice.get(url)
        _body(response)
    assert response.status_code == 200
    # The next trial's page brings its own pass; the previous trial's images stay the owner's.
    next_html = answer(alice, a_html).content.decode()
    assert _images(next_html) != _images(a_html)
    assert alice.get(url).status_code == 200 and bob.get(url).status_code == 404


def test_a_pass_expires_and_names_one_trial() -> None:
    key, token = "s" * 32, "trial-token-1"
    value = image_pass.cookie_value(session_key=key, trial_token=token, files={"left": "images/aa/x.png"})
    assert image_pass.cookie_files(value=value, session_key=key, trial_token=token) == {"left": "images/aa/x.png"}
    assert image_pass.cookie_files(value=value, session_key=key, trial_token="trial-token-2") is None
    assert image_pass.cookie_files(value=value, session_key="t" * 32, trial_token=token) is None
    later = time.time() + image_pass.LIFETIME_SECONDS + 5
    assert image_pass.cookie_files(value=value, session_key=key, trial_token=token, now=later) is None
    # Two passes of the same files differ (a repeat's pass cannot be matched to its original's).
    again = image_pass.cookie_value(session_key=key, trial_token=token, files={"left": "images/aa/x.png"})
    assert again != value


def test_behind_a_proxy_the_image_is_an_internal_redirect(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_IMAGE_ACCEL_REDIRECT = "/protected-media/"
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    trial = Trial.objects.select_related("comparison__page__neutralized_image").get(token=form_of(html)["token"])
    response = client.get(f"/t/{trial.token}/ref.png")
    assert response.status_code == 200 and response.content == b""
    assert response["X-Accel-Redirect"] == "/protected-media/" + trial.comparison.page.neutralized_image.file.name
    assert response["Content-Type"] == "image/png" and response["Cache-Control"].startswith("private")
    assert Client().get(f"/t/{trial.token}/ref.png").status_code == 404


def _sample(name: str, view: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, {"view": view}) or 0.0


def test_rater_timing_goes_to_the_metrics_and_to_a_benchmarks_server_timing_only(researcher, settings) -> None:  # type: ignore[no-untyped-def]
    """docs/decisions/0067-no-diagnostics-in-rater-responses.md: a rater's responses carry no
    Server-Timing; the queries and database time of each rater request are in /metrics; a load
    benchmark's server (ARBITER_SERVER_TIMING) adds the header to read them per request."""
    assert settings.ARBITER_SERVER_TIMING is False  # the default
    rs = scheduled()
    client = Client()
    before = _sample("arbiter_rater_request_queries_count", "rater:link")
    queries_before = _sample("arbiter_rater_request_queries_sum", "rater:link")
    page = join(client, rs.study)
    assert "Server-Timing" not in page
    assert _sample("arbiter_rater_request_queries_count", "rater:link") >= before + 1
    assert _sample("arbiter_rater_request_queries_sum", "rater:link") > queries_before
    assert "Server-Timing" not in answer(client, page.content.decode())

    settings.ARBITER_SERVER_TIMING = True
    page = join(Client(), rs.study, "P2")
    timing = re.fullmatch(
        r'db;dur=([\d.]+);desc="(\d+) queries", render;dur=([\d.]+), app;dur=([\d.]+)', page["Server-Timing"]
    )
    assert timing, page["Server-Timing"]
    db, queries, render, app = float(timing[1]), int(timing[2]), float(timing[3]), float(timing[4])
    assert queries > 0 and render > 0 and db + render <= app
    html = page.content.decode()
    assert "db;dur=" in answer(client, html)["Server-Timing"]
    api = client.get(f"/api/rater/{rs.study.link_token}/trial/")
    assert float(re.search(r"render;dur=([\d.]+)", api["Server-Timing"])[1]) > 0
    image = client.get(api.json()["images"]["ref"])
    assert image.status_code == 200 and 'desc="0 queries"' in image["Server-Timing"]
    staff = Client()
    staff.force_login(researcher)
    assert "Server-Timing" not in staff.get("/")


def test_the_production_settings_refuse_server_timing() -> None:
    import subprocess
    import sys

    env = {"DJANGO_SETTINGS_MODULE": "config.settings.production", "DJANGO_SECRET_KEY": "x" * 50,
           "ARBITER_SERVER_TIMING": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True, cwd=django_settings.BASE_DIR)
    assert done.returncode != 0 and "ARBITER_SERVER_TIMING=1 is for a load benchmark" in done.stderr


def test_an_htmx_answer_starts_the_next_trials_clock_in_its_own_transaction() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    first = Trial.objects.get(token=form_of(html)["token"])
    next_html = answer(client, html).content.decode()
    shown = Trial.objects.get(token=form_of(next_html)["token"])
    assert shown.position > first.position and shown.shown_at is not None
    assert shown.shown_at >= first.vote.created_at


def test_the_progress_an_answer_shows_is_the_stored_count() -> None:
    """The htmx answer counts the progress under the assignment's lock (no separate count query):
    after new votes and a double-submitted one it is what the database holds."""
    from annotation.models import Assignment
    from annotation.services.answers import assignment_counts

    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    for n in range(4):
        f = form_of(html)
        response = answer(client, html)
        if n == 2:  # the same submission again (a double click): the same next trial, counted the same
            again = answer(client, html)
            assert form_of(again.content.decode())["token"] == form_of(response.content.decode())["token"]
            assert re.search(r'id="progress-text">(\d+) of', again.content.decode())[1] == str(n + 2)
        html = response.content.decode()
        assignment = Assignment.objects.get(trials__token=f["token"])
        answered, total = assignment_counts(assignment)
        assert answered == n + 1
        assert f'id="progress-text">{answered + 1} of {total}<' in html
        assert f'max="{total}" value="{answered}"' in html


def _checked(html: str) -> list[tuple[str, str]]:
    """(name, value) of every checked radio button."""
    return re.findall(r'<input type="radio"[^>]*name="([^"]+)" value="([^"]+)"[^>]*\schecked>', html)


def test_answer_choices_show_what_the_rater_chose() -> None:
    """A refused answer comes back with the rater's choices checked, and the next trial with none."""
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    f = form_of(html)
    assert f["axes"] and not _checked(html)
    first_axis = f["axes"][0]
    refused = client.post(f"/t/{f['token']}/vote/", {  # no confidence: refused, shown again as posted
        "verdict": "B", "idempotency_key": f["key"], "rationale": "", f"axis:{first_axis}": "-1",
    }, HTTP_HX_REQUEST="true")
    assert refused.status_code == 400
    again = refused.content.decode()
    checked = _checked(again)
    assert ("verdict", "B") in checked and (f"axis:{first_axis}", "-1") in checked
    assert not any(name == "confidence" for name, _ in checked)
    nxt = answer(client, again).content.decode()
    assert form_of(nxt)["token"] != f["token"] and not _checked(nxt)
    # The same choices in another trial render as in the first one (only ids depend on the axis).
    assert re.findall(r'name="verdict" value="(\w+)"', nxt) == re.findall(r'name="verdict" value="(\w+)"', html)
