"""``render_pages SRC OUT [options]``: HTML outputs to PNG + JSON in a sandboxed Chromium (issue 38).

Every ``*.html`` directly in SRC becomes ``OUT/<stem>.png`` and ``OUT/<stem>.json`` (status,
reason, settings, media regions, console errors, refused requests, time, manifest;
docs/rendering.md). Exits 0 when every page was handled, failed renders included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from annotation.progress import progress_step
from annotation.render.pages import render_folder
from annotation.render.settings import MODES, RenderSettings, parse_viewport


class Command(ArbiterCommand):
    shows_progress = True
    help = (
        "Render every *.html directly in SRC to OUT/<stem>.png and OUT/<stem>.json in a sandboxed, "
        "deterministic Chromium (no network; only the page's own folder is served). Failed renders are "
        "written as data (status failed, reason). Needs Debian's chromium package."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        defaults = RenderSettings()
        parser.add_argument("src", type=Path, help="folder of HTML files (with their assets)")
        parser.add_argument("out", type=Path, help="folder for the PNG and JSON files")
        parser.add_argument("--viewport", default=defaults.viewport, help="WIDTHxHEIGHT in CSS pixels (default 1280x720)")
        parser.add_argument("--scale", type=float, default=defaults.scale, help="device pixels per CSS pixel (default 1)")
        parser.add_argument("--mode", choices=MODES, default=defaults.mode,
                            help="full: the whole page up to --max-height; canvas: the viewport only")
        parser.add_argument("--max-height", type=int, default=defaults.max_height,
                            help=f"a taller page is a failed render (CSS pixels, default {defaults.max_height})")
        parser.add_argument("--timeout", type=float, default=defaults.timeout_s, help="seconds per page (default 20)")
        parser.add_argument("--no-js", action="store_true", help="render with JavaScript off")
        parser.add_argument("--max-console-errors", type=int, default=None,
                            help="a page with more console errors is a failed render (default: any number)")
        parser.add_argument("--memory-mb", type=int, default=defaults.memory_mb,
                            help=f"a page that takes its browser past this much memory is a failed render (default {defaults.memory_mb})")
        parser.add_argument("--workers", type=int, default=2, help="browsers rendering at once (default 2)")
        parser.add_argument("--again", action="store_true",
                            help="render every page again, even those an earlier run finished with these settings")

    def run(self, *args: Any, **options: Any) -> None:
        width, height = parse_viewport(options["viewport"])
        settings = RenderSettings(
            viewport_width=width, viewport_height=height, scale=options["scale"], mode=options["mode"],
            max_height=options["max_height"], timeout_s=options["timeout"], javascript=not options["no_js"],
            max_console_errors=options["max_console_errors"], memory_mb=options["memory_mb"],
        )
        result = render_folder(
            src=options["src"], out=options["out"], settings=settings, workers=options["workers"],
            resume=not options["again"], progress=lambda done, total: progress_step("rendering", done, total),
        )
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(
            f"{result.pages} pages: {result.rendered} rendered, {result.failed} failed"
            + (f" ({result.kept} kept from an earlier run)" if result.kept else "")
            + f"; written to {options['out']}"
        )
        for name, reason in result.failures[:20]:
            self.stdout.write(f"  failed: {name}: {reason}")
        if len(result.failures) > 20:
            self.stdout.write(f"  … and {len(result.failures) - 20} more")
