"""The rater flow: study links, claims, the trial page, canonical idempotent votes, researcher pages."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from PIL import Image

from annotation.errors import Conflict, ValidationFailed
from annotation.models import Assignment, AssignmentState, AuditEvent, Label, Rater, Trial, Vote
from annotation.services.answers import VoteInput, vote_submit
from annotation.services.participants import (
    StudyFull,
    assignment_void,
    participant_claim,
    participant_rater_get_or_create,
    slot_reopen,
)
from annotation.services.scheduling import blocks_schedule
from tests.annotation.rater_factories import make_rater_study

pytestmark = pytest.mark.django_db


def scheduled(raters=(2, 1), **kw):  # type: ignore[no-untyped-def]
    rs = make_rater_study(**kw)
    blocks_schedule(study=rs.study, blocks=len(raters), block_size=8, repeats=2, min_gap=3, raters=list(raters), seed=7)
    return rs


def join(client: Client, study, participant: str = "P1", param: str = "participant", **extra: str):  # type: ignore[no-untyped-def]
    r = client.get(f"/s/{study.link_token}/", {param: participant, **extra})
    assert r.status_code == 302
    # The id is exchanged for a session: the redirect is the bare link (a short id like "P1" may
    # well occur inside the random token, so compare the whole URL).
    assert r["Location"] == f"/s/{study.link_token}/"
    return client.get(r["Location"])


def form_of(html: str) -> dict[str, object]:
    token = re.search(r'action="/t/([^/"]+)/vote/"', html)
    key = re.search(r'name="idempotency_key" value="([^"]+)"', html)
    axes = list(dict.fromkeys(re.findall(r'name="axis:([A-Z_]+)"', html)))
    return {"token": token.group(1) if token else None, "key": key.group(1) if key else None, "axes": axes}


def answer(client: Client, html: str, verdict: str = "A", score: int = 1, htmx: bool = True, **extra):  # type: ignore[no-untyped-def]
    f = form_of(html)
    data = {"verdict": verdict, "confidence": "4", "idempotency_key": f["key"], "rationale": "",
            **{f"axis:{a}": str(score) for a in f["axes"]}, **extra}
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    return client.post(f"/t/{f['token']}/vote/", data, **headers)


def test_participant_link_exchanges_the_id_for_a_session() -> None:
    rs = scheduled()
    client = Client()
    page = join(client, rs.study, "PROL-123", STUDY_ID="S9", SESSION_ID="X1")
    assert page.status_code == 200
    html = page.content.decode()
    assert "PROL-123" not in html
    rater = Rater.objects.get(external_id="PROL-123")
    assert rater.source == Rater.Source.LINK and rater.platform == {"STUDY_ID": "S9", "SESSION_ID": "X1"}
    assignment = Assignment.objects.get(rater=rater)
    assert assignment.state == AssignmentState.ACTIVE and assignment.started_at is not None
    assert "1 of 10" in html
    # Prolific's parameter name works too, and the same id comes back to the same assignment.
    other = Client()
    join(other, rs.study, "PROL-123", param="PROLIFIC_PID")
    assert Assignment.objects.filter(rater=rater).count() == 1


def test_bad_participant_id_is_refused() -> None:
    rs = scheduled()
    r = Client().get(f"/s/{rs.study.link_token}/", {"participant": "has space"})
    assert r.status_code == 400 and b"participant id" in r.content


def test_no_id_and_no_session_asks_for_one() -> None:
    rs = scheduled()
    r = Client().get(f"/s/{rs.study.link_token}/")
    assert r.status_code == 200 and b'name="participant"' in r.content


def test_new_participants_go_to_the_block_furthest_below_target() -> None:
    rs = scheduled(raters=(3, 1))
    claimed = []
    for i in range(4):
        rater = participant_rater_get_or_create(study=rs.study, external_id=f"p{i}")
        claimed.append(participant_claim(study=rs.study, rater=rater).block.position)
    # deficits: (3,1) → block 1, then (2,1) → 1, then (1,1) → 1 (tie, fuller share first... position), then 2
    assert sorted(claimed) == [1, 1, 1, 2]
    assert claimed[0] == 1
    with pytest.raises(StudyFull):
        participant_claim(study=rs.study, rater=participant_rater_get_or_create(study=rs.study, external_id="late"))
    r = join(Client(), rs.study, "late2")
    assert r.status_code == 200 and b"This study is full" in r.content and b"Thank you" in r.content


def test_claims_follow_the_deficit_not_the_position() -> None:
    rs = scheduled(raters=(1, 3))
    first = participant_claim(study=rs.study, rater=participant_rater_get_or_create(study=rs.study, external_id="a"))
    assert first.block.position == 2


def test_trial_page_has_the_accessible_controls() -> None:
    rs = scheduled()
    html = join(Client(), rs.study).content.decode()
    for label, key in (("A", "a"), ("B", "b"), ("Tie", "t"), ("Cannot judge", "x")):
        # The shortcut letter is shown on the button, hidden from its accessible name.
        assert re.search(rf'<label for="verdict-[A-Z_]+" class="choice-button verdict-button">{label} '
                         rf'<kbd class="key" aria-hidden="true">{key}</kbd></label>', html)
    assert "<legend>Confidence</legend>" in html
    assert '<label for="rationale">Rationale</label>' in html
    assert re.search(r'<button type="submit" class="primary" aria-keyshortcuts="Enter">Submit <kbd', html)
    f = form_of(html)
    assert f["axes"][:2] == ["GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION"]
    # Headings read as words (no title in this study: the id humanized), the scale as the screen.
    assert "<legend>Global layout fidelity</legend>" in html and "<legend>Text visual presentation</legend>" in html
    assert "<legend>GLOBAL_LAYOUT_FIDELITY</legend>" not in html
    words = re.findall(r'class="choice-button axis-button axis-score-\d">([^<]+?) ?(?:<kbd|</label>)', html)[:5]
    assert words == ["A much better", "A better", "Equal", "B better", "B much better"]
    assert 'form="undo-form"' not in html  # nothing answered yet: no "Undo last answer" button
    assert "style=" not in html and "<style" not in html  # the CSP forbids inline styles
    assert re.search(r"<script(?![^>]*\bsrc=)", html) is None  # and inline scripts
    assert "Keyboard shortcuts" in html and "of 10" in html
    assert "<strong>reference</strong>" in html  # instructions rendered


def test_conditional_axis_and_target_boxes_only_when_the_page_has_a_target() -> None:
    rs = scheduled(raters=(1, 1))
    client = Client()
    html = join(client, rs.study).content.decode()
    seen_with, seen_without = False, False
    for _ in range(10):
        trial = Trial.objects.get(token=form_of(html)["token"])
        has_target = bool(trial.comparison.page.targets)
        assert ("<legend>Table</legend>" in html) == has_target
        assert ('data-bbox="66,450,934,650"' in html) == has_target
        seen_with |= has_target
        seen_without |= not has_target
        html = answer(client, html).content.decode()
    assert seen_with and seen_without


def test_votes_are_stored_canonically_with_response_time() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    last_html = html
    for _ in range(10):
        last_html = html
        f = form_of(html)
        trial = Trial.objects.get(token=f["token"])
        Trial.objects.filter(pk=trial.pk).update(shown_at=timezone.now() - timedelta(seconds=3))
        r = answer(client, html, verdict="A", score=2)
        assert r.status_code == 200
        vote = Vote.objects.get(trial=trial)
        assert vote.label == (Label.B if trial.swapped else Label.A)
        assert set(vote.axis_scores.values()) == {-2 if trial.swapped else 2}
        assert 3000 <= vote.response_ms < 60_000
        html = r.content.decode()
    assignment = Assignment.objects.get(rater__external_id="P1")
    assert assignment.state == AssignmentState.FINISHED
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{8}", assignment.completion_code)
    assert assignment.completion_code in html and "Thank you" in html
    # Coming back shows the code again; a finished assignment cannot be re-voted.
    again = client.get(f"/s/{rs.study.link_token}/").content.decode()
    assert assignment.completion_code in again
    retry = answer(client, last_html.replace(form_of(last_html)["key"], "a-new-key-1234"), verdict="B")
    assert retry.status_code == 409 and Vote.objects.filter(trial__assignment=assignment).count() == 10


def test_study_completion_code_is_used_when_set() -> None:
    rs = scheduled(completion_code="C0DE42")
    client = Client()
    html = join(client, rs.study).content.decode()
    for _ in range(10):
        html = answer(client, html, verdict="TIE", score=0).content.decode()
    assert "C0DE42" in html
    assert Assignment.objects.get(rater__external_id="P1").completion_code == "C0DE42"


def test_cannot_judge_needs_no_axes_but_others_do() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    f = form_of(html)
    r = client.post(f"/t/{f['token']}/vote/", {"verdict": "A", "confidence": "3", "idempotency_key": f["key"]},
                    HTTP_HX_REQUEST="true")
    # Participant-facing errors in plain words, not the API's field names.
    assert r.status_code == 400 and "Score “Global layout fidelity”: choose from" in r.content.decode()
    assert "field '" not in r.content.decode()
    assert not Vote.objects.exists()
    r = client.post(f"/t/{f['token']}/vote/", {"verdict": "A", "idempotency_key": f["key"]}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "Choose a confidence from 1 to 5." in r.content.decode()
    r = client.post(f"/t/{f['token']}/vote/", {"confidence": "3", "idempotency_key": f["key"]}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "Choose a verdict: A, B, Tie or Cannot judge." in r.content.decode()
    r = client.post(f"/t/{f['token']}/vote/", {"verdict": "CANNOT_JUDGE", "confidence": "1", "idempotency_key": f["key"]},
                    HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    vote = Vote.objects.get()
    assert vote.label == Label.CANNOT_JUDGE and vote.axis_scores == {}


@pytest.mark.parametrize(
    ("field", "value"), [("verdict", "MAYBE"), ("confidence", "6"), ("confidence", "x"), ("axis", "3")]
)
def test_server_side_validation(field: str, value: str) -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    f = form_of(html)
    extra = {f"axis:{f['axes'][0]}": value} if field == "axis" else {field: value}
    r = answer(client, html, **extra)
    assert r.status_code == 400 and not Vote.objects.exists()


def test_double_submission_stores_one_vote_and_answers_the_same() -> None:
    rs = scheduled()
    client = Client()
    join(client, rs.study)
    api = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    body = {"verdict": "B", "confidence": 5, "axes": {a["id"]: -1 for a in api["axes"]},
            "idempotency_key": api["idempotency_key"]}
    csrf = client.cookies["csrftoken"].value
    first = client.post(api["vote_url"], body, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    second = client.post(api["vote_url"], body, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert first.status_code == second.status_code == 200

    def recorded(response):  # type: ignore[no-untyped-def]
        # The next trial comes with each answer, each time with a fresh key for its own answer.
        data = json.loads(response.content)
        nxt = data.pop("next_trial")
        assert len(nxt.pop("idempotency_key")) >= 8
        return data, nxt

    assert recorded(first) == recorded(second) and recorded(first)[1]["number"] == 2
    assert Vote.objects.count() == 1
    changed = {**body, "confidence": 1}
    r = client.post(api["vote_url"], changed, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 409 and "different answer" in r.json()["detail"]
    other_key = {**body, "idempotency_key": "another-key-123"}
    r = client.post(api["vote_url"], other_key, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert r.status_code == 409 and "already answered" in r.json()["detail"]
    assert Vote.objects.count() == 1


def test_api_requires_csrf_for_votes() -> None:
    rs = scheduled()
    client = Client(enforce_csrf_checks=True)
    join(client, rs.study)
    api = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    body = {"verdict": "A", "confidence": 5, "axes": {a["id"]: 1 for a in api["axes"]},
            "idempotency_key": api["idempotency_key"]}
    assert client.post(api["vote_url"], body, content_type="application/json").status_code == 403
    assert not Vote.objects.exists()


def test_stale_and_foreign_trials_are_refused() -> None:
    rs = scheduled()
    alice, bob = Client(), Client()
    a_html = join(alice, rs.study, "alice").content.decode()
    join(bob, rs.study, "bob")
    # Bob cannot answer Alice's trial nor fetch its images.
    f = form_of(a_html)
    r = bob.post(f"/t/{f['token']}/vote/", {"verdict": "A", "confidence": "3", "idempotency_key": f["key"]})
    assert r.status_code == 403
    assert bob.get(f"/t/{f['token']}/ref.png").status_code == 404
    assert Client().get(f"/t/{f['token']}/left.png").status_code == 404
    # A later trial of Alice's own assignment is not the current one.
    later = Trial.objects.filter(assignment__rater__external_id="alice").order_by("-position").first()
    with pytest.raises(Conflict, match="not the current trial"):
        vote_submit(VoteInput(trial_token=later.token, rater_id=Rater.objects.get(external_id="alice").pk, verdict="A",
                    confidence=3, axes={a: 0 for a in f["axes"]} if not later.comparison.page.targets else
                    {"GLOBAL_LAYOUT_FIDELITY": 0, "TEXT_VISUAL_PRESENTATION": 0, "TABLE": 0},
                    rationale="", idempotency_key="k" * 12))
    # Answer, then replay the same form with a new key (e.g. from a second tab) → 409, current trial shown.
    answer(alice, a_html)
    r = answer(alice, a_html.replace(f["key"], "fresh-key-000"))
    assert r.status_code == 409 and b"already answered" in r.content
    assert Vote.objects.count() == 1


def test_voided_assignment_cannot_vote_and_slot_reopens_with_the_same_plan(admin_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled(raters=(1, 1))
    client = Client()
    html = join(client, rs.study).content.decode()
    html = answer(client, html).content.decode()
    assignment = Assignment.objects.get(rater__external_id="P1")
    assignment_void(assignment=assignment, actor=admin_user, reason="speeding")
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.VOIDED and assignment.void_reason == "speeding"
    assert Vote.objects.filter(trial__assignment=assignment).count() == 1  # kept
    r = answer(client, html)
    assert r.status_code == 403
    r = client.get(f"/s/{rs.study.link_token}/")
    assert b"Participation ended" in r.content
    copy = slot_reopen(assignment=assignment, actor=admin_user)
    assert copy.state == AssignmentState.OPEN and copy.slot == assignment.slot and copy.seed == assignment.seed
    old = list(assignment.trials.order_by("position").values_list("position", "comparison_id", "swapped", "is_repeat"))
    new = list(copy.trials.order_by("position").values_list("position", "comparison_id", "swapped", "is_repeat"))
    assert old == new
    assert not set(assignment.trials.values_list("token", flat=True)) & set(copy.trials.values_list("token", flat=True))
    for r in copy.trials.filter(is_repeat=True).select_related("repeat_of"):
        assert r.repeat_of.assignment_id == copy.pk
    assert {e.action for e in AuditEvent.objects.all()} >= {"assignment_void", "slot_reopen"}
    with pytest.raises(Conflict):
        slot_reopen(assignment=assignment, actor=admin_user)
    newcomer = participant_claim(study=rs.study, rater=participant_rater_get_or_create(study=rs.study, external_id="n"))
    assert newcomer.pk == copy.pk


def test_images_are_served_privately_without_names(settings) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    f = form_of(html)
    trial = Trial.objects.get(token=f["token"])
    for slot in ("ref", "left", "right"):
        r = client.get(f"/t/{f['token']}/{slot}.png")
        assert r.status_code == 200 and r["Content-Type"] == "image/png"
        assert "Content-Disposition" not in r and r["Cache-Control"].startswith("private")
        body = b"".join(r.streaming_content)
        with Image.open(io.BytesIO(body)) as im:
            assert not im.text  # type: ignore[attr-defined]
    # left is what the rater sees as A: canonical B when swapped; neutralized variants are served.
    left = b"".join(client.get(f"/t/{f['token']}/left.png").streaming_content)
    shown = trial.comparison.candidate_b if trial.swapped else trial.comparison.candidate_a
    assert left == (settings.MEDIA_ROOT / shown.neutralized_image.file.name).read_bytes()
    assert client.get(f"/t/{f['token']}/other.png").status_code == 404


def test_account_raters_use_the_link_too(rater_user) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    client.force_login(rater_user)
    r = client.get(f"/s/{rs.study.link_token}/")
    assert r.status_code == 200 and b"1 of 10" in r.content
    rater = Rater.objects.get(user=rater_user)
    assert rater.source == Rater.Source.ACCOUNT
    html = r.content.decode()
    assert answer(client, html).status_code == 200
    assert Vote.objects.filter(trial__assignment__rater=rater).count() == 1


def test_researchers_do_not_take_a_place(researcher) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    client = Client()
    client.force_login(researcher)
    r = client.get(f"/s/{rs.study.link_token}/")
    assert b"participant link" in r.content
    assert not Assignment.objects.filter(rater__isnull=False).exists()


def test_pause_and_resume_from_the_same_link() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study, "resumer").content.decode()
    html = answer(client, html).content.decode()
    html = answer(client, html).content.decode()
    pause = client.get(f"/s/{rs.study.link_token}/pause/").content.decode()
    assert "2 of 10" in pause and "participant=resumer" in pause
    fresh = Client()  # the browser was closed: the same link with the same id resumes
    html = join(fresh, rs.study, "resumer").content.decode()
    assert "3 of 10" in html


def test_instructions_are_sanitized() -> None:
    rs = scheduled(instructions_md="Hello <script>alert(1)</script> [x](javascript:alert(1)) *ok*")
    r = Client().get(f"/s/{rs.study.link_token}/instructions/")
    html = r.content.decode()
    assert "<em>ok</em>" in html and "alert(1)</script>" not in html and "javascript:" not in html


def test_study_link_command(settings, capsys) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    call_command("study_link", rs.study.slug)
    assert capsys.readouterr().out.strip() == f"http://127.0.0.1:8000/s/{rs.study.link_token}/"
    settings.ARBITER_PUBLIC_URL = "https://study.example.org/"
    call_command("study_link", rs.study.slug)
    assert capsys.readouterr().out.strip() == f"https://study.example.org/s/{rs.study.link_token}/"


def test_closed_study_says_so() -> None:
    rs = scheduled()
    rs.study.accepting_participants = False
    rs.study.save()
    assert b"not accepting participants" in join(Client(), rs.study).content


def test_vote_answer_validation_errors_name_the_field() -> None:
    from annotation.kinds.answer import pairwise_answer_clean

    with pytest.raises(ValidationFailed, match="field 'axis:TABLE'"):
        pairwise_answer_clean(active_axes=["TABLE"], verdict="A", confidence=3, axes={}, rationale="")
    with pytest.raises(ValidationFailed, match="not an active axis"):
        pairwise_answer_clean(active_axes=[], verdict="A", confidence=3, axes={"TABLE": 1}, rationale="")


# --- researcher pages ---------------------------------------------------------------------------


def test_researcher_pages_progress_quality_and_actions(researcher, admin_user, other_researcher) -> None:  # type: ignore[no-untyped-def]
    rs = scheduled()
    rs.study.researchers.add(researcher)
    client = Client()
    html = join(client, rs.study, "q1").content.decode()
    for verdict in ("A", "A", "B", "CANNOT_JUDGE"):
        html = answer(client, html, verdict=verdict).content.decode()
    r_client = Client()
    r_client.force_login(researcher)
    page = r_client.get(f"/research/studies/{rs.study.slug}/raters/")
    assert page.status_code == 200 and b"block-1" in page.content and b"every 5s" in page.content
    partial = r_client.get(f"/research/studies/{rs.study.slug}/raters/", HTTP_HX_REQUEST="true")
    assert b"<html" not in partial.content and b"4 / 30" in partial.content
    q = r_client.get(f"/research/studies/{rs.study.slug}/raters/quality/").content.decode()
    assert "q1" in q and "0.25" in q  # one CANNOT_JUDGE of four answers
    block = r_client.get(f"/research/studies/{rs.study.slug}/blocks/1/")
    assert block.status_code == 200 and b"q1" in block.content and b"Void" not in block.content
    assignment = Assignment.objects.get(rater__external_id="q1")
    assert r_client.post(f"/research/assignments/{assignment.pk}/void/").status_code == 403
    csv_text = r_client.get(f"/research/studies/{rs.study.slug}/schedule.csv").content.decode()
    assert csv_text.startswith("block,") and len(csv_text.strip().splitlines()) == 31
    # Another study's researcher sees nothing.
    o_client = Client()
    o_client.force_login(other_researcher)
    assert o_client.get(f"/research/studies/{rs.study.slug}/raters/").status_code == 404
    # Admin voids and reopens.
    a_client = Client()
    a_client.force_login(admin_user)
    assert b"Void" in a_client.get(f"/research/studies/{rs.study.slug}/blocks/1/").content
    a_client.post(f"/research/assignments/{assignment.pk}/void/", {"reason": "test"})
    assignment.refresh_from_db()
    assert assignment.state == AssignmentState.VOIDED
    a_client.post(f"/research/assignments/{assignment.pk}/reopen/")
    assert Assignment.objects.filter(block=assignment.block, slot=assignment.slot, state="open").exists()
    page = a_client.get(f"/research/studies/{rs.study.slug}/raters/", HTTP_HX_REQUEST="true").content.decode()
    assert "0 / 30" in page  # voided votes are excluded from progress


def test_schedule_from_the_admin_page_and_empty_state(admin_user, make_user) -> None:  # type: ignore[no-untyped-def]
    rs = make_rater_study()
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/research/studies/{rs.study.slug}/raters/").content.decode()
    assert "No blocks yet" in page and "16 human comparisons" in page
    r = client.post(f"/research/studies/{rs.study.slug}/schedule/",
                    {"blocks": 2, "block_size": 9, "repeats": 1, "min_gap": 2, "raters": "1,1", "seed": 1}, follow=True)
    assert b"fewer than 2 blocks" in r.content
    r = client.post(f"/research/studies/{rs.study.slug}/schedule/",
                    {"blocks": 2, "block_size": 8, "repeats": 1, "min_gap": 2, "raters": "1,1", "seed": 1}, follow=True)
    assert b"Schedule created" in r.content
    named = make_user("nina-rater", role="rater")
    r = client.post(f"/research/studies/{rs.study.slug}/blocks/2/assign/", {"user": named.pk}, follow=True)
    assert b"nina-rater now has slot 0" in r.content
    assert Assignment.objects.get(rater__user=named).block.position == 2


def test_schedule_api(admin_user, researcher) -> None:  # type: ignore[no-untyped-def]
    rs = make_rater_study()
    rs.study.researchers.add(researcher)
    client = Client()
    client.force_login(researcher)
    body = {"blocks": 2, "block_size": 8, "repeats": 1, "min_gap": 2, "raters": [1, 2], "seed": 3}
    assert client.post(f"/api/studies/{rs.study.slug}/schedule/", body, content_type="application/json").status_code == 403
    client.force_login(admin_user)
    r = client.post(f"/api/studies/{rs.study.slug}/schedule/", body, content_type="application/json")
    assert r.status_code == 201 and [b["target_raters"] for b in r.json()] == [1, 2]
    r = client.post(f"/api/studies/{rs.study.slug}/schedule/", body, content_type="application/json")
    assert r.status_code == 400 and "already has 2 blocks" in r.json()["detail"]
    csv_text = client.get(f"/api/studies/{rs.study.slug}/schedule/export/").content.decode()
    assert len(csv_text.strip().splitlines()) == 1 + 3 * 9
    progress = client.get(f"/api/studies/{rs.study.slug}/progress/").json()
    assert [p["target"] for p in progress] == [1, 2]


def test_the_hot_rater_requests_stay_within_their_query_budget(django_assert_max_num_queries) -> None:  # type: ignore[no-untyped-def]
    """Images and htmx answers are most of a study's traffic (docs/benchmarks.md, rater load):
    an image shown with its trial needs no query at all (the trial's image pass); an answer that
    leads to the next trial is the session, the trial, the axes (once), the locked transaction
    (which also counts the progress) and the next trial with its image files, with no second read
    of the assignment, the trial or the reference image, and no separate count."""
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    images = list(dict.fromkeys(re.findall(r'src="(/t/[^"]+\.png)"', html)))
    assert len(images) == 3
    for url in images:
        with django_assert_max_num_queries(0):
            response = client.get(url)
            b"".join(response.streaming_content)
        assert response.status_code == 200
    with django_assert_max_num_queries(10):
        r = answer(client, html)
    assert r.status_code == 200 and "2 of 10" in r.content.decode()
    assert Vote.objects.count() == 1
