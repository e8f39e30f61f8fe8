"""The bulk path of ``import_judge_outputs`` (issue 29 item 5): ``annotation.services.bulk_rows``
stores exactly what ``bulk_create`` stores, on SQLite (executemany) and PostgreSQL (COPY), and the
import keeps its validation, all-or-nothing rule and one-line errors on a file of thousands of lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from annotation.errors import ValidationFailed
from annotation.services.bulk_rows import rows_insert
from judges.models import Judge, JudgeOutput
from judges.services.outputs import (
    IMPORT_COLUMNS,
    _fast_row,
    _parse_line,
    _row_of,
    judge_outputs_import_jsonl,
)
from judges.validation import canonical_answer
from tests.judges.factories import make_example_study
from tests.judges.test_outputs_jsonl import line, write

pytestmark = pytest.mark.django_db

AXES = ["GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION", "TABLE"]  # c1's active axes
# The two copies differ only there (bulk_create sets auto_now_add created_at itself).
IGNORED = {"id", "judge_id", "created_at"}


def _rows_equal_bulk_create() -> None:
    study = make_example_study()
    comparisons = list(study.comparisons.order_by("pk"))
    now = timezone.now()
    values: list[tuple[Any, ...]] = []
    for k, comparison in enumerate(comparisons):
        for repeat in range(2):
            values.append(
                (
                    comparison.pk, "swapped" if k % 2 else "primary", repeat, "valid" if repeat == 0 else "invalid",
                    '{"winner": "A"} \u00e9\u4e2d', "" if repeat == 0 else "bad\nreply 'quoted' \\ tab\t",
                    "A" if repeat == 0 else "", 3 if repeat == 0 else None,
                    [{"id": "GLOBAL_LAYOUT_FIDELITY", "score": -2}, {"id": "T\u00e9", "score": 0}] if repeat == 0 else [],
                    "reason \u00e9" if repeat == 0 else "", "a" * 64 if repeat == 0 else "",
                    1200 + k, None if repeat else 30, 0, "m-1" if repeat == 0 else "", "",
                )
            )
    columns = [c for c in IMPORT_COLUMNS if c != "judge_id"]
    fast, slow = Judge.objects.create(name="fast"), Judge.objects.create(name="slow")
    constants = {"imported": True, "created_at": now, "finished_at": now}
    assert rows_insert(JudgeOutput, ["judge_id", *columns], [(fast.pk, *v) for v in values], constants=constants) == 6
    JudgeOutput.objects.bulk_create(
        JudgeOutput(judge=slow, **constants, **dict(zip(columns, v, strict=True))) for v in values
    )

    def stored(judge: Judge) -> list[dict[str, Any]]:
        rows = JudgeOutput.objects.filter(judge=judge).order_by("comparison_id", "repeat").values()
        return [{k: v for k, v in row.items() if k not in IGNORED} for row in rows]

    got, want = stored(fast), stored(slow)
    assert len(got) == 6 and got == want
    assert set(JudgeOutput.objects.filter(judge=fast).values_list("created_at", flat=True)) == {now}
    assert got[0]["superseded"] is False and got[0]["attempt_log"] == []
    assert got[0]["axis_scores"][1] == {"id": "T\u00e9", "score": 0}


def test_rows_insert_stores_what_bulk_create_stores() -> None:
    _rows_equal_bulk_create()


@pytest.mark.postgres
def test_rows_insert_by_copy_on_postgresql_stores_what_bulk_create_stores() -> None:
    assert connection.vendor == "postgresql"
    _rows_equal_bulk_create()


def test_rows_insert_refuses_unknown_columns_and_unset_auto_now_add() -> None:
    with pytest.raises(ValueError, match="no column"):
        rows_insert(JudgeOutput, ["nope"], [(1,)])
    with pytest.raises(ValueError, match="created_at is set on save"):
        rows_insert(JudgeOutput, ["judge_id"], [(1,)])
    assert rows_insert(JudgeOutput, ["judge_id"], []) == 0


def many_lines(n_repeats: int) -> list[dict[str, object]]:
    """c1 × 2 orders × n_repeats × 3 judges: strict, fenced and prose replies."""
    lines = []
    for repeat in range(n_repeats):
        for judge in ("bulk-a", "bulk-b", "bulk-c"):
            for order in ("primary", "swapped"):
                pick = (repeat + len(judge) + len(order)) % 7
                reply = {"winner": "ABT"[pick % 3].replace("T", "TIE"), "confidence": 1 + pick % 5,
                         "reason": f"r{repeat}", "axes": [{"id": a, "score": (pick + i) % 5 - 2} for i, a in enumerate(AXES)]}
                raw = json.dumps(reply)
                raw = "prose" if pick == 0 else (f"```json\n{raw}\n```" if pick == 1 else raw)
                lines.append(line(judge=judge, order=order, repeat=repeat, raw=raw,
                                  usage={"input_tokens": repeat, "output_tokens": 5, "cached_tokens": None}))
    return lines


def _a_big_file_imports_like_the_live_code(tmp_path: Path) -> None:
    study = make_example_study()
    lines = many_lines(500)  # 3,000 lines
    counts = judge_outputs_import_jsonl(study=study, path=write(tmp_path, lines))
    assert counts["lines"] == counts["created"] == 3000 == JudgeOutput.objects.count()
    stored = {
        (o.judge.name, o.order, o.repeat): o for o in JudgeOutput.objects.select_related("judge").filter(imported=True)
    }
    n_valid = 0
    for data in lines:
        out = stored[(data["judge"], data["order"], data["repeat"])]
        try:
            answer = canonical_answer(str(data["raw"]), active_axes=AXES, order=str(data["order"]))
        except ValueError as exc:
            assert (out.status, out.error, out.winner, out.axis_scores) == ("invalid", str(exc), "", [])
            continue
        n_valid += 1
        assert (out.status, out.winner, out.confidence, out.reason) == (
            "valid", answer.winner, answer.confidence, answer.reason
        )
        assert out.axis_scores == answer.axes_list() and out.raw == data["raw"]
        assert out.input_tokens == data["repeat"] and out.cached_tokens is None and out.finished_at is not None
    assert counts["valid"] == n_valid and 0 < n_valid < 3000

    # All or nothing: a bad last line of another big file writes nothing, in one line naming it.
    more = [line(judge="bulk-d", repeat=r) for r in range(2000)] + [line(judge="bulk-d", order="sideways")]
    with pytest.raises(ValidationFailed) as err:
        judge_outputs_import_jsonl(study=study, path=write(tmp_path, more, "more.jsonl"))
    assert str(err.value).startswith("more.jsonl line 2001, field 'order': expected primary or swapped")
    assert "\n" not in str(err.value)
    # An output that exists: refused whole, naming the line.
    again = [line(judge="bulk-e", repeat=r) for r in range(100)] + [lines[-1]]
    with pytest.raises(ValidationFailed, match=r"^again.jsonl line 101: .*already exists"):
        judge_outputs_import_jsonl(study=study, path=write(tmp_path, again, "again.jsonl"))
    assert JudgeOutput.objects.count() == 3000 and not Judge.objects.filter(name__in=["bulk-d", "bulk-e"]).exists()


def test_a_big_file_imports_like_the_live_code(tmp_path: Path) -> None:
    _a_big_file_imports_like_the_live_code(tmp_path)


@pytest.mark.postgres
def test_a_big_file_imports_like_the_live_code_on_postgresql(tmp_path: Path) -> None:
    assert connection.vendor == "postgresql"
    _a_big_file_imports_like_the_live_code(tmp_path)


@pytest.mark.parametrize("order", [["primary"], {"o": 1}])
def test_an_unhashable_order_is_the_usual_one_line_error(tmp_path: Path, order: object) -> None:
    study = make_example_study()
    with pytest.raises(ValidationFailed, match=r"^judges.jsonl line 1, field 'order': expected primary or swapped"):
        judge_outputs_import_jsonl(study=study, path=write(tmp_path, [line(order=order)]))


SHA = "ab" * 32
STRICT = line()["raw"]
# (line, whether the fast path takes it): every other line is left to _parse_line.
FAST_CASES = [
    (line(), True),
    (line(order="swapped", repeat=3, family="acme", model="m-1", request_id="req-9"), True),
    (line(raw=f"```json\n{STRICT}\n```"), True),
    (line(raw="prose", prompt_sha256=SHA), True),
    (line(status="failed", raw="", error="timeout"), True),
    (line(status="failed", raw="", prompt_sha256=SHA), True),
    (line(status="invalid", error="old", usage={"input_tokens": 5, "output_tokens": 0, "cached_tokens": 2}), True),
    (line(judge="  spaced  ", family=7, error=3), True),
    (line(usage={"input_tokens": 5, "output_tokens": 1, "cached_tokens": None}), False),
    (line(usage={"input_tokens": 5}), False),
    (line(model=None, request_id=None), False),
    (line(repeat=True), False),
    (line(judge="   "), False),
    (line(comparison="nope"), False),
    (line(status="pending"), False),
    (line(prompt_sha256="AB" * 32), False),
    (line(model="m" * 201), False),
    ({"comparison": "c1"}, False),
    ([1, 2], False),
]


@pytest.mark.parametrize(("data", "fast"), FAST_CASES)
def test_the_fast_line_path_gives_the_reference_row(data: Any, fast: bool) -> None:
    study = make_example_study()
    comparisons = {c.external_id: c for c in study.comparisons.select_related("page")}
    axes = list(study.axes.order_by("position"))
    got = _fast_row(data, comparisons, axes, {}, {}, {})
    assert (got is not None) == fast
    try:
        ref = _parse_line(where="x line 1", number=1, text=json.dumps(data), comparisons=comparisons, axes=axes)
    except ValidationFailed:
        assert got is None
        return
    want = (ref.judge, ref.family, ref.comparison.external_id, _row_of(ref, ref.comparison.pk, {}))
    assert got is None or got == want


def test_overlapping_imports_leave_the_collector_on() -> None:
    """The collector switch is process-wide: of two imports overlapping in one process (threads of
    a web worker), the one that ends first must not leave it off for good, nor turn it on under
    the other."""
    import gc
    import threading

    from judges.services.outputs import _collection_paused

    assert gc.isenabled()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def first() -> None:
        with _collection_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with _collection_paused():
            second_in.set()
            first_out.wait(5)
            seen["after the first ended"] = gc.isenabled()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"after the first ended": False}
    assert gc.isenabled()
