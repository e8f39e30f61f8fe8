"""Issue 47: what a rater's answer costs in SQL statements, and the HTML and JSON screens of one trial
state saying the same thing.

The statement counts run on whichever database the suite runs on (SQLite, and PostgreSQL when
``DATABASE_URL`` names one): each statement of the request is sorted into the session read, the
transaction's own control (savepoints), the vote's write, the assignment's row lock, and the
rest, which is what the read model pays for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotation.models import Vote
from tests.annotation.test_rater_flow import answer, form_of, join, scheduled

pytestmark = pytest.mark.django_db

# Statements an answer that shows the next trial runs besides the session, its transaction, the
# vote's INSERT and the assignment's lock (which reads the study with it): one read of the
# assignment's trials, which brings the next trial's stored screen (decision 0079), and the UPDATE
# that starts the next trial's clock. Issue 47's budget is 2.
ANSWER_READS = 2


def _statements(queries: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """The request's statements by job (``rest``: what the answer reads and updates)."""
    jobs: dict[str, list[str]] = {"session": [], "transaction": [], "write": [], "lock": [], "rest": []}
    for query in queries:
        sql = query["sql"]
        head = sql.lstrip().upper()
        table = re.search(r'\bFROM "([a-z_]+)"', sql)
        if head.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT", "BEGIN", "COMMIT")):
            jobs["transaction"].append(sql)
        elif head.startswith("SELECT") and table and table[1] == "django_session":
            jobs["session"].append(sql)
        elif head.startswith(f'INSERT INTO "{Vote._meta.db_table.upper()}"'):
            jobs["write"].append(sql)
        elif head.startswith("SELECT") and table and table[1] == "annotation_assignment" and (
            "FOR UPDATE" in head or connection.vendor == "sqlite"  # SQLite locks the whole database instead
        ):
            jobs["lock"].append(sql)
        else:
            jobs["rest"].append(sql)
    return jobs


def _api_vote(client: Client, trial: Mapping[str, Any]):  # type: ignore[no-untyped-def]
    body = {"verdict": "A", "confidence": 4, "axes": {a["id"]: 1 for a in trial["axes"]},
            "idempotency_key": trial["idempotency_key"]}
    return client.post(trial["vote_url"], body, content_type="application/json",
                       HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value)


def test_an_htmx_answer_reads_within_its_statement_budget() -> None:
    rs = scheduled()
    client = Client()
    html = answer(client, join(client, rs.study).content.decode()).content.decode()  # past the first trial
    with CaptureQueriesContext(connection) as captured:
        response = answer(client, html)
    assert response.status_code == 200 and "3 of 10" in response.content.decode()
    jobs = _statements(captured.captured_queries)
    assert len(jobs["write"]) == 1 and len(jobs["lock"]) == 1 and len(jobs["session"]) == 1
    assert len(jobs["rest"]) <= ANSWER_READS, "\n\n".join(jobs["rest"])
    reads = [sql for sql in jobs["rest"] if sql.lstrip().upper().startswith("SELECT")]
    assert len(reads) == 1 and " JOIN " not in reads[0], "one read of the trials, joining nothing"
    assert Vote.objects.count() == 2


def test_a_json_vote_reads_within_the_same_budget() -> None:
    rs = scheduled()
    client = Client()
    join(client, rs.study)
    trial = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    with CaptureQueriesContext(connection) as captured:
        response = _api_vote(client, trial)
    assert response.status_code == 200 and response.json()["recorded"] is True
    jobs = _statements(captured.captured_queries)
    assert len(jobs["write"]) == 1 and len(jobs["lock"]) == 1 and len(jobs["session"]) == 1
    assert len(jobs["rest"]) <= ANSWER_READS, "\n\n".join(jobs["rest"])
    if connection.vendor == "postgresql":  # the lock is a row lock there
        assert "FOR UPDATE" in jobs["lock"][0].upper()


# --- the same facts in HTML and JSON ---------------------------------------------------------------

ALT_SLOT = {"Reference page": "ref", "Candidate A": "left", "Candidate B": "right"}


def html_facts(html: str) -> dict[str, Any]:
    """What the trial page shows: its images by the side the rater reads (A is left), its axes in
    order, its progress."""
    images = {ALT_SLOT[alt]: src for src, alt in re.findall(r'<img class="page-img[^"]*" src="([^"]+)" alt="([^"]+)"', html)
              if alt in ALT_SLOT}
    progress = re.search(r'id="progress-text">(\d+) of (\d+)<', html)
    answered = re.search(r'<progress aria-labelledby="progress-text" max="\d+" value="(\d+)"', html)
    assert progress and answered, html[:2000]
    return {"trial": form_of(html)["token"], "images": images, "axes": form_of(html)["axes"],
            "number": int(progress[1]), "total": int(progress[2]), "answered": int(answered[1])}


def json_facts(data: Mapping[str, Any]) -> dict[str, Any]:
    return {"trial": data["trial"], "images": data["images"], "axes": [a["id"] for a in data["axes"]],
            "number": data["number"], "total": data["total"], "answered": data["answered"]}


def test_the_page_and_the_api_show_one_trial_state_alike() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    for _ in range(3):
        api = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
        assert not api["finished"]
        page, data = html_facts(html), json_facts(api)
        assert page == data and set(page["images"]) == {"ref", "left", "right"} and page["axes"]
        # The sides: what the page calls A is the image the API calls left, byte for byte.
        left = b"".join(client.get(api["images"]["left"]).streaming_content)
        right = b"".join(client.get(api["images"]["right"]).streaming_content)
        assert left != right
        html = answer(client, html).content.decode()


def _break_facts(html: str) -> dict[str, Any]:
    shown = re.search(r"You have answered (\d+) of (\d+) trials", html)
    assert shown and "<h1>Take a break</h1>" in html, html[:2000]
    return {"break_due": True, "answered": int(shown[1]), "total": int(shown[2])}


def test_a_json_client_makes_one_request_per_vote_and_sees_the_breaks_the_page_shows() -> None:
    """Each vote's answer holds the next trial (or the break, or the end); the break stands where
    the page's does, and the API's Continue answers with the trial after it."""
    from annotation.services.studies import study_settings_update

    rs = scheduled()
    study_settings_update(study=rs.study, break_every=4)
    page_client, api_client = Client(), Client()
    html = join(page_client, rs.study, "page").content.decode()
    join(api_client, rs.study, "api")
    shown = api_client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    votes = breaks = 0
    while not shown["finished"]:
        if shown.get("break_due"):
            breaks += 1
            page = page_client.get(f"/s/{rs.study.link_token}/").content.decode()
            assert _break_facts(page) == {k: shown[k] for k in ("break_due", "answered", "total")}
            page_client.post(f"/s/{rs.study.link_token}/break/")
            html = page_client.get(f"/s/{rs.study.link_token}/").content.decode()
            shown = api_client.post(shown["continue_url"], HTTP_X_CSRFTOKEN=api_client.cookies["csrftoken"].value).json()
            assert not shown.get("break_due")
            continue
        # Both raters hold blocks of the same plan shape: the same progress and the same axes.
        facts, page = json_facts(shown), html_facts(html)
        assert {k: facts[k] for k in ("number", "total", "answered")} == {k: page[k] for k in ("number", "total", "answered")}
        assert set(facts["images"]) == set(page["images"]) == {"ref", "left", "right"}
        response = _api_vote(api_client, shown)
        assert response.status_code == 200 and response.json()["trial"] == shown["trial"]
        votes += 1
        shown = response.json()["next_trial"]
        html_response = answer(page_client, html)
        if html_response.get("HX-Redirect"):
            continue
        html = html_response.content.decode()
    assert votes == shown["answered"] == shown["total"] == 10 and breaks == 2
    assert shown["completion_code"] and Vote.objects.filter(trial__assignment__rater__external_id="api").count() == 10


# --- the stored screen (decision 0079) ------------------------------------------------------------


def test_every_scheduled_trial_stores_its_screen_with_the_same_keys_and_no_system_name() -> None:
    from annotation.models import GOLD_EXPECTED, Candidate, System, Trial
    from annotation.services.scheduling import blocks_schedule
    from tests.annotation.rater_factories import make_rater_study

    study = make_rater_study(slug="screens", pages=8).study
    blocks_schedule(study=study, blocks=1, block_size=6, repeats=1, min_gap=2, raters=[2], seed=5, gold=1)
    trials = list(Trial.objects.filter(assignment__block__study=study))
    roles = {("gold" if t.attention_expected == GOLD_EXPECTED else "repeat" if t.is_repeat else "data") for t in trials}
    assert roles == {"data", "repeat", "gold"}
    assert all(t.screen is not None for t in trials)
    assert len({frozenset(t.screen) for t in trials}) == 1  # one shape whatever the role
    names = [s.external_id for s in System.objects.filter(study=study)]
    names += [str(c.external_id) for c in Candidate.objects.filter(page__study=study) if c.external_id]
    for trial in trials:
        stored = str(trial.screen)
        assert not [n for n in names if n and f"'{n}'" in stored], trial.screen
        # A repeat stores what its original shows, on the same sides.
        if trial.is_repeat:
            original = next(t for t in trials if t.pk == trial.repeat_of_id)
            assert trial.screen == original.screen


def test_the_shared_fill_stores_on_every_trial_what_its_own_read_makes() -> None:
    """Scheduling builds a screen once for the trials that share it (every rater's copy of a
    comparison on a side); each trial's stored screen is what a read of that trial alone makes."""
    from annotation.models import Trial
    from annotation.services.scheduling import blocks_schedule
    from annotation.services.trial_screens import _UNIT_RELATED, _axes_by_study, screen_of
    from tests.annotation.rater_factories import make_rater_study

    study = make_rater_study(slug="shared", pages=8).study
    blocks_schedule(study=study, blocks=2, block_size=6, repeats=1, min_gap=2, raters=[3, 2], seed=7, gold=1)
    trials = list(Trial.objects.filter(assignment__block__study=study).select_related(*_UNIT_RELATED))
    axes = _axes_by_study([study.pk])[study.pk]
    assert len({(t.comparison_id, t.swapped) for t in trials}) < len(trials)  # screens are shared
    assert {t.swapped for t in trials} == {False, True} and any(t.gold_image_id for t in trials)
    for trial in trials:
        assert trial.screen == screen_of(trial, axes), trial.pk


def test_the_fill_and_a_forgotten_screen_made_again_agree_and_a_shown_screen_is_kept() -> None:
    from annotation.models import Trial
    from annotation.services.trial_screens import trial_screens_fill, trial_screens_forget

    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()  # the first trial is shown
    before = {t.pk: t.screen for t in Trial.objects.filter(assignment__block__study=rs.study)}
    shown = Trial.objects.get(token=form_of(html)["token"])
    Trial.objects.filter(pk=shown.pk).update(screen={**shown.screen, "brief": "kept"})
    forgotten = trial_screens_forget(rs.study.pk)
    assert forgotten == len(before) - 1  # every trial but the shown one
    assert Trial.objects.get(pk=shown.pk).screen["brief"] == "kept"
    # The migration's fill (every trial without one) makes what scheduling stored.
    assert trial_screens_fill() == forgotten
    after = {t.pk: t.screen for t in Trial.objects.filter(assignment__block__study=rs.study)}
    assert {k: v for k, v in after.items() if k != shown.pk} == {k: v for k, v in before.items() if k != shown.pk}
    # Forgotten again, the next trial's screen is made when the answer shows it: the page is whole.
    trial_screens_forget(rs.study.pk)
    page = answer(client, html).content.decode()
    assert "2 of 10" in page and html_facts(page)["images"].keys() == {"ref", "left", "right"}
    assert Trial.objects.get(token=form_of(page)["token"]).screen is not None


def test_the_assignments_trials_read_decodes_only_the_screen_it_shows() -> None:
    """The read under a vote's lock brings the first two open trials' stored screens as JSON text
    (the one a vote answers and the one it shows next), no other; the one shown is decoded, and it
    is the stored screen."""
    from annotation.models import Trial
    from annotation.services.answers import _progress_query, _screen_of_row

    rs = scheduled()
    client = Client()
    answer(client, join(client, rs.study).content.decode())  # one trial answered, the next shown
    trial = Trial.objects.filter(vote__isnull=False).get()
    rows = list(_progress_query(trial.assignment_id))
    open_rows = [r for r in rows if r["vote_ms"] is None]
    assert len(open_rows) > 2 and all(isinstance(r["open_screen"], str) for r in open_rows[:2])
    assert all(r["open_screen"] is None for r in open_rows[2:])
    assert next(r for r in rows if r["id"] == trial.pk)["open_screen"] is None
    _row, screen = _screen_of_row(open_rows[0])
    assert screen == Trial.objects.get(pk=open_rows[0]["id"]).screen


def test_the_votes_own_sql_reads_what_the_orm_reads() -> None:
    """The vote's lock, the assignment's trials and the shown-now UPDATE are SQL of their own
    (decision 0086): checked against the ORM's reading of the same rows, field by field (times,
    booleans and the study's JSON options included), on whichever database the suite runs on."""
    from datetime import timedelta

    from django.db import transaction
    from django.db.models import Exists, OuterRef
    from django.utils import timezone

    from annotation.models import Assignment, Trial
    from annotation.services.answers import _progress_query, _shown_now, vote_lock

    rs = scheduled()
    rs.study.options = {"rater_page": {"digit_keys": False}, "note": "ä"}
    rs.study.save(update_fields=["options"])
    client = Client()
    answer(client, join(client, rs.study).content.decode())  # one vote (with a response time), the next shown
    answered = Trial.objects.filter(vote__isnull=False).get()
    with transaction.atomic():
        locked = vote_lock(answered.token)
    assert locked is not None and vote_lock("no-such-token") is None
    orm = Assignment.objects.select_related("block__study").get(pk=answered.assignment_id)
    for mine, theirs in ((locked, orm), (locked.block, orm.block), (locked.block.study, orm.block.study)):
        for f in type(theirs)._meta.concrete_fields:
            assert getattr(mine, f.attname) == getattr(theirs, f.attname), f.attname
    assert locked.started_at is not None and timezone.is_aware(locked.started_at)
    assert locked.block.study.options["note"] == "ä"

    rows = _progress_query(answered.assignment_id)
    trials = (Trial.objects.filter(assignment_id=answered.assignment_id).order_by("position")
              .annotate(voted=Exists(Trial.objects.filter(pk=OuterRef("pk"), vote__isnull=False))))
    assert [r["id"] for r in rows] == [t.pk for t in trials]
    for row, trial in zip(rows, trials, strict=True):
        for name in ("comparison_id", "swapped", "is_repeat", "repeat_of_id", "attention_expected", "token",
                     "position", "shown_at", "version_a", "version_b"):
            assert row[name] == getattr(trial, name), name
        assert (row["vote_ms"] is not None) == trial.voted
        assert row["vote_ms"] == (trial.vote.response_ms if trial.voted else None)
    open_rows = [r for r in rows if r["vote_ms"] is None]
    assert [r["open_screen"] is not None for r in rows] == [r in open_rows[:2] for r in rows]
    assert any(r["shown_at"] is not None and r["vote_ms"] is None for r in rows)  # the next trial, shown

    unshown = Trial.objects.filter(assignment_id=answered.assignment_id, shown_at__isnull=True).order_by("position")[0]
    now = timezone.now()
    _shown_now(unshown.pk, now)
    _shown_now(unshown.pk, now + timedelta(seconds=5))  # shown once: the second keeps the first time
    unshown.refresh_from_db()
    comparison = unshown.comparison
    assert unshown.shown_at == now
    assert (unshown.version_a, unshown.version_b) == (comparison.candidate_a.version, comparison.candidate_b.version)
