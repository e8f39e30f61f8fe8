"""``score_pages --truth DIR --pred DIR --json OUT``: AmbiHTMLBench's objective protocol on folders,
with no study (issue 48; docs/protocol.md "Scoring folders: score_pages").

``--truth`` holds ``<page>.json`` (the ground-truth format, or a render's JSON) or ``<page>.html``
(rendered and exported as a prediction is); ``--pred`` one folder per system with ``<page>.html``
or ``<page>.json``. HTML is rendered into the cache folder (resumable, as ``render_pages``), then
every (page, system) not already scored with the same files is scored in a pool of processes.
Exits 0 when every truth page was scored; 1, with OUT written, when some truth could not be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.errors import ArbiterError
from annotation.management.base import ArbiterCommand
from annotation.progress import progress_step
from annotation.render.pages import HTML_SUFFIXES, refuse_links, render_folder
from annotation.render.settings import MODES, RenderSettings, parse_viewport
from objective.folders import PageTask, score_folders, write_json


def page_files(folder: Path, skip: Path) -> tuple[dict[str, Path], dict[str, Path], list[str]]:
    """The JSON and HTML pages directly in ``folder`` by page name, and warnings (a page given both
    ways is read from its JSON); ``skip`` (the report being written) is no page."""
    jsons: dict[str, Path] = {}
    htmls: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file() or path.resolve() == skip:
            continue
        suffix = path.suffix.lower()
        if suffix == ".json":
            jsons[path.stem] = path
        elif suffix in HTML_SUFFIXES:
            if path.stem in htmls:
                raise ArbiterError(f"{path}: page '{path.stem}' found twice (also {htmls[path.stem].name})")
            htmls[path.stem] = path
    both = sorted(set(jsons) & set(htmls))
    warnings = (
        [f"{folder}: {len(both)} page(s) given as JSON and HTML (first: {both[0]}); the JSON is read"]
        if both
        else []
    )
    return jsons, {k: v for k, v in htmls.items() if k not in jsons}, warnings


class Command(ArbiterCommand):
    shows_progress = True
    help = (
        "Score predictions against ground truth with AmbiHTMLBench's objective protocol (TEDS, TEDS-S, "
        "D_text, S_layout, S_obj), with no study. --truth DIR: <page>.json or <page>.html; --pred DIR: one "
        "folder per system with <page>.html or <page>.json. Resumable; HTML needs Debian's chromium."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = RenderSettings()
        parser.add_argument("--truth", type=Path, required=True, help="folder of ground-truth pages")
        parser.add_argument(
            "--pred", type=Path, required=True, help="folder with one folder of pages per system"
        )
        parser.add_argument("--json", type=Path, required=True, help="the report to write")
        parser.add_argument(
            "--cache",
            type=Path,
            default=None,
            help="folder for renders and scores already computed (default: OUT's name + .cache beside it)",
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=2,
            help="processes scoring (and browsers rendering) at once (default 2)",
        )
        parser.add_argument("--again", action="store_true", help="score (and render) every page again")
        parser.add_argument(
            "--viewport",
            default=defaults.viewport,
            help="for HTML pages: WIDTHxHEIGHT in CSS pixels (default 1280x720)",
        )
        parser.add_argument(
            "--mode", choices=MODES, default=defaults.mode, help="for HTML pages: full (default) or canvas"
        )

    def run(self, *args: Any, **options: Any) -> None:
        truth_dir, pred_dir, out = options["truth"], options["pred"], options["json"]
        workers = options["workers"]
        if not 1 <= workers <= 16:
            raise ArbiterError(f"--workers: expected 1 to 16, got {workers}")
        for name, folder in (("--truth", truth_dir), ("--pred", pred_dir)):
            if not folder.is_dir():
                raise ArbiterError(f"{name} {folder}: no such folder")
            refuse_links(folder)
        cache = options["cache"] or out.with_name(out.name + ".cache")
        width, height = parse_viewport(options["viewport"])
        settings = RenderSettings(viewport_width=width, viewport_height=height, mode=options["mode"])
        resume = not options["again"]

        truth_json, truth_html, warnings = page_files(truth_dir, out.resolve())
        truth = {
            **truth_json,
            **self._rendered(
                truth_dir, truth_html, cache / "renders" / "truth", settings, workers, resume, "truth"
            ),
        }
        if not truth:
            raise ArbiterError(f"--truth {truth_dir}: no pages (*.json or *.html) in this folder")
        systems = sorted(p.name for p in pred_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
        if not systems:
            raise ArbiterError(
                f"--pred {pred_dir}: no system folders in this folder (one folder of pages per system)"
            )
        preds: dict[str, dict[str, Path]] = {}
        for system in systems:
            jsons, htmls, more = page_files(pred_dir / system, out.resolve())
            warnings += more
            wanted = {k: v for k, v in htmls.items() if k in truth}
            preds[system] = {
                **jsons,
                **self._rendered(
                    pred_dir / system, wanted, cache / "renders" / system, settings, workers, resume, system
                ),
            }
            extra = sorted(set(preds[system]) - set(truth))
            if extra:
                warnings.append(
                    f"{pred_dir / system}: {len(extra)} page(s) with no ground truth (first: {extra[0]}); not scored"
                )
        tasks = [
            PageTask(page, truth[page], tuple((system, preds[system].get(page)) for system in systems))
            for page in sorted(truth)
        ]
        result = score_folders(
            tasks,
            systems=systems,
            cache=cache / "scores.jsonl",
            workers=workers,
            resume=resume,
            progress=lambda done, total: progress_step("scoring", done, total),
        )
        write_json(out, result.as_dict())
        for warning in warnings:
            self.stderr.write(f"warning: {warning}")
        missing = sum(
            1
            for notes in result.notes.values()
            for note in notes.values()
            if note.startswith("no prediction")
        )
        self.stdout.write(
            f"{len(tasks)} pages x {len(systems)} systems: {result.scored} scored"
            + (f", {result.kept} kept from an earlier run" if result.kept else "")
            + (f"; {missing} missing predictions scored as empty pages" if missing else "")
            + f" ({result.cpu_s:.1f} s CPU scoring); written to {out}"
        )
        for system, score in sorted(result.systems.items()):
            teds = "n/a" if score.teds is None else f"{score.teds:.4f}"
            self.stdout.write(
                f"  {system}: S_obj {score.s_obj:.4f} (TEDS {teds} on {score.n_table_pages} table pages, "
                f"D_text {score.d_text:.4f}, S_layout {score.s_layout:.4f}, {score.n_pages} pages)"
            )
        if result.errors:
            for page, error in sorted(result.errors.items())[:20]:
                self.stderr.write(f"  truth {page}: {error}")
            raise ArbiterError(
                f"{len(result.errors)} of {len(tasks)} truth pages could not be read (listed above and under "
                f"'errors' in {out}); every other page was scored"
            )

    def _rendered(
        self,
        src: Path,
        htmls: dict[str, Path],
        out: Path,
        settings: RenderSettings,
        workers: int,
        resume: bool,
        label: str,
    ) -> dict[str, Path]:
        """Render the HTML pages ``htmls`` of ``src`` into ``out``; their render JSONs by page name."""
        if not htmls:
            return {}
        run = render_folder(
            src=src,
            out=out,
            settings=settings,
            workers=workers,
            resume=resume,
            stems=set(htmls),
            progress=lambda done, total: progress_step(f"rendering {label}", done, total),
        )
        for warning in run.warnings:
            self.stderr.write(f"warning: {warning}")
        return {stem: out / f"{stem}.json" for stem in htmls}
