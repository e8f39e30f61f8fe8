"""Judge outputs JSONL import / export (docs/protocol.md "Files", "Commands" ``import_judge_outputs`` /
``export_judge_outputs``).

Import: every line is checked before anything is written (all-or-nothing); each raw reply is
validated and canonicalized by ``judges.validation.canonical_answer`` — the code live calls use.
A line with ``"status": "failed"`` (no reply after the transport retries, as exported) stays
failed. Unknown judges are created with ``provider="imported"``. An output that already exists
for (judge, comparison, order, repeat) is an error. Errors read ``judges.jsonl line 3: ...``.
A line with ``item`` in place of ``comparison`` is a call about one rendering (a checklist or
ratings call): its reply is validated against what the study's kind asks of that rendering
(``judges.request_building.request_contract``, as a stored batch result is), and a valid checklist
reply stores its questions' rows with it; (judge, item, order, repeat) must be new likewise.

Export: the finished outputs in force (valid, invalid, failed; a superseded one is history), one
JSON object per line, the comparisons' first: ``comparison, judge, order, repeat, raw, status,
error`` and, for valid ones, the canonical ``winner, confidence, axes [{id, score}], reason``; when
known (docs/protocol.md "Files") ``usage {input_tokens, output_tokens, cached_tokens}`` (summed
over every attempt of the call), the served ``model`` and the provider's ``request_id``; beyond
docs/protocol.md "Files", the judge's ``family`` and, when known, the ``prompt_sha256`` of the
template the judge answered (all read back on import). Then the calls about one rendering:
``item`` (its bundle id) in place of ``comparison``, and for a valid checklist call ``answers
[{predicate, answer, evidence, passed}]`` (in the order asked), for a valid ratings call ``ratings
[{id, score}], reason``. Exporting then importing round-trips.
"""

from __future__ import annotations

import gc
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from annotation.errors import ValidationFailed
from annotation.models import Axis, Candidate, Comparison, Study
from annotation.safe_json import JSONRefused, loads_bounded
from annotation.services.audit import audit_record
from annotation.services.bulk_rows import JSONText, rows_insert
from judges.models import Judge, JudgeChecklistAnswer, JudgeOutput, Order, OutputStatus, Provider
from judges.validation import InvalidReply, canonical_answer

REQUIRED_KEYS = ("comparison", "judge", "order", "repeat", "raw")
FINISHED = (OutputStatus.VALID, OutputStatus.INVALID, OutputStatus.FAILED)
# The columns an import fills per line (annotation.services.bulk_rows; the rest take their defaults).
IMPORT_COLUMNS = (
    "judge_id", "comparison_id", "order", "repeat", "status", "raw", "error", "winner", "confidence",
    "axis_scores", "reason", "prompt_sha256", "input_tokens", "output_tokens", "cached_tokens", "served_model",
    "request_id",
)
ORDER_VALUES = frozenset(Order.values)  # Order.values builds a new list on every access
_VALID, _INVALID, _FAILED = str(OutputStatus.VALID), str(OutputStatus.INVALID), str(OutputStatus.FAILED)


@dataclass(slots=True)
class _Line:
    number: int
    comparison: Comparison
    judge: str
    family: str
    order: str
    repeat: int
    raw: str
    status: str
    error: str
    answer: Any
    prompt_sha256: str = ""
    usage: tuple[int | None, int | None, int | None] = (None, None, None)
    model: str = ""
    request_id: str = ""


_SHA256 = re.compile(r"[0-9a-f]{64}")


USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens")


def _usage(data: dict[str, Any], where: str) -> tuple[int | None, int | None, int | None]:
    usage = data.get("usage")
    if usage is None:
        return (None, None, None)
    if type(usage) is dict and len(usage) == 3:  # the common case, all three counts: the checks below in short
        given = (usage.get("input_tokens"), usage.get("output_tokens"), usage.get("cached_tokens"))
        if all(type(v) is int and v >= 0 for v in given):
            return given
    if not isinstance(usage, dict):
        raise ValidationFailed("expected usage as an object {input_tokens, output_tokens, cached_tokens}", where=where,
                               field="usage")
    extra = sorted(set(usage) - set(USAGE_KEYS))
    if extra:
        raise ValidationFailed(f"unexpected key(s) {', '.join(extra)} in usage", where=where, field="usage")
    counts: list[int | None] = []
    for key in USAGE_KEYS:
        value = usage.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValidationFailed(f"expected an integer ≥ 0 or null, got {json.dumps(value)[:40]}", where=where,
                                   field=f"usage.{key}")
        counts.append(value)
    return (counts[0], counts[1], counts[2])


def _short_text(data: dict[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if value is None:
        return ""
    if type(value) is str and len(value) <= 200:
        return value
    if not isinstance(value, str) or len(value) > 200:
        raise ValidationFailed("expected a string of at most 200 characters", where=where, field=key)
    return value


def _read_lines(path: Path) -> list[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValidationFailed("the file is not UTF-8 text", where=path.name) from None
    except OSError as exc:
        raise ValidationFailed(f"cannot read the file ({exc.strerror})", where=path.name) from None
    return [(i, line) for i, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _parse_line(
    *,
    where: str,
    number: int,
    text: str,
    comparisons: dict[str, Comparison],
    axes: list[Axis],
    active_of: dict[int, list[str]] | None = None,
) -> _Line:
    try:
        data = loads_bounded(text)
    except json.JSONDecodeError as exc:
        raise ValidationFailed(f"not JSON ({exc.msg} at column {exc.colno})", where=where) from None
    except JSONRefused as exc:
        # Too deep, or NUL in a string (PostgreSQL text cannot hold it): the line is refused whole.
        raise ValidationFailed(str(exc), where=where) from None
    if not isinstance(data, dict):
        raise ValidationFailed("expected a JSON object", where=where)
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise ValidationFailed(f"missing key(s) {', '.join(missing)}", where=where)
    comparison_id = data["comparison"]
    if not isinstance(comparison_id, str) or comparison_id not in comparisons:
        raise ValidationFailed(f"unknown comparison {json.dumps(comparison_id)[:60]} in this study", where=where, field="comparison")
    judge = data["judge"]
    if not isinstance(judge, str) or not judge.strip() or len(judge) > 120:
        raise ValidationFailed("expected a judge name (1–120 characters)", where=where, field="judge")
    order = data["order"]
    if not isinstance(order, str) or order not in ORDER_VALUES:
        raise ValidationFailed(f"expected primary or swapped, got {json.dumps(order)[:40]}", where=where, field="order")
    repeat = data["repeat"]
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise ValidationFailed(f"expected an integer ≥ 0, got {json.dumps(repeat)[:40]}", where=where, field="repeat")
    raw = data["raw"]
    if not isinstance(raw, str):
        raise ValidationFailed("expected the raw reply as a string", where=where, field="raw")
    status = data.get("status")
    if status is not None and status not in FINISHED:
        raise ValidationFailed(f"expected valid, invalid or failed, got {json.dumps(status)[:40]}", where=where, field="status")
    family = data.get("family", "")
    family = family if isinstance(family, str) else ""
    prompt_sha256 = data.get("prompt_sha256", "")
    if not (prompt_sha256 == "" or (isinstance(prompt_sha256, str) and _SHA256.fullmatch(prompt_sha256))):
        raise ValidationFailed("expected the prompt template's sha256 (64 lowercase hex digits)", where=where,
                               field="prompt_sha256")
    comparison = comparisons[comparison_id]
    error = data.get("error")
    if not isinstance(error, str):
        error = ""
    answer = None
    if status == OutputStatus.FAILED:
        error = error or "no reply (imported as failed)"
    else:
        cached = None if active_of is None else active_of.get(comparison.page_id)  # type: ignore[attr-defined]
        if cached is None:
            cached = comparison.page.active_axis_ids(axes)
            if active_of is not None:  # one list per page, not per line
                active_of[comparison.page_id] = cached  # type: ignore[attr-defined]
        active = cached
        try:
            answer = canonical_answer(raw, active_axes=active, order=order)
            status, error = OutputStatus.VALID, ""
        except InvalidReply as exc:
            status, error = OutputStatus.INVALID, str(exc)
    return _Line(
        number, comparison, judge.strip(), family, order, repeat, raw, str(status), error or "", answer,
        prompt_sha256=prompt_sha256 if status != OutputStatus.FAILED else "",
        usage=_usage(data, where), model=_short_text(data, "model", where),
        request_id=_short_text(data, "request_id", where),
    )


ITEM_REQUIRED_KEYS = ("item", "judge", "order", "repeat", "raw")


@dataclass(slots=True)
class _ItemLine:
    """A line of a call about one rendering (``item``), checked and its reply validated."""

    number: int
    candidate: Candidate
    judge: str
    family: str
    fields: dict[str, Any]  # the JudgeOutput fields besides judge and candidate
    checklist: list[tuple[int, Any]]  # (predicate pk, ChecklistItem) of a valid checklist reply


def _parse_item_line(*, where: str, number: int, data: dict[str, Any], items: dict[str, Candidate]) -> _ItemLine:
    """A line ``{item, judge, order, repeat, raw, …}`` (docs/protocol.md "Files"): its reply validated
    against what the study's kind asks of that rendering now (``request_contract``), as a live call's
    is; the exported ``answers`` / ``ratings`` are not read, they follow from ``raw``."""
    from judges.request_building import RequestNotBuildable, request_contract

    missing = [k for k in ITEM_REQUIRED_KEYS if k not in data]
    if missing:
        raise ValidationFailed(f"missing key(s) {', '.join(missing)}", where=where)
    item_id = data["item"]
    if not isinstance(item_id, str) or item_id not in items:
        raise ValidationFailed(f"unknown item {json.dumps(item_id)[:60]} in this study", where=where, field="item")
    judge = data["judge"]
    if not isinstance(judge, str) or not judge.strip() or len(judge) > 120:
        raise ValidationFailed("expected a judge name (1–120 characters)", where=where, field="judge")
    order = data["order"]
    if not isinstance(order, str) or order not in ORDER_VALUES:
        raise ValidationFailed(f"expected primary or swapped, got {json.dumps(order)[:40]}", where=where, field="order")
    repeat = data["repeat"]
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 0:
        raise ValidationFailed(f"expected an integer ≥ 0, got {json.dumps(repeat)[:40]}", where=where, field="repeat")
    raw = data["raw"]
    if not isinstance(raw, str) or "\x00" in raw:
        raise ValidationFailed("expected the raw reply as a string", where=where, field="raw")
    status = data.get("status")
    if status is not None and status not in FINISHED:
        raise ValidationFailed(f"expected valid, invalid or failed, got {json.dumps(status)[:40]}", where=where, field="status")
    family = data.get("family", "")
    prompt_sha256 = data.get("prompt_sha256", "")
    if not (prompt_sha256 == "" or (isinstance(prompt_sha256, str) and _SHA256.fullmatch(prompt_sha256))):
        raise ValidationFailed("expected the prompt template's sha256 (64 lowercase hex digits)", where=where,
                               field="prompt_sha256")
    error = data.get("error")
    error = error if isinstance(error, str) and "\x00" not in error else ""
    candidate = items[item_id]
    usage = _usage(data, where)
    fields: dict[str, Any] = {
        "order": order, "repeat": repeat, "raw": raw, "prompt_sha256": prompt_sha256,
        "input_tokens": usage[0], "output_tokens": usage[1], "cached_tokens": usage[2],
        "served_model": _short_text(data, "model", where), "request_id": _short_text(data, "request_id", where),
    }
    checklist: list[tuple[int, Any]] = []
    if status == OutputStatus.FAILED:
        fields.update(status=OutputStatus.FAILED, error=error or "no reply (imported as failed)", prompt_sha256="")
    else:
        try:
            asked = request_contract(unit=candidate)
        except RequestNotBuildable as exc:
            raise ValidationFailed(f"item {item_id}: {exc}", where=where, field="item") from None
        try:
            parsed = asked.contract.parse(raw, order)
        except InvalidReply as exc:
            fields.update(status=OutputStatus.INVALID, error=str(exc))
        else:
            fields.update(status=OutputStatus.VALID, error="", **parsed.fields)
            checklist = list(zip(asked.keys, parsed.checklist, strict=True)) if parsed.checklist else []
    return _ItemLine(number, candidate, judge.strip(), family if isinstance(family, str) else "", fields, checklist)


def _insert_item_lines(lines: list[_ItemLine], judge_pk: dict[str, int], now: Any) -> None:
    """The calls about renderings, each with its questions' rows (as ``store_valid`` writes them)."""
    for line in lines:
        output = JudgeOutput.objects.create(
            judge_id=judge_pk[line.judge], candidate=line.candidate, imported=True, finished_at=now,
            **line.fields,
        )
        JudgeChecklistAnswer.objects.bulk_create(
            JudgeChecklistAnswer(output=output, predicate_id=key, answer=item.answer, evidence=item.evidence[:4000],
                                 passed=item.passed)
            for key, item in line.checklist
        )


_FINISHED_SET = frozenset(str(s) for s in FINISHED)
_NO_USAGE = (None, None, None)
_NO_AXES = JSONText("[]")
# The values of one output row after its judge: IMPORT_COLUMNS without judge_id.
_Row = tuple[Any, ...]


def _axes_text(answer: Any, axes_json: dict[tuple[tuple[str, int], ...], JSONText]) -> JSONText:
    """The axis_scores column of an answer: few distinct score lists, so each is encoded once."""
    scores = axes_json.get(answer.axes)
    if scores is None:
        scores = axes_json[answer.axes] = JSONText(json.dumps(answer.axes_list()))
    return scores


def _row_of(line: _Line, comparison_pk: int, axes_json: dict[tuple[tuple[str, int], ...], JSONText]) -> _Row:
    """The row of a line parsed by :func:`_parse_line` (the reference :func:`_fast_row` agrees with)."""
    answer = line.answer
    if answer is None:
        winner, confidence, scores, reason = "", None, _NO_AXES, ""
    else:
        winner, confidence, scores, reason = answer.winner, answer.confidence, _axes_text(answer, axes_json), answer.reason
    return (
        comparison_pk, line.order, line.repeat, line.status, line.raw, line.error, winner, confidence, scores,
        reason, line.prompt_sha256, *line.usage, line.model, line.request_id,
    )


def _fast_row(
    data: Any,
    comparisons: dict[str, Comparison],
    axes: list[Axis],
    active_of: dict[int, list[str]],
    targets: dict[str, tuple[int, list[str]]],
    axes_json: dict[tuple[tuple[str, int], ...], JSONText],
) -> tuple[str, str, str, _Row] | None:
    """(judge, family, comparison external id, row) of a decoded line of the common shape, or None
    to let :func:`_parse_line` decide (and raise its error).

    Exact: it returns a row only when ``_row_of(_parse_line(...))`` returns the same one (a test
    compares both on every kind of line); it takes plain types only (no bool for an int) and
    leaves every unusual value to the reference path. ``targets``: per comparison seen, its primary
    key and its page's active axes (``active_of`` per page), so a line reads no model attribute.
    """
    if type(data) is not dict:
        return None
    try:
        comparison_id, judge, order, repeat, raw = (
            data["comparison"], data["judge"], data["order"], data["repeat"], data["raw"]
        )
    except KeyError:
        return None
    target = targets.get(comparison_id) if type(comparison_id) is str else None
    if target is None:
        comparison = comparisons.get(comparison_id) if type(comparison_id) is str else None
        if comparison is None:
            return None
        active = active_of.get(comparison.page_id)  # type: ignore[attr-defined]
        if active is None:
            active = active_of[comparison.page_id] = comparison.page.active_axis_ids(axes)  # type: ignore[attr-defined]
        target = targets[comparison_id] = (comparison.pk, active)
    comparison_pk, active = target
    if (
        type(judge) is not str or len(judge) > 120
        or type(order) is not str or order not in ORDER_VALUES
        or type(repeat) is not int or repeat < 0
        or type(raw) is not str
    ):
        return None
    name = judge.strip()
    status = data.get("status")
    family = data.get("family", "")
    prompt_sha256 = data.get("prompt_sha256", "")
    usage = data.get("usage")
    model = data.get("model", "")
    request_id = data.get("request_id", "")
    if (
        not name
        or (status is not None and (type(status) is not str or status not in _FINISHED_SET))
        or (prompt_sha256 != "" and (type(prompt_sha256) is not str or not _SHA256.fullmatch(prompt_sha256)))
        or type(model) is not str or len(model) > 200
        or type(request_id) is not str or len(request_id) > 200
    ):
        return None
    if usage is None:
        usage = _NO_USAGE
    else:
        if type(usage) is not dict or len(usage) != 3:
            return None
        given = usage.get("input_tokens"), usage.get("output_tokens"), usage.get("cached_tokens")
        if (
            type(given[0]) is not int or given[0] < 0 or type(given[1]) is not int or given[1] < 0
            or type(given[2]) is not int or given[2] < 0
        ):
            return None
        usage = given
    error = data.get("error")
    if type(error) is not str:
        error = ""
    row: _Row
    if status == OutputStatus.FAILED:
        row = (
            comparison_pk, order, repeat, _FAILED, raw, error or "no reply (imported as failed)", "", None, _NO_AXES,
            "", "", *usage, model, request_id,
        )
    else:
        try:
            answer = canonical_answer(raw, active_axes=active, order=order)
        except InvalidReply as exc:
            row = (
                comparison_pk, order, repeat, _INVALID, raw, str(exc), "", None, _NO_AXES, "", prompt_sha256,
                *usage, model, request_id,
            )
        else:
            row = (
                comparison_pk, order, repeat, _VALID, raw, "", answer.winner, answer.confidence,
                _axes_text(answer, axes_json), answer.reason, prompt_sha256, *usage, model, request_id,
            )
    return name, family if type(family) is str else "", comparison_id, row


# Imports pausing the collector now, and whether the first of them found it enabled: the switch
# is process-wide, and two imports may overlap in one process (threads of a web worker).
_PAUSE_LOCK = threading.Lock()
_pauses = 0
_resume = False


@contextmanager
def _collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while an import builds its rows: they are ~10 objects a line
    that all live until the insert, and collecting them as they pile up was ~20 % of the time
    (the lines make no cycles; a collection runs as usual afterwards). Counted, so that the last
    of overlapping imports, not the first to end, turns it back on."""
    global _pauses, _resume
    with _PAUSE_LOCK:
        if _pauses == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _PAUSE_LOCK:
            _pauses -= 1
            if _pauses == 0 and _resume:
                gc.enable()


def judge_outputs_import_jsonl(*, study: Study, path: Path, user: Any = None) -> dict[str, int]:
    """Import judge outputs; returns counts {lines, created, valid, invalid, failed, judges_created}."""
    with _collection_paused():
        return _import_jsonl(study=study, path=Path(path), user=user)


def _import_jsonl(*, study: Study, path: Path, user: Any) -> dict[str, int]:
    comparisons = {
        c.external_id: c for c in Comparison.objects.filter(study=study).select_related("page")
    }
    axes = list(Axis.objects.filter(study=study).order_by("position"))
    # Per line: its judge and its row (IMPORT_COLUMNS after judge_id); the first family given per judge.
    line_judges: list[str] = []
    rows: list[_Row] = []
    families: dict[str, str] = {}
    seen: dict[tuple[str, str, str, int], int] = {}
    active_of: dict[int, list[str]] = {}
    targets: dict[str, tuple[int, list[str]]] = {}
    axes_json: dict[tuple[tuple[str, int], ...], JSONText] = {}  # few distinct score lists: encode each once
    counts = {"lines": 0, "created": 0, "valid": 0, "invalid": 0, "failed": 0, "judges_created": 0}
    items: dict[str, Candidate] | None = None  # the study's renderings by item id, read at the first item line
    item_lines: list[_ItemLine] = []
    item_seen: dict[tuple[str, str, str, int], int] = {}
    for number, text in _read_lines(path):
        try:
            data = loads_bounded(text)
        except ValueError:  # not JSON, too deep, NUL: _parse_line words the error
            data = None
        if type(data) is dict and "item" in data and "comparison" not in data:
            # A call about one rendering (a checklist or ratings call).
            if items is None:
                items = {
                    c.external_id: c
                    for c in Candidate.objects.filter(page__study=study).exclude(external_id="").select_related("page")
                }
            where = f"{path.name} line {number}"
            item_line = _parse_item_line(where=where, number=number, data=data, items=items)
            item_key = (item_line.judge, item_line.candidate.external_id, item_line.fields["order"],
                        item_line.fields["repeat"])
            if item_key in item_seen:
                raise ValidationFailed(
                    f"the output (judge, item, order, repeat) = {item_key} repeats line {item_seen[item_key]}",
                    where=where,
                )
            item_seen[item_key] = number
            if item_line.family and not families.get(item_line.judge):
                families[item_line.judge] = item_line.family
            item_lines.append(item_line)
            counts[str(item_line.fields["status"])] += 1
            continue
        try:
            fast = _fast_row(data, comparisons, axes, active_of, targets, axes_json) if data is not None else None
        except ValueError:  # as before items were read: _parse_line words the error
            fast = None
        if fast is None:
            line = _parse_line(
                where=f"{path.name} line {number}", number=number, text=text, comparisons=comparisons, axes=axes,
                active_of=active_of,
            )
            judge, family, comparison_id = line.judge, line.family, line.comparison.external_id
            row = _row_of(line, line.comparison.pk, axes_json)
        else:
            judge, family, comparison_id, row = fast
        key = (judge, comparison_id, row[1], row[2])
        if key in seen:
            raise ValidationFailed(
                f"the output (judge, comparison, order, repeat) = {key} repeats line {seen[key]}",
                where=f"{path.name} line {number}",
            )
        seen[key] = number
        if family and not families.get(judge):
            families[judge] = family
        line_judges.append(judge)
        rows.append(row)
        counts[row[3]] += 1
    if not rows and not item_lines:
        raise ValidationFailed("the file holds no judge outputs", where=path.name)

    names = sorted(set(line_judges) | {line.judge for line in item_lines})
    existing = set(
        JudgeOutput.objects.filter(comparison__study=study, judge__name__in=names).values_list(
            "judge__name", "comparison__external_id", "order", "repeat"
        )
    )
    for key, number in seen.items() if existing else ():
        if key in existing:
            raise ValidationFailed(
                f"an output for judge {key[0]}, comparison {key[1]}, order {key[2]}, repeat {key[3]} "
                "already exists in this study",
                where=f"{path.name} line {number}",
            )

    existing_items = set(
        JudgeOutput.objects.filter(candidate__page__study=study, judge__name__in=names).values_list(
            "judge__name", "candidate__external_id", "order", "repeat"
        )
    ) if item_lines else set()
    for key, number in item_seen.items() if existing_items else ():
        if key in existing_items:
            raise ValidationFailed(
                f"an output for judge {key[0]}, item {key[1]}, order {key[2]}, repeat {key[3]} "
                "already exists in this study",
                where=f"{path.name} line {number}",
            )

    counts["lines"] = len(rows) + len(item_lines)
    now = timezone.now()
    with transaction.atomic():
        judge_pk = dict(Judge.objects.filter(name__in=names).values_list("name", "pk"))
        for name in names:
            if name not in judge_pk:
                judge_pk[name] = Judge.objects.create(
                    name=name, family=families.get(name, ""), provider=Provider.IMPORTED
                ).pk
                counts["judges_created"] += 1
        # One COPY (PostgreSQL) or executemany (SQLite) of prepared values: the ORM's per-row
        # instances and per-value compilation were most of the time (annotation.services.bulk_rows).
        if rows:
            rows_insert(
                JudgeOutput,
                IMPORT_COLUMNS,
                [(judge_pk[judge], *row) for judge, row in zip(line_judges, rows, strict=True)],
                constants={"imported": True, "created_at": now, "finished_at": now},
            )
        _insert_item_lines(item_lines, judge_pk, now)
        counts["created"] = len(rows) + len(item_lines)
        audit_record(action="judges.import_outputs", user=user, study=study, target=path.name, **counts)
    return counts


def _call_fields(output: JudgeOutput) -> dict[str, Any]:
    """What every JSONL record of a finished call has, beside its unit: judge, order, repeat, reply,
    status and, when known, the prompt's fingerprint, usage, served model and request id."""
    record: dict[str, Any] = {
        "judge": output.judge.name,
        # Beyond docs/protocol.md "Files" (extra keys are allowed): the vendor family, so a restored backup
        # keeps committee eligibility (docs/protocol.md "Judges and calibration").
        "family": output.judge.family,
        "order": output.order,
        "repeat": output.repeat,
        "raw": output.raw,
        "status": output.status,
        "error": output.error,
    }
    if output.prompt_sha256:
        # Also beyond docs/protocol.md "Files": which prompt template the judge answered (absent when
        # unknown).
        record["prompt_sha256"] = output.prompt_sha256
    usage = (output.input_tokens, output.output_tokens, output.cached_tokens)
    if any(v is not None for v in usage):
        record["usage"] = dict(zip(USAGE_KEYS, usage, strict=True))
    if output.served_model:
        record["model"] = output.served_model
    if output.request_id:
        record["request_id"] = output.request_id
    return record


def judge_output_record(output: JudgeOutput) -> dict[str, Any]:
    """The docs/protocol.md "Files" JSONL record of one finished output of a comparison."""
    assert output.comparison is not None, "a call about one rendering is written by judge_item_output_record"
    record: dict[str, Any] = {"comparison": output.comparison.external_id, **_call_fields(output)}
    if output.status == OutputStatus.VALID:
        record.update(
            winner=output.winner,
            confidence=output.confidence,
            axes=[{"id": a["id"], "score": a["score"]} for a in output.axis_scores],
            reason=output.reason,
        )
    return record


def judge_item_output_record(output: JudgeOutput, answers: list[JudgeChecklistAnswer]) -> dict[str, Any]:
    """The docs/protocol.md "Files" JSONL record of one finished call about one rendering (a checklist
    or ratings call): ``item`` (the rendering's bundle id) for ``comparison``; a valid checklist call
    lists its ``answers`` (question by question, in the order asked), a valid ratings call its
    ``ratings`` and ``reason``."""
    assert output.candidate is not None, "a comparison's call is written by judge_output_record"
    record: dict[str, Any] = {"item": output.candidate.external_id, **_call_fields(output)}
    if output.status == OutputStatus.VALID:
        if answers:
            record["answers"] = [
                {
                    "predicate": a.predicate.external_id,
                    "answer": a.answer,
                    "evidence": a.evidence,
                    "passed": a.passed,
                }
                for a in answers
            ]
        else:
            record.update(
                ratings=[{"id": a["id"], "score": a["score"]} for a in output.axis_scores], reason=output.reason
            )
    return record


def judge_outputs_export_jsonl(*, study: Study, path: Path) -> int:
    """Write the study's finished judge outputs as JSONL, those of comparisons then those of
    renderings (checklist and ratings calls); returns the number of lines. Superseded outputs are
    history, not exported."""
    path = Path(path)
    outputs = (
        JudgeOutput.objects.filter(comparison__study=study, status__in=FINISHED)
        .select_related("comparison", "judge")
        .order_by("comparison__external_id", "judge__name", "order", "repeat")
    )
    item_outputs = (
        JudgeOutput.objects.filter(candidate__page__study=study, status__in=FINISHED)
        .select_related("candidate", "judge")
        .prefetch_related(
            Prefetch(
                "checklist_answers",
                queryset=JudgeChecklistAnswer.objects.select_related("predicate").order_by(
                    "predicate__position", "predicate__external_id"
                ),
            )
        )
        .order_by("candidate__external_id", "judge__name", "order", "repeat")
    )
    n = 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for output in outputs.iterator(chunk_size=2000):
            handle.write(json.dumps(judge_output_record(output), ensure_ascii=False) + "\n")
            n += 1
        for output in item_outputs.iterator(chunk_size=500):
            answers = list(output.checklist_answers.all())
            handle.write(json.dumps(judge_item_output_record(output, answers), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n
