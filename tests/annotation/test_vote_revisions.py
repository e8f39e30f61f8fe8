"""Undo last answer (the revision replaces the vote, the first answer stays in its history),
problem reports, the votes CSV ``revised`` / ``first_label`` columns and axis titles (issue 17)."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from annotation.errors import Conflict, ValidationFailed
from annotation.models import Assignment, AssignmentState, Axis, Trial, TrialProblem, Vote, axis_title
from annotation.services.answers import VoteInput
from annotation.services.bundles.exporting import study_export_bundle
from annotation.services.bundles.importing import study_import_bundle
from annotation.services.trial_screens import trial_screens_forget
from annotation.services.vote_revisions import trial_problem_report, vote_revise
from annotation.services.votes_csv import votes_export_csv, votes_import_csv
from tests.annotation.rater_factories import make_rater_study
from tests.annotation.test_bundles import copy_bundle, edit_doc, read_doc
from tests.annotation.test_rater_flow import answer, form_of, join, scheduled

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def revise_form(html: str) -> dict[str, Any]:
    token = re.search(r'action="/t/([^/"]+)/revise/"', html)
    key = re.search(r'name="idempotency_key" value="([^"]+)"', html)
    return {"token": token.group(1) if token else None, "key": key.group(1) if key else None,
            "axes": list(dict.fromkeys(re.findall(r'name="axis:([A-Z_]+)"', html)))}


def checked(html: str, name: str) -> list[str]:
    return re.findall(rf'name="{re.escape(name)}" value="([^"]+)"[^>]*\schecked>', html)


def to_swapped_trial(client: Client, html: str) -> tuple[str, Trial]:
    """Answer trials until the one just answered was shown swapped; (page now shown, that trial)."""
    for _ in range(10):
        trial = Trial.objects.get(token=form_of(html)["token"])
        html = answer(client, html, verdict="A", score=2).content.decode()
        if trial.swapped:
            return html, trial
    raise AssertionError("no swapped trial")


def undo(client: Client, html: str) -> Any:
    return client.get(f"/t/{form_of(html)['token']}/undo/", **HX)


def test_undo_shows_the_previous_trial_with_its_answer_as_displayed_then_replaces_the_vote() -> None:
    rs = scheduled()
    client = Client()
    html, trial = to_swapped_trial(client, join(client, rs.study).content.decode())
    vote = Vote.objects.get(trial=trial)
    # Stored canonically (docs/protocol.md "Canonical answers"): the displayed A of a swapped trial is
    # canonical B, scores negated.
    assert vote.label == "B" and set(vote.axis_scores.values()) == {-2} and vote.history == []
    answered = Vote.objects.filter(trial__assignment=trial.assignment).count()
    assert f"{answered + 1} of 10" in html and 'form="undo-form"' in html and "Undo last answer" in html

    page = undo(client, html)
    body = page.content.decode()
    assert page.status_code == 200 and f"{answered} of 10" in body
    assert "You are changing your answer" in body and 'form="undo-form"' not in body
    f = revise_form(body)
    assert f["token"] == trial.token
    assert checked(body, "verdict") == ["A"] and checked(body, "confidence") == ["4"]
    assert all(checked(body, f"axis:{a}") == ["2"] for a in f["axes"])

    data = {"verdict": "B", "confidence": "2", "rationale": "changed my mind", "idempotency_key": f["key"],
            **{f"axis:{a}": "-1" for a in f["axes"]}}
    r = client.post(f"/t/{trial.token}/revise/", data, **HX)
    assert r.status_code == 200 and f"{answered + 1} of 10" in r.content.decode()
    vote.refresh_from_db()
    assert (vote.label, vote.confidence, vote.rationale) == ("A", 2, "changed my mind")
    assert set(vote.axis_scores.values()) == {1}  # displayed −1 on a swapped trial
    assert [h["label"] for h in vote.history] == ["B"] and vote.history[0]["confidence"] == 4
    assert Vote.objects.filter(trial__assignment=trial.assignment).count() == answered  # replaced, not added
    # A double submit of the revision stores it once; the same key with another body is refused.
    again = client.post(f"/t/{trial.token}/revise/", data, **HX)
    assert again.status_code == 200
    vote.refresh_from_db()
    assert len(vote.history) == 1
    other = client.post(f"/t/{trial.token}/revise/", {**data, "confidence": "5"}, **HX)
    assert other.status_code == 409
    vote.refresh_from_db()
    assert vote.confidence == 2 and len(vote.history) == 1


def test_a_late_retry_of_the_first_answer_after_a_revision_changes_nothing() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    first = form_of(html)
    data = {"verdict": "A", "confidence": "4", "idempotency_key": first["key"], "rationale": "",
            **{f"axis:{a}": "1" for a in first["axes"]}}
    html = client.post(f"/t/{first['token']}/vote/", data, **HX).content.decode()
    f = revise_form(undo(client, html).content.decode())
    r = client.post(f"/t/{first['token']}/revise/", {**data, "verdict": "TIE", "idempotency_key": f["key"]}, **HX)
    assert r.status_code == 200
    retry = client.post(f"/t/{first['token']}/vote/", data, **HX)
    assert retry.status_code == 200
    vote = Vote.objects.get(trial__token=first["token"])
    assert vote.label == "TIE" and len(vote.history) == 1 and Vote.objects.count() == 1


def test_any_answer_of_an_active_assignment_can_be_changed() -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    # Nothing answered yet: nothing to undo.
    nothing = undo(client, html)
    assert nothing.status_code == 409 and "no earlier answer" in nothing.content.decode()
    first = form_of(html)["token"]
    html = answer(client, html).content.decode()
    html = answer(client, html).content.decode()
    trial = Trial.objects.get(token=first)
    rater_id = trial.assignment.rater_id
    # Review (issue 30): an earlier answer than the last is changed too; the old one is kept.
    before = Vote.objects.get(trial=trial).label
    vote_revise(VoteInput(trial_token=first, rater_id=rater_id, verdict="B", confidence=3,
                axes=_axes_of(trial, 0), rationale="", idempotency_key="k" * 20))
    vote = Vote.objects.get(trial=trial)
    assert [h["label"] for h in vote.history] == [before] and Vote.objects.count() == 2
    # Stepping back from the first answer: there is none before it.
    stale = client.get(f"/t/{first}/undo/", **HX)
    assert stale.status_code == 409 and "no earlier answer" in stale.content.decode()
    # Another rater's session may not undo or revise.
    stranger = Client()
    join(stranger, rs.study, "P2")
    assert stranger.get(f"/t/{form_of(html)['token']}/undo/").status_code == 403
    assert stranger.post(f"/t/{first}/revise/", {"verdict": "A"}).status_code == 403
    # Invalid new answers are refused in plain words and the revise page is shown again.
    f = revise_form(undo(client, html).content.decode())
    bad = client.post(f"/t/{f['token']}/revise/", {"verdict": "A", "idempotency_key": f["key"]}, **HX)
    assert bad.status_code == 400 and "Choose a confidence from 1 to 5." in bad.content.decode()
    assert revise_form(bad.content.decode())["token"] == f["token"]
    # A finished assignment's answers stay as they are.
    Assignment.objects.filter(pk=trial.assignment_id).update(state=AssignmentState.FINISHED)
    last = Trial.objects.get(token=f["token"])
    with pytest.raises(Conflict, match="finished"):
        vote_revise(VoteInput(trial_token=last.token, rater_id=rater_id, verdict="B", confidence=3,
                    axes=_axes_of(last, 0), rationale="", idempotency_key="z" * 20))


def _axes_of(trial: Trial, score: int) -> dict[str, int]:
    """The trial's active axes, as its stored screen shows them (decision 0079)."""
    return {a["id"]: score for a in Trial.objects.values_list("screen", flat=True).get(pk=trial.pk)["axes"]}


def test_revisions_never_change_hidden_repeat_pairing() -> None:
    rs = scheduled(raters=(1, 1))
    client = Client()
    html = join(client, rs.study).content.decode()
    before = {t.pk: (t.position, t.swapped, t.is_repeat, t.repeat_of_id) for t in Trial.objects.all()}
    for _ in range(9):
        html = answer(client, html).content.decode()
        f = revise_form(undo(client, html).content.decode())
        r = client.post(f"/t/{f['token']}/revise/", {
            "verdict": "B", "confidence": "3", "idempotency_key": f["key"], **{f"axis:{a}": "0" for a in f["axes"]},
        }, **HX)
        html = r.content.decode()
    assert {t.pk: (t.position, t.swapped, t.is_repeat, t.repeat_of_id) for t in Trial.objects.all()} == before
    assert Vote.objects.exclude(history=[]).count() == 9


def test_votes_csv_carries_revised_and_first_label_and_imports_them(tmp_path: Path) -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    html, trial = to_swapped_trial(client, html)
    f = revise_form(undo(client, html).content.decode())
    client.post(f"/t/{trial.token}/revise/", {
        "verdict": "TIE", "confidence": "3", "idempotency_key": f["key"], **{f"axis:{a}": "0" for a in f["axes"]},
    }, **HX)
    out = tmp_path / "votes.csv"
    votes_export_csv(study=rs.study, path=out)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert header[-2:] == ["revised", "first_label"]
    revised = [r for r in rows if r["revised"] == "1"]
    assert len(revised) == 1 and revised[0]["label"] == "TIE" and revised[0]["first_label"] == "B"
    assert all(r["first_label"] == "" for r in rows if r["revised"] == "0")

    # Import into a fresh study of the same pages and systems, then export again: unchanged.
    copy = make_rater_study(slug="copy-study")
    votes_import_csv(study=copy.study, path=out)
    again = tmp_path / "again.csv"
    votes_export_csv(study=copy.study, path=again)
    assert again.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")
    stored = Vote.objects.get(trial__assignment__block__study=copy.study, label="TIE", history__0__label="B")
    assert stored.history == [{"label": "B", "imported": True}]


@pytest.mark.parametrize(("revised", "first", "message"), [
    ("2", "", "field 'revised': expected 0, 1 or empty"),
    ("0", "A", "field 'first_label': must be empty unless revised is 1"),
    ("1", "", "field 'first_label': expected one of A, B, TIE, CANNOT_JUDGE"),
])
def test_bad_revision_cells_are_refused(tmp_path: Path, revised: str, first: str, message: str) -> None:
    rs = scheduled()
    client = Client()
    answer(client, join(client, rs.study).content.decode())
    out = tmp_path / "votes.csv"
    votes_export_csv(study=rs.study, path=out)
    lines = out.read_text(encoding="utf-8").splitlines()
    lines[0] += ",revised,first_label"
    lines[1] += f",{revised},{first}"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    copy = make_rater_study(slug="copy-bad")
    with pytest.raises(ValidationFailed, match=re.escape(message)):
        votes_import_csv(study=copy.study, path=out)
    assert not Vote.objects.filter(trial__assignment__block__study=copy.study).exists()


def test_problem_reports_are_stored_shown_to_researchers_and_are_not_votes(admin_user: Any) -> None:
    rs = scheduled()
    client = Client()
    html = join(client, rs.study).content.decode()
    token = form_of(html)["token"]
    assert f'action="/t/{token}/problem/"' in html and "Report a problem" in html
    missing = client.post(f"/t/{token}/problem/", {"kind": "other", "text": "  "}, **HX)
    assert missing.status_code == 400 and "Say in a few words what went wrong." in missing.content.decode()
    r = client.post(f"/t/{token}/problem/", {"kind": "image", "text": ""}, **HX)
    assert r.status_code == 200 and "problem is reported" in r.content.decode() and "<html" not in r.content.decode()
    client.post(f"/t/{token}/problem/", {"kind": "image", "text": "the B image is blank"}, **HX)
    client.post(f"/t/{token}/problem/", {"kind": "other", "text": "the page is slow"}, **HX)
    assert TrialProblem.objects.count() == 2  # one per kind; a second report of a kind updates it
    assert TrialProblem.objects.get(kind="image").text == "the B image is blank"
    assert not Vote.objects.exists()
    assert "1 of 10" in client.get(f"/s/{rs.study.link_token}/").content.decode()  # still the same trial
    stranger = Client()
    join(stranger, rs.study, "P2")
    assert stranger.post(f"/t/{token}/problem/", {"kind": "image"}, **HX).status_code == 403
    with pytest.raises(ValidationFailed):
        trial_problem_report(trial_token=token, rater_id=None, kind="nonsense", text="")
    researcher = Client()
    researcher.force_login(admin_user)
    page = researcher.get(f"/studies/{rs.study.slug}/").content.decode()
    assert "Problems reported by raters" in page and "the B image is blank" in page
    assert "An image did not load" in page and "the page is slow" in page


def test_axis_titles_are_imported_exported_and_shown(tmp_path: Path, examples_dir: Path) -> None:
    def titled(doc: dict[str, Any]) -> None:
        doc["axes"][0]["title"] = "Global layout"

    bundle = edit_doc(copy_bundle(examples_dir, tmp_path / "b"), titled)
    study = study_import_bundle(path=bundle)
    axes = list(Axis.objects.filter(study=study).order_by("position"))
    assert axes[0].title == "Global layout" and axes[0].display_title == "Global layout"
    assert axes[1].title == "" and axes[1].display_title == axis_title(axes[1].axis_id)
    out = read_doc(study_export_bundle(study=study, path=tmp_path / "out"))
    assert out["axes"][0]["title"] == "Global layout" and "title" not in out["axes"][1]
    assert out == read_doc(bundle)
    assert axis_title("GLOBAL_LAYOUT_FIDELITY") == "Global layout fidelity" and axis_title("TABLE") == "Table"


def test_trial_page_shows_axis_titles() -> None:
    rs = scheduled()
    Axis.objects.filter(study=rs.study, axis_id="GLOBAL_LAYOUT_FIDELITY").update(title="Layout")
    trial_screens_forget(rs.study.pk)  # the trials' stored screens are made again with the new title
    html = join(Client(), rs.study).content.decode()
    assert "<legend>Layout</legend>" in html and "<legend>Text visual presentation</legend>" in html


def test_the_rater_api_revises_and_reports_through_the_same_services() -> None:
    rs = scheduled()
    client = Client()
    join(client, rs.study)
    csrf = {"HTTP_X_CSRFTOKEN": ""}
    api = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()
    csrf["HTTP_X_CSRFTOKEN"] = client.cookies["csrftoken"].value
    first = api["trial"]
    body = {"verdict": "A", "confidence": 5, "axes": {a["id"]: 1 for a in api["axes"]},
            "idempotency_key": api["idempotency_key"]}
    assert client.post(api["vote_url"], body, content_type="application/json", **csrf).status_code == 200
    revise = f"/api/rater/trials/{first}/revise/"
    changed = {**body, "verdict": "TIE", "idempotency_key": "revision-key-1"}
    r = client.post(revise, changed, content_type="application/json", **csrf)
    assert r.status_code == 200 and r.json()["recorded"] is True
    assert client.post(revise, changed, content_type="application/json", **csrf).status_code == 200  # replay
    vote = Vote.objects.get(trial__token=first)
    assert vote.label == ("TIE") and len(vote.history) == 1
    assert client.post(revise, {**changed, "confidence": 1}, content_type="application/json", **csrf).status_code == 409
    nxt = client.get(f"/api/rater/{rs.study.link_token}/trial/").json()["trial"]
    problem = f"/api/rater/trials/{nxt}/problem/"
    r = client.post(problem, {"kind": "difference"}, content_type="application/json", **csrf)
    assert r.status_code == 201 and r.json() == {"reported": True, "kind": "difference"}
    assert client.post(problem, {"kind": "other"}, content_type="application/json", **csrf).status_code == 400
    assert client.post(problem, {"kind": "bogus"}, content_type="application/json", **csrf).status_code == 400
    assert TrialProblem.objects.filter(trial__token=nxt).count() == 1 and Vote.objects.count() == 1
    # Without the CSRF header the session's API refuses.
    strict = Client(enforce_csrf_checks=True)
    join(strict, rs.study, "P9")
    assert strict.post(problem, {"kind": "image"}, content_type="application/json").status_code == 403


def test_participant_pages_say_errors_in_plain_words() -> None:
    rs = scheduled()
    bad_id = Client().get(f"/s/{rs.study.link_token}/", {"participant": "has space"}).content.decode()
    assert "A participant id is 1–100 letters" in bad_id and "field '" not in bad_id
    client = Client()
    html = join(client, rs.study).content.decode()
    f = form_of(html)
    r = client.post(f"/t/{f['token']}/vote/", {"verdict": "A", "confidence": "9", "idempotency_key": f["key"]}, **HX)
    body = r.content.decode()
    assert r.status_code == 400 and "Choose a confidence from 1 to 5." in body and "must be one of" not in body
    r = client.post(f"/t/{f['token']}/vote/", {"verdict": "A", "confidence": "3"}, **HX)
    assert r.status_code == 400 and "This page is out of date. Reload it and answer again." in r.content.decode()
