"""Scoring folders of pages with no study (``manage.py score_pages``; docs/protocol.md "Scoring
folders: score_pages").

:func:`score_folders` takes, per page, its truth file and each system's prediction file (JSON:
ground-truth format or a render's JSON; HTML pages are rendered to JSON by the command first),
scores the (page, system) pairs not already in the cache in a pool of processes, and returns
per-page scores, per-system aggregates and the pages whose truth could not be read. The cache is
a JSON-lines file keyed by the two files' content hashes and :data:`~objective.score.SCORER_VERSION`,
appended as pages finish, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from objective.aggregate import SystemScore, system_scores
from objective.blocks import PageBlocks, TruthError, load_page
from objective.score import SCORER_VERSION, PageScore, score_page

#: A scored page: its name, its truth error or None, per system (system, cache key, score, note),
#: and the CPU seconds it took.
TaskResult = tuple[str, str | None, list[tuple[str, str, dict[str, Any], str | None]], float]


@dataclass(frozen=True, slots=True)
class PageTask:
    """One page: its truth file and, per system, its prediction file (None: the system has none)."""

    page: str
    truth: Path
    preds: tuple[tuple[str, Path | None], ...]


@dataclass(slots=True)
class FolderScores:
    """What :func:`score_folders` found: scores per page and system (with a note where the prediction
    was missing or unreadable and scored as an empty page), aggregates per system, truth errors
    per page, and how many pairs came from the cache."""

    pages: dict[str, dict[str, PageScore]] = field(default_factory=dict)
    notes: dict[str, dict[str, str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    systems: dict[str, SystemScore] = field(default_factory=dict)
    scored: int = 0
    kept: int = 0
    cpu_s: float = 0.0  # CPU seconds spent scoring, in whichever process scored

    def as_dict(self) -> dict[str, Any]:
        return {
            "protocol": "AmbiHTMLBench Appendix A",
            "scorer_version": SCORER_VERSION,
            "systems": {name: s.as_dict() for name, s in sorted(self.systems.items())},
            "pages": {
                page: {
                    name: {**s.as_dict(), "note": self.notes.get(page, {}).get(name)}
                    for name, s in sorted(by.items())
                }
                for page, by in sorted(self.pages.items())
            },
            "errors": dict(sorted(self.errors.items())),
        }


def file_sha256(path: Path | None) -> str:
    if path is None:
        return "missing"
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pair_key(truth_sha: str, pred_sha: str) -> str:
    return hashlib.sha256(f"{SCORER_VERSION}\0{truth_sha}\0{pred_sha}".encode()).hexdigest()


def _read_cache(path: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return found
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
                found[row["key"]] = row
            except (ValueError, KeyError, TypeError):
                continue  # a line cut short by an interrupted run
    return found


def score_task(task: PageTask, keys: Mapping[str, str]) -> TaskResult:
    """Score one page against every system asked (in a pool worker): the page, its truth error or
    None, per system ``(system, key, score, note)``, and the CPU seconds it took."""
    started = time.process_time()
    try:
        truth = load_page(task.truth)
    except TruthError as exc:
        return task.page, str(exc), [], time.process_time() - started
    out = []
    for system, path in task.preds:
        note = None
        if path is None:
            pred, note = (
                PageBlocks(truth.width, truth.height, ()),
                "no prediction for this page: scored as an empty page",
            )
        else:
            try:
                pred = load_page(path, lenient=True)
            except TruthError as exc:
                pred, note = PageBlocks(truth.width, truth.height, ()), f"{exc}: scored as an empty page"
        out.append((system, keys[system], score_page(truth, pred).as_dict(), note))
    return task.page, None, out, time.process_time() - started


def score_folders(
    tasks: list[PageTask],
    *,
    systems: list[str],
    cache: Path,
    workers: int = 2,
    resume: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> FolderScores:
    """Score every (page, system) of ``tasks`` not in ``cache`` (a JSON-lines file, appended), with
    ``workers`` processes (1: in this process)."""
    result = FolderScores()
    cached = _read_cache(cache) if resume else {}
    total = sum(len(t.preds) for t in tasks)
    done = 0
    todo: list[tuple[PageTask, dict[str, str]]] = []
    for task in tasks:
        truth_sha = file_sha256(task.truth)
        keys = {system: pair_key(truth_sha, file_sha256(path)) for system, path in task.preds}
        missing = []
        for system, path in task.preds:
            row = cached.get(keys[system])
            if row is None:
                missing.append((system, path))
            else:
                _keep(result, task.page, system, row["score"], row.get("note"))
                result.kept += 1
        done += len(task.preds) - len(missing)
        if missing:
            todo.append((PageTask(task.page, task.truth, tuple(missing)), keys))
    if progress:
        progress(done, total)
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("a", encoding="utf-8") as log:

        def finish(
            page: str,
            error: str | None,
            rows: list[tuple[str, str, dict[str, Any], str | None]],
            cpu_s: float,
            n: int,
        ) -> None:
            nonlocal done
            result.cpu_s += cpu_s
            if error is not None:
                result.errors[page] = error
            for system, key, score, note in rows:
                _keep(result, page, system, score, note)
                log.write(
                    json.dumps({"key": key, "page": page, "system": system, "score": score, "note": note})
                    + "\n"
                )
                result.scored += 1
            log.flush()
            done += n
            if progress:
                progress(done, total)

        if workers <= 1 or len(todo) <= 1:
            for task, keys in todo:
                finish(*score_task(task, keys), len(task.preds))
        else:
            context = multiprocessing.get_context("forkserver")
            with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
                pending: dict[Future[TaskResult], int] = {}
                queue = iter(todo)
                # A bounded window of work in flight keeps memory flat on large folders.
                for task, keys in queue:
                    pending[pool.submit(score_task, task, keys)] = len(task.preds)
                    if len(pending) >= 4 * workers:
                        break
                while pending:
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        n = pending.pop(future)
                        page, error, rows, cpu_s = future.result()
                        finish(page, error, rows, cpu_s, n)
                        nxt = next(queue, None)
                        if nxt is not None:
                            pending[pool.submit(score_task, *nxt)] = len(nxt[0].preds)
    for system in systems:
        pages = {page: by[system] for page, by in result.pages.items() if system in by}
        if pages:
            result.systems[system] = system_scores(pages)
    return result


def _keep(result: FolderScores, page: str, system: str, score: dict[str, Any], note: str | None) -> None:
    result.pages.setdefault(page, {})[system] = PageScore.from_dict(score)
    if note:
        result.notes.setdefault(page, {})[system] = note


def write_json(path: Path, data: object) -> None:
    """Write ``data`` to ``path`` atomically (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
