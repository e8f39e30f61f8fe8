"""Judge outputs JSONL (docs/protocol.md "Files"): import validates like live calls, all-or-nothing; export
round-trips."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ValidationFailed
from judges.models import Judge, JudgeOutput
from judges.services.outputs import judge_outputs_export_jsonl, judge_outputs_import_jsonl
from tests.judges.factories import make_example_study

pytestmark = pytest.mark.django_db


def write(tmp_path: Path, lines: list[object], name: str = "judges.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def line(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "comparison": "c1", "judge": "judge-x", "order": "primary", "repeat": 0,
        "raw": json.dumps({"winner": "B", "confidence": 2, "reason": "r", "axes": [
            {"id": "GLOBAL_LAYOUT_FIDELITY", "score": -1}, {"id": "TEXT_VISUAL_PRESENTATION", "score": 0},
            {"id": "TABLE", "score": -2}]}),
    }
    data.update(overrides)
    return data


def test_the_spec_example_file(examples_dir: Path, tmp_path: Path) -> None:
    study = make_example_study()
    out = StringIO()
    call_command("import_judge_outputs", "example", str(examples_dir / "judges.jsonl"), stdout=out)
    assert "imported 3 judge outputs: 2 valid, 1 invalid, 0 failed (1 new judges)" in out.getvalue()
    judge = Judge.objects.get(name="judge-x")
    assert judge.provider == "imported"
    export = tmp_path / "out.jsonl"
    call_command("export_judge_outputs", "example", str(export), stdout=StringIO())
    got = {(d["comparison"], d["order"]): d for d in map(json.loads, export.read_text().splitlines())}
    primary, swapped, prose = got["c1", "primary"], got["c1", "swapped"], got["c2", "primary"]
    assert primary["status"] == "valid" and primary["winner"] == "A"
    assert swapped["status"] == "valid" and swapped["winner"] == "A"
    assert {a["id"]: a["score"] for a in swapped["axes"]} == {
        "GLOBAL_LAYOUT_FIDELITY": 1, "TEXT_VISUAL_PRESENTATION": 0, "TABLE": 2
    }
    assert swapped["raw"].startswith("```json")
    assert prose["status"] == "invalid" and prose["error"]
    assert "winner" not in prose
    assert set(primary) == {"comparison", "judge", "order", "repeat", "raw", "status", "error", "winner", "family",
                            "confidence", "axes", "reason"}
    assert study.comparisons.count() == 3


def test_export_then_import_round_trips(examples_dir: Path, tmp_path: Path) -> None:
    make_example_study()
    judge_outputs_import_jsonl(study=make_example_study(slug="other"), path=examples_dir / "judges.jsonl")
    source = make_example_study(slug="source")
    judge_outputs_import_jsonl(study=source, path=examples_dir / "judges.jsonl")
    failed = JudgeOutput.objects.filter(comparison__study=source).first()
    assert failed is not None
    JudgeOutput.objects.create(judge=failed.judge, comparison=source.comparisons.get(external_id="c3"), order="primary",
                               status="failed", error="transport failure after 6 tries: HTTP 500")
    first = tmp_path / "first.jsonl"
    assert judge_outputs_export_jsonl(study=source, path=first) == 4
    target = make_example_study(slug="target")
    counts = judge_outputs_import_jsonl(study=target, path=first)
    assert counts == {"lines": 4, "created": 4, "valid": 2, "invalid": 1, "failed": 1, "judges_created": 0}
    second = tmp_path / "second.jsonl"
    judge_outputs_export_jsonl(study=target, path=second)
    assert second.read_text() == first.read_text()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([line(), "{not json", line(repeat=1)], "judges.jsonl line 2: not JSON"),
        ([line(), line(repeat=1), {"comparison": "c1", "judge": "j", "order": "primary", "repeat": 2}],
         "judges.jsonl line 3: missing key(s) raw"),
        ([line(comparison="c9")], "unknown comparison \"c9\""),
        ([line(order="sideways")], "field 'order'"),
        ([line(repeat=True)], "field 'repeat'"),
        ([line(repeat=-1)], "field 'repeat'"),
        ([line(raw=None)], "field 'raw'"),
        ([line(prompt_sha256="abc")], "field 'prompt_sha256'"),
        ([line(prompt_sha256=["0" * 64])], "field 'prompt_sha256'"),
        ([line(), line()], "judges.jsonl line 2: the output (judge, comparison, order, repeat)"),
        ([line(usage=[1, 2])], "field 'usage'"),
        ([line(usage={"input_tokens": -1})], "field 'usage.input_tokens'"),
        ([line(usage={"input_tokens": "12"})], "field 'usage.input_tokens'"),
        ([line(usage={"input_tokens": 1, "dollars": 2})], "unexpected key(s) dollars in usage"),
        ([line(model=5)], "field 'model'"),
        (["[1]"], "expected a JSON object"),
        ([], "holds no judge outputs"),
    ],
)
def test_bad_lines_are_refused_whole(tmp_path: Path, lines: list[object], message: str) -> None:
    make_example_study()
    path = write(tmp_path, lines)
    with pytest.raises(CommandError) as info:
        call_command("import_judge_outputs", "example", str(path))
    assert message in str(info.value)
    assert str(info.value).startswith("judges.jsonl")
    assert "\n" not in str(info.value)
    assert not JudgeOutput.objects.exists() and not Judge.objects.exists()


def test_an_existing_output_is_an_error_and_nothing_is_written(tmp_path: Path) -> None:
    study = make_example_study()
    judge_outputs_import_jsonl(study=study, path=write(tmp_path, [line()], "first.jsonl"))
    path = write(tmp_path, [line(repeat=1), line(order="swapped"), line()])
    with pytest.raises(ValidationFailed, match=r"judges.jsonl line 3: .*already exists"):
        judge_outputs_import_jsonl(study=study, path=path)
    assert JudgeOutput.objects.count() == 1


def test_import_canonicalizes_with_the_live_code(tmp_path: Path) -> None:
    study = make_example_study()
    path = write(tmp_path, [line(order="swapped"), line(comparison="c2", raw=line()["raw"])])
    counts = judge_outputs_import_jsonl(study=study, path=path)
    assert counts["valid"] == 1 and counts["invalid"] == 1
    swapped = JudgeOutput.objects.get(comparison__external_id="c1")
    assert swapped.winner == "A" and [a["score"] for a in swapped.axis_scores] == [1, 0, 2]
    # c2's page has no TABLE target: an answer that scores TABLE is invalid there.
    c2 = JudgeOutput.objects.get(comparison__external_id="c2")
    assert c2.status == "invalid" and "exactly the active axes" in c2.error
    assert c2.imported


def test_unknown_study_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("export_judge_outputs", "nope", str(tmp_path / "x.jsonl"))


def test_the_prompt_fingerprint_survives_export_and_import(tmp_path: Path) -> None:
    """Outputs of called judges carry their prompt template's sha256 through a JSONL round trip;
    imported outputs without one export none; a failed call records none."""
    source = make_example_study(slug="source")
    path = write(tmp_path, [line(), line(order="swapped"), line(comparison="c2", prompt_sha256="a" * 64),
                            line(comparison="c3", prompt_sha256="b" * 64, status="failed")])
    judge_outputs_import_jsonl(study=source, path=path)
    got = dict(JudgeOutput.objects.filter(comparison__study=source).values_list("comparison__external_id", "prompt_sha256")
               .filter(order="primary"))
    assert got == {"c1": "", "c2": "a" * 64, "c3": ""}
    exported = tmp_path / "out.jsonl"
    judge_outputs_export_jsonl(study=source, path=exported)
    records = {(d["comparison"], d["order"]): d for d in map(json.loads, exported.read_text().splitlines())}
    assert records["c2", "primary"]["prompt_sha256"] == "a" * 64
    assert "prompt_sha256" not in records["c1", "primary"] and "prompt_sha256" not in records["c3", "primary"]
    target = make_example_study(slug="target")
    judge_outputs_import_jsonl(study=target, path=exported)
    again = tmp_path / "again.jsonl"
    judge_outputs_export_jsonl(study=target, path=again)
    assert again.read_text() == exported.read_text()


def test_usage_model_and_request_id_of_live_calls_survive_export_and_import(tmp_path: Path) -> None:
    from tests.judges.factories import make_judge
    from tests.judges.fake_provider import FakeProvider

    provider = FakeProvider().start()
    try:
        source = make_example_study(slug="source")
        make_judge(base_url=provider.url)
        call_command("run_judges", "source", "--judge", "judge-x", "--set", "human", "--concurrency", "1",
                     stdout=StringIO())
    finally:
        provider.stop()
    exported = tmp_path / "out.jsonl"
    judge_outputs_export_jsonl(study=source, path=exported)
    records = [json.loads(t) for t in exported.read_text().splitlines()]
    assert records and all(r["usage"] == {"input_tokens": 1200, "output_tokens": 40, "cached_tokens": 0} for r in records)
    assert all(r["model"] == "served-model-1" and r["request_id"].startswith("req-") for r in records)
    target = make_example_study(slug="target")
    Judge.objects.filter(name="judge-x").update(name="judge-x-live")
    judge_outputs_import_jsonl(study=target, path=exported)
    imported = JudgeOutput.objects.filter(comparison__study=target)
    assert {(o.input_tokens, o.output_tokens, o.cached_tokens, o.served_model) for o in imported} == {
        (1200, 40, 0, "served-model-1")}
    again = tmp_path / "again.jsonl"
    judge_outputs_export_jsonl(study=target, path=again)
    assert again.read_text() == exported.read_text()
