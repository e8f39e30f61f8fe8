"""``new_study KIND (--reference DIR --system NAME=DIR … | --manifest FILE) [options]`` (issue 29).

Makes the study bundle ``import_study`` reads from the researcher's own folders or manifest,
imports it all or nothing and keeps it (``annotation.services.new_study``; docs/new-study.md).
Prints the slug and where the bundle is kept; ``--dry-run`` prints what would be created and
writes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from annotation.errors import ValidationFailed
from annotation.management.base import ArbiterCommand, researcher_option
from annotation.render.settings import FAILURE_RULES
from annotation.services.bundles.reference_format import load_json
from annotation.services.new_study.create import new_study_create, new_study_plan
from annotation.services.new_study.options import (
    merged_options,
    options_from_json,
    with_failure_rule,
    with_media_choice,
)
from annotation.services.new_study.plan import KINDS, NewStudyInput


def _system(value: str) -> tuple[str, Path]:
    name, sep, folder = value.partition("=")
    if not sep or not name or not folder:
        raise ValidationFailed(f"expected NAME=FOLDER, got {value!r}", where="--system")
    return name, Path(folder)


def _option(value: str) -> tuple[str, Any]:
    key, sep, raw = value.partition("=")
    if not sep or not key:
        raise ValidationFailed(f"expected KEY=JSON, got {value!r}", where="--option")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw  # a bare word is a string: --option title=My study


class Command(ArbiterCommand):
    shows_progress = True
    help = (
        "Make a study from folders of images or HTML outputs (one per system, plus the references) or a CSV/JSONL manifest, "
        "import it all or nothing and keep its bundle; --dry-run prints what would be created."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", choices=KINDS)
        parser.add_argument("--reference", type=Path, help="folder of the reference images (pairwise_reference)")
        parser.add_argument("--system", action="append", default=[], metavar="NAME=FOLDER", help="one folder per system")
        parser.add_argument("--manifest", type=Path, help="CSV or JSONL: page, reference, system, image[, text]")
        parser.add_argument("--match", help="regular expression over file names; the 'page' (or first) group is the page id")
        parser.add_argument("--slug", help="the study's slug (or give it in --options)")
        parser.add_argument("--title", help="the study's title (default: the slug)")
        parser.add_argument("--instructions", type=Path, help="a Markdown file of instructions for raters")
        parser.add_argument("--options", type=Path, help="a JSON file of further study.json keys (axes, settings, options, …)")
        parser.add_argument("--option", action="append", default=[], metavar="KEY=JSON", help="one study.json key")
        parser.add_argument("--briefs", type=Path, help="CSV/JSONL of page, text: the brief texts (pairwise, checklist, rating)")
        parser.add_argument("--predicates", type=Path, help="CSV/JSONL of page, system, question[, type, automatic, id, check, text] (checklist)")
        parser.add_argument(
            "--comparisons", choices=("all", "none"), default="all",
            help="pairwise_reference: compare every pair of rendered systems on each page (default), or none",
        )
        parser.add_argument(
            "--render-failures", choices=FAILURE_RULES, metavar="{" + ",".join(FAILURE_RULES) + "}",
            help="how failed renders count in the leaderboards: ambihtmlbench (default) scores only rendered outputs, "
            "aescode counts a failed output as losing to a rendered one (docs/protocol.md \"Failed renders in the leaderboard\")",
        )
        parser.add_argument(
            "--media", type=Path, metavar="FILE",
            help="CSV/JSONL of page, system, kind, x0, y0, x1, y1: the media regions of image pages (system empty: the "
            "reference; kind none: no media), so that neutralization treats every pane alike",
        )
        parser.add_argument(
            "--no-neutralize", action="store_true",
            help="show every image's media as it is (settings.neutralize_media false) instead of hiding it as boxes",
        )
        parser.add_argument(
            "--requirements", type=Path,
            help="JSON {page: {text, tables, charts, canvas}}: the briefs' verifiable requirements (rule score)",
        )
        parser.add_argument(
            "--truth", type=Path, metavar="DIR",
            help="folder of the pages' ground truth: <page>.json ({page: {width, height}, blocks: [...]}) or <page>.html "
            "rendered with the study's settings; scored against each candidate's render (docs/protocol.md \"Ground truth\")",
        )
        parser.add_argument("--keep-bundle", type=Path, help="folder to keep the bundle in (default ARBITER_BUNDLE_ARCHIVE)")
        parser.add_argument("--dry-run", action="store_true", help="print what would be created; write nothing")
        parser.add_argument(
            "--researcher", metavar="USERNAME", help="an account to make the study's researcher (sees it on the web and in the API)"
        )

    def run(self, *args: Any, **options: Any) -> None:
        sources: list[tuple[str, dict[str, Any]]] = []
        if options["options"] is not None:
            path: Path = options["options"]
            if not path.is_file():
                raise ValidationFailed("no such file", where=str(path))
            sources.append((str(path), options_from_json(path.read_text(encoding="utf-8-sig"), where=str(path))))
        flags: dict[str, Any] = {}
        for key in ("slug", "title"):
            if options[key] is not None:
                flags[key] = options[key]
        if options["instructions"] is not None:
            instructions: Path = options["instructions"]
            if not instructions.is_file():
                raise ValidationFailed("no such file", where=str(instructions))
            flags["instructions_md"] = instructions.read_text(encoding="utf-8-sig")
        for value in options["option"]:
            key, parsed = _option(value)
            if key in flags:
                raise ValidationFailed(f"option {key!r} is given twice", where="--option")
            flags[key] = parsed
        if options["requirements"] is not None:
            requirements_path: Path = options["requirements"]
            if not requirements_path.is_file():
                raise ValidationFailed("no such file", where=str(requirements_path))
            if "requirements" in flags:
                raise ValidationFailed("option 'requirements' is given twice (also --requirements)", where="--option")
            flags["requirements"] = load_json(requirements_path.read_bytes(), filename=str(requirements_path))
        sources.append(("the command line", flags))
        options_given = with_failure_rule(merged_options(sources), options["render_failures"], where="--render-failures")
        media_text = ""
        if options["media"] is not None:
            media_path: Path = options["media"]
            if not media_path.is_file():
                raise ValidationFailed("no such file", where=str(media_path))
            media_text = media_path.read_text(encoding="utf-8-sig")
        options_given = with_media_choice(
            options_given, neutralize="no" if options["no_neutralize"] else "", media=media_text,
            where=str(options["media"]) if options["media"] is not None else "--no-neutralize",
        )
        if not options_given.get("slug"):
            raise ValidationFailed(
                'required: the new study\'s slug, as in --slug my-study (or "slug" in --options)', where="--slug"
            )
        data = NewStudyInput(
            kind=options["kind"],
            reference=options["reference"],
            systems=tuple(_system(v) for v in options["system"]),
            manifest=options["manifest"],
            match=options["match"],
            options=options_given,
            briefs=options["briefs"],
            predicates=options["predicates"],
            comparisons=options["comparisons"],
            truth=options["truth"],
        )
        plan = new_study_plan(data=data)
        if options["dry_run"]:
            self.stdout.write(plan.report(), ending="")
            plan.close()
            error = plan.first_error()
            if error:  # a script's check of the dry run sees what the real run would do
                raise CommandError(f"a real run would stop: {error}")
            return
        study, kept = new_study_create(
            data=data, plan=plan, keep_bundle=options["keep_bundle"], user=researcher_option(options["researcher"])
        )
        counts = plan.counts()
        if plan.stray:
            n = len(plan.stray)
            self.stderr.write(f"ignored {n:,} stray file{'s' if n != 1 else ''} (new_study --dry-run lists them)")
        if plan.render_failed:
            n = len(plan.render_failed)
            self.stderr.write(
                f"{n:,} HTML page{'s' if n != 1 else ''} failed to render, kept as failed renders (new_study --dry-run lists the reasons)"
            )
        if plan.truth_problems:
            n = len(plan.truth_problems)
            self.stderr.write(
                f"ground truth refused for {n:,} page{'s' if n != 1 else ''}, left without it "
                "(new_study --dry-run lists the reasons)"
            )
        if plan.truth:
            from annotation.services.objective_scores import objective_scores_refresh

            scored = objective_scores_refresh(study=study)
            self.stderr.write(f"objective scores: {scored.scored:,} candidates scored against their page's ground truth")
        for (page, system), hint in list(plan.near_matches.items())[:3]:
            self.stderr.write(f"failed render {system}: {page}: {hint}")
        self.stdout.write(study.slug)
        self.stdout.write(
            f"{counts['pages']:,} pages, {counts['systems']:,} systems, {counts['images']:,} images; bundle kept in {kept}"
        )
