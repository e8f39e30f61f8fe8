"""Hostile bodies answer 400 (or exit 1) with one line, and write nothing (SECURITY.md row 19).

JSON nested 100,000 deep and NUL characters, to the token endpoint, the participant vote API (JSON
and the htmx form), the votes CSV (command and API), ``import_judge_outputs``,
``import_coefficients`` and query strings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from annotation.models import Vote
from annotation.safe_json import JSONRefused, loads_bounded
from annotation.services.scheduling import blocks_schedule
from judges.models import Judge, JudgeOutput
from tests.annotation.factories import EXAMPLE_ROWS, HEADER, make_study, write_votes_csv
from tests.annotation.rater_factories import make_rater_study
from tests.judges.factories import make_example_study
from tests.judges.test_outputs_jsonl import line as judge_output_line

pytestmark = pytest.mark.django_db

DEEP = 100_000


def deep_json(key: str = "username", depth: int = DEEP) -> str:
    return '{"' + key + '": ' + "[" * depth + "]" * depth + "}"


def _one_line_400(response) -> str:  # type: ignore[no-untyped-def]
    assert response.status_code == 400, response.content[:300]
    detail = response.json()["detail"]
    assert "\n" not in detail and "Traceback" not in detail
    return detail


def test_the_bounded_loader_names_depth_and_path() -> None:
    with pytest.raises(JSONRefused, match="nested deeper than 64"):
        loads_bounded(deep_json())
    with pytest.raises(JSONRefused, match=r"nested deeper than 64 levels at \$\.a"):
        loads_bounded('{"a": ' + "[" * 70 + "]" * 70 + "}")
    with pytest.raises(JSONRefused, match=r"\$\.a\[1\] contains a NUL character"):
        loads_bounded('{"a": ["ok", "x\\u0000y"]}')
    assert loads_bounded('{"a": [[1]], "b": "\\u00e9"}') == {"a": [[1]], "b": "é"}


@pytest.mark.parametrize(
    "text", ['{"a": 1}', '{"a": 1} {"b": 2}', '{"a": 1}}', '{"a" 1}', '{"a": NaN}', "{}", '{"a": "}"}', '{"a": [}']
)
def test_the_bounded_loaders_object_scan_agrees_with_json_loads(text: str) -> None:
    # loads_bounded scans a "{...}" text itself; json.loads's value or error is the reference.
    try:
        want: object = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as err:
            loads_bounded(text)
        assert (err.value.msg, err.value.pos) == (exc.msg, exc.pos)
    else:
        assert loads_bounded(text) == want


def test_deep_and_nul_json_to_the_token_endpoint_answer_400(researcher: object) -> None:
    client = Client()
    detail = _one_line_400(client.post("/api/auth/token/", deep_json(), content_type="application/json"))
    assert "nested deeper than 64" in detail
    body = json.dumps({"username": "rita-researcher\u0000", "password": "pw-arbiter-123"})
    assert "NUL" in _one_line_400(client.post("/api/auth/token/", body, content_type="application/json"))
    ok = client.post("/api/auth/token/", {"username": "rita-researcher", "password": "pw-arbiter-123"})
    assert ok.status_code == 200  # the refused bodies counted as no failed login


def _participant(client: Client):  # type: ignore[no-untyped-def]
    rs = make_rater_study(pages=4)
    blocks_schedule(study=rs.study, blocks=1, block_size=4, repeats=0, min_gap=1, raters=[1], seed=2)
    client.get(f"/s/{rs.study.link_token}/", {"participant": "hostile-1"})
    return rs, client.get(f"/api/rater/{rs.study.link_token}/trial/").json()


def test_deep_and_nul_json_to_the_participant_vote_api_answer_400() -> None:
    client = Client()
    _, api = _participant(client)
    vote_url = api["vote_url"]
    detail = _one_line_400(client.post(vote_url, deep_json("axes"), content_type="application/json"))
    assert "nested deeper than 64" in detail
    body = {
        "verdict": "A",
        "confidence": 3,
        "axes": {a["id"]: 0 for a in api["axes"]},
        "idempotency_key": api["idempotency_key"],
        "rationale": "fine\u0000",
    }
    assert "$.rationale contains a NUL character" in _one_line_400(
        client.post(vote_url, json.dumps(body), content_type="application/json")
    )
    assert not Vote.objects.exists()


def test_a_nul_in_the_htmx_vote_form_or_a_query_string_answers_400(researcher: object) -> None:
    client = Client()
    _, api = _participant(client)
    r = client.post(
        f"/t/{api['trial']}/vote/",
        {"verdict": "A", "confidence": "3", "rationale": "x\x00y", "idempotency_key": api["idempotency_key"]},
    )
    assert r.status_code == 400 and b"Field &#x27;rationale&#x27; contains a NUL character." in r.content
    assert not Vote.objects.exists()
    client.force_login(researcher)  # type: ignore[arg-type]
    assert "NUL" in _one_line_400(client.get("/api/studies/", {"limit": "1\x00"}))


def test_a_nul_rationale_in_a_votes_csv_is_one_line_and_nothing_written(
    tmp_path: Path, researcher: object
) -> None:
    study = make_study()
    rows = [dict(row) for row in EXAMPLE_ROWS]
    rows[2]["rationale"] = "bad\x00cell"
    path = write_votes_csv(tmp_path / "votes.csv", rows, HEADER)
    with pytest.raises(CommandError) as info:
        call_command("import_votes", study.slug, str(path))
    message = str(info.value)
    assert message == "votes.csv line 4, field 'rationale': contains a NUL character"
    study.researchers.add(researcher)  # type: ignore[arg-type]
    client = Client()
    client.force_login(researcher)  # type: ignore[arg-type]
    with path.open("rb") as handle:
        r = client.post(f"/api/studies/{study.slug}/votes/import/", {"file": handle})
    assert "line 4, field 'rationale': contains a NUL character" in _one_line_400(r)
    assert not Vote.objects.exists()


def _judge_line(**overrides: object) -> str:
    return json.dumps(judge_output_line(**overrides))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_judge_line(raw='{"winner": "A\u0000"}'), "judges.jsonl line 2: $.raw contains a NUL character"),
        (_judge_line(judge="j\u0000"), "judges.jsonl line 2: $.judge contains a NUL character"),
        (
            '{"comparison": ' + "[" * DEEP + "]" * DEEP + "}",
            "judges.jsonl line 2: nested deeper than 64 levels",
        ),
    ],
)
def test_import_judge_outputs_refuses_nul_and_deep_lines_in_one_line(
    tmp_path: Path, bad: str, message: str
) -> None:
    make_example_study()
    path = tmp_path / "judges.jsonl"
    path.write_text(_judge_line() + "\n" + bad + "\n", encoding="utf-8")
    with pytest.raises(CommandError) as info:
        call_command("import_judge_outputs", "example", str(path))
    assert str(info.value) == message
    assert not JudgeOutput.objects.exists() and not Judge.objects.exists()


def test_a_deeply_nested_raw_reply_is_an_invalid_output_not_a_traceback(tmp_path: Path) -> None:
    make_example_study()
    path = tmp_path / "judges.jsonl"
    path.write_text(_judge_line(raw="[" * DEEP + "]" * DEEP) + "\n", encoding="utf-8")
    call_command("import_judge_outputs", "example", str(path))
    output = JudgeOutput.objects.get()
    assert output.status == "invalid" and "nested too deeply" in output.error


def test_import_coefficients_refuses_a_deep_file_in_one_line(tmp_path: Path) -> None:
    make_example_study()
    path = tmp_path / "coefficients.json"
    path.write_text(deep_json("name"), encoding="utf-8")
    with pytest.raises(CommandError) as info:
        call_command("import_coefficients", "example", str(path))
    assert re.fullmatch(r"coefficients\.json: nested deeper than 64 levels", str(info.value)), str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        "/s/ab%00c/",
        "/t/abc%00/ref.png",
        "/leaderboard/ab%00c/",
        "/leaderboard/ab%00c/leaderboard.csv",
        "/api/leaderboards/ab%00/",
        "/api/rater/ab%00/trial/",
    ],
)
def test_a_nul_in_a_url_path_answers_400_not_a_database_error(url: str) -> None:
    """``<str:token>`` path segments reach ``filter(token=...)``: on PostgreSQL a NUL there was a 500."""
    r = Client().get(url)
    assert r.status_code == 400, (url, r.status_code)
    assert b"NUL" in r.content


def test_an_integer_over_python_s_digit_limit_names_the_line_and_the_file(tmp_path: Path) -> None:
    """``json.loads`` raises a plain ValueError (not JSONDecodeError) past 4,300 digits."""
    make_example_study()
    path = tmp_path / "judges.jsonl"
    path.write_text(_judge_line() + "\n" + '{"comparison": ' + "1" * 5000 + "}\n", encoding="utf-8")
    with pytest.raises(CommandError) as info:
        call_command("import_judge_outputs", "example", str(path))
    assert str(info.value).startswith("judges.jsonl line 2: "), str(info.value)
    assert not JudgeOutput.objects.exists()
    coefficients = tmp_path / "coefficients.json"
    coefficients.write_text('{"name": "x", "coefficients": {"j": ' + "1" * 5000 + "}}", encoding="utf-8")
    with pytest.raises(CommandError) as info:
        call_command("import_coefficients", "example", str(coefficients))
    assert str(info.value).startswith("coefficients.json: "), str(info.value)


def test_an_integer_past_the_digit_limit_in_a_form_or_a_votes_csv_is_one_line(
    tmp_path: Path, researcher: object
) -> None:
    """``int()`` of a 5,000-digit string raises ValueError: the htmx vote form answered 500."""
    client = Client()
    _, api = _participant(client)
    r = client.post(
        f"/t/{api['trial']}/vote/",
        {
            "verdict": "A",
            "confidence": "9" * 5000,
            "rationale": "x",
            "idempotency_key": api["idempotency_key"],
        },
    )
    assert r.status_code == 400
    assert not Vote.objects.exists()
    study = make_study()
    rows = [dict(row) for row in EXAMPLE_ROWS]
    rows[2]["confidence"] = "9" * 5000
    path = write_votes_csv(tmp_path / "votes.csv", rows, HEADER)
    with pytest.raises(CommandError) as info:
        call_command("import_votes", study.slug, str(path))
    assert str(info.value).startswith("votes.csv line 4, field 'confidence'"), str(info.value)[:200]
    study.researchers.add(researcher)  # type: ignore[arg-type]
    client.force_login(researcher)  # type: ignore[arg-type]
    with path.open("rb") as handle:
        r = client.post(f"/api/studies/{study.slug}/votes/import/", {"file": handle})
    assert "line 4, field 'confidence'" in _one_line_400(r)
