"""The plan of a new study (``new_study``'s first two steps): what the files hold, what looks wrong
(the dry run's report) and the ``study.json`` they make (docs/new-study.md).

The plan is filled by :mod:`annotation.services.new_study.inputs` (folders, manifests, briefs and
predicates), :mod:`~annotation.services.new_study.html_outputs` (HTML rendered first) and
:mod:`~annotation.services.new_study.sources` (image headers); it writes nothing.
"""

from __future__ import annotations

import shutil
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from annotation.errors import ValidationFailed
from annotation.kinds import DESIGNS, StudyDesign, design_of
from annotation.services.bundles.questionnaire_format import KINDS as QUESTIONNAIRE_KINDS
from annotation.services.bundles.questionnaire_format import questionnaire_spec_from_document
from annotation.services.bundles.reference_format import STUDY_JSON, document_kind, study_spec_from_document
from annotation.services.new_study.options import RENDER_KEY, neutralizes

KINDS = tuple(DESIGNS)
LISTED = 10  # examples shown per problem in the dry-run report
MISSING_SLUG = "slug: required: give the study a slug (or a title to make one from)"


@dataclass(frozen=True)
class NewStudyInput:
    """What the command, the upload page and the API give (paths already on this machine)."""

    kind: str
    reference: Path | None = None
    systems: tuple[tuple[str, Path], ...] = ()
    manifest: Path | None = None
    match: str | None = None
    # Top-level study.json keys (slug, title, instructions_md, axes, settings, options, …).
    options: dict[str, Any] = field(default_factory=dict)
    briefs: Path | None = None  # CSV/JSONL of page, text (the brief texts of the other kinds)
    predicates: Path | None = None  # CSV/JSONL of page, system, question[, type, automatic, id, check, text] (checklist)
    comparisons: str = "all"  # pairwise_reference: "all" pairs of rendered systems per page, or "none"
    # How errors name a path (an upload's temporary folder is shown as the archive's name).
    shown_root: tuple[Path, str] | None = None
    # Where HTML pages' renders are kept and found again (a new study run's folder); None: a
    # temporary folder removed with the plan.
    render_cache: Path | None = None
    # The ground truth's folder (docs/protocol.md "Ground truth"): per page ``<page>.json`` in the
    # documented format, or ``<page>.html`` rendered with the study's settings.
    truth: Path | None = None


@dataclass(frozen=True)
class Source:
    """One image file: ``path`` on disk, or ``url`` (s3://) read through the media storage."""

    label: str
    path: Path | None = None
    url: str | None = None
    suffix: str = ".png"


@dataclass
class Probe:
    size: tuple[int, int] | None = None
    mode: str = ""
    problem: str = ""


@dataclass
class NewStudyPlan:
    kind: str
    options: dict[str, Any]
    pages: list[str]
    systems: list[str]
    references: dict[str, Source]
    images: dict[tuple[str, str], Source]  # (page, system) → image
    texts: dict[str, str] = field(default_factory=dict)
    predicates: list[dict[str, Any]] = field(default_factory=list)
    # Predicates answered from the render (docs/protocol.md "Checks computed from the render"): their
    # position in ``predicates`` → (page, system, check, text); and how many got each answer.
    predicate_checks: dict[int, tuple[str, str, str, str]] = field(default_factory=dict)
    check_answers: dict[str, int] = field(default_factory=dict)
    comparisons: str = "all"
    stray: list[str] = field(default_factory=list)
    # Files of the folders that no page uses: still checked to be images (every file in a folder
    # is an image or is left out by --match).
    stray_sources: list[Source] = field(default_factory=list)
    assets: list[str] = field(default_factory=list)  # labels of the files beside HTML pages (their assets)
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (label, what it duplicates)
    # (page, system) of a failed render → a hint: a stray file of that system with the page's
    # digits under another separator, and the --match pattern that would pair them.
    near_matches: dict[tuple[str, str], str] = field(default_factory=dict)
    probes: dict[str, Probe] = field(default_factory=dict)  # by label
    errors: list[str] = field(default_factory=list)  # s3 not configured, …: first one is raised
    # HTML sources: the render settings used (RenderSettings.to_json, None when no page is HTML),
    # the media regions each rendered page's DOM gave (by label), the (page, system) whose page
    # failed to render (→ its reason), and per system the pages rendered / failed.
    render: dict[str, Any] | None = None
    render_media: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # A rendered page's blocks (their type and box only; docs/protocol.md "Blocks from the DOM").
    render_blocks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The labels of the images whose media regions are known: rendered pages (from their DOM) and
    # image pages the ``media`` option gave (docs/new-study.md "Media regions of PNG pages").
    media_known: set[str] = field(default_factory=set)
    rendered: set[str] = field(default_factory=set)  # labels of the HTML sources that rendered
    # The viewport's width was taken from the image references' (no viewport in the render option).
    viewport_from_references: bool = False
    # Pages whose HTML was rendered at their reference's width, another than the study's viewport
    # (page → "WxH"), kept in the page's ``meta`` as ``render_viewport``.
    page_viewports: dict[str, str] = field(default_factory=dict)
    render_failed: dict[tuple[str, str], str] = field(default_factory=dict)
    render_counts: dict[str, list[int]] = field(default_factory=dict)
    # The slug of the study this plan made (``new_study_create``): the report then says so instead
    # of finding that study's own slug taken.
    created: str | None = None
    render_refused: dict[str, list[str]] = field(default_factory=dict)  # label → requests refused (first 50)
    work_dir: Path | None = None  # where the pages were rendered (removed with the plan, or by close())
    # The briefs' verifiable requirements (the ``requirements`` option, rule_score.requirements) and
    # each rendered output's rule score against them (page, system) → RuleResult.to_json()
    # (docs/protocol.md "AesCode's rule score"); a failed render's stays here (no item to carry it).
    requirements: dict[str, Any] = field(default_factory=dict)
    rule_results: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # Ground truth (docs/protocol.md "Ground truth"): whether a truth folder was given, the checked
    # truth of each page (page → the format's JSON) and where it came from ("json" / "html"), the
    # pages whose truth was refused (page → one line naming the file and the field), and each
    # rendered HTML source's full blocks (by label), what the objective protocol scores (and, for a
    # kind that keeps page text, the local judge reads: docs/protocol.md "The built-in local judge").
    wants_truth: bool = False
    truth: dict[str, dict[str, Any]] = field(default_factory=dict)
    truth_sources: dict[str, str] = field(default_factory=dict)
    truth_problems: dict[str, str] = field(default_factory=dict)
    dom_blocks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @cached_property
    def design(self) -> StudyDesign:
        """The kind's design: what the files make, and what a kind reads of them (annotation.kinds)."""
        return design_of(self.kind)

    def close(self) -> None:
        """Remove the rendered pages' work folder (after the bundle is written)."""
        if self.work_dir is not None:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # --- what the files say -----------------------------------------------------------------

    def missing(self) -> dict[str, list[str]]:
        """System → pages without its image."""
        return {
            s: [p for p in self.pages if (p, s) not in self.images and (p, s) not in self.render_failed]
            for s in self.systems
        }

    def not_images(self) -> list[tuple[str, str]]:
        return [(label, probe.problem) for label, probe in self.probes.items() if probe.problem]

    def _groups(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        if self.references:
            groups["reference"] = [source.label for source in self.references.values()]
        for (_, system), source in self.images.items():
            groups.setdefault(system, []).append(source.label)
        return groups

    def outliers(self) -> tuple[list[str], list[str]]:
        """Images whose pixel size, or colour mode, differs from most of their group (the
        references, or one system's images)."""
        sizes: list[str] = []
        modes: list[str] = []
        for group, labels in self._groups().items():
            probes = [(label, self.probes[label]) for label in labels if label in self.probes and self.probes[label].size]
            if not probes:
                continue
            common_size = Counter(p.size for _, p in probes).most_common(1)[0][0]
            common_mode = Counter(p.mode for _, p in probes).most_common(1)[0][0]
            assert common_size is not None
            for label, probe in probes:
                if probe.size != common_size:
                    w, h = probe.size or (0, 0)
                    sizes.append(f"{label} {w} × {h} (most of {group}: {common_size[0]} × {common_size[1]})")
                if probe.mode != common_mode:
                    modes.append(f"{label} {probe.mode} (most of {group}: {common_mode})")
        return sizes, modes

    def unequal_pages(self) -> list[str]:
        """The pages whose panes a study that neutralizes media would not treat alike
        (docs/protocol.md "Media regions from the DOM"): one image of the page has media regions
        (hidden as boxes) and another, an image file given without regions, would show its media
        as it is. One line per page, naming which is which."""
        if not self.design.has_reference or not neutralizes(self.options):
            return []
        unequal = []
        for page in self.pages:
            panes = [("the reference", self.references.get(page))] + [(s, self.images.get((page, s))) for s in self.systems]
            boxed = [name for name, source in panes if source is not None and self.render_media.get(source.label)]
            unknown = [name for name, source in panes if source is not None and source.label not in self.media_known]
            if boxed and unknown:
                unequal.append(
                    f"{page}: media regions in {', '.join(boxed)}; none known for {', '.join(unknown)} (an image file)"
                )
        return unequal

    def width_mismatches(self) -> list[str]:
        """The pages whose renders are not as wide as their image reference (docs/rendering.md
        "One scale per trial"): shown at the reference's width, their text would be scaled by
        the ratio. One line per page, with the viewport that renders them at the reference's width."""
        if self.render is None:
            return []
        height = str(self.render.get("viewport", "1280x720")).split("x")[-1]
        scale = float(self.render.get("scale") or 1)
        out = []
        for page in self.pages:
            reference = self.references.get(page)
            if reference is None or reference.label in self.rendered:
                continue
            ref_size = self.probes[reference.label].size if reference.label in self.probes else None
            widths = {
                size[0]
                for s in self.systems
                if (source := self.images.get((page, s))) is not None and source.label in self.rendered
                and (size := self.probes[source.label].size if source.label in self.probes else None)
            }
            if ref_size is None or not widths or widths == {ref_size[0]}:
                continue
            shown = ", ".join(f"{w:,} px (text shown at ×{ref_size[0] / w:.2f})" for w in sorted(widths))
            # With the viewports taken from the references, only a width no viewport takes is left.
            remedy = (
                "its width over the scale is outside a viewport's 100 to 8192 px"
                if self.viewport_from_references
                else f"render viewport {round(ref_size[0] / scale)}x{height} removes it (or none: each page at its reference's width)"
            )
            out.append(f"{page}: reference {ref_size[0]:,} px wide, renders {shown}; {remedy}")
        return out

    def first_error(self) -> str | None:
        """What makes a real run refuse the plan (one line naming the file), or None."""
        if self.errors:
            return self.errors[0]
        for label, what in self.duplicates:
            return f"{label}: {what}"
        for label, problem in self.not_images():
            return f"{label}: {problem}"
        if unequal := self.unequal_pages():
            return (
                f"{len(unequal):,} page{'s' if len(unequal) != 1 else ''} would show real media beside neutralized media "
                f"(first, {unequal[0]}); choose: the media regions of those images (a media table: new_study --media FILE, "
                "or the upload's media field) or no media neutralization (--no-neutralize, or the upload's choice)"
            )
        if not self.pages:
            return "no pages: no image file matched (check the folders, the manifest or --match)"
        return self.document_error()

    def document_error(self) -> str | None:
        """What the import's own ``study.json`` check and its free-slug check would refuse, so that
        a dry run does not say "would import" of options the real run stops at (a bad slug, an axis
        without an id, a crowd setting out of range)."""
        from annotation.models import Study

        if not self.options.get("slug"):
            return MISSING_SLUG
        document = self.document()
        try:
            if document_kind(document) in QUESTIONNAIRE_KINDS:
                questionnaire_spec_from_document(document)
            else:
                study_spec_from_document(document)
        except ValidationFailed as exc:
            return str(exc)
        slug = document.get("slug")
        if isinstance(slug, str) and slug != self.created and Study.objects.filter(slug=slug).exists():
            return f"{STUDY_JSON} $.slug: a study with slug {slug!r} already exists"
        return None

    # --- what would be created ----------------------------------------------------------------

    def _is_image(self, source: Source) -> bool:
        probe = self.probes.get(source.label)
        return probe is None or not probe.problem

    def counts(self) -> dict[str, int]:
        # Files found not to be images are counted under "not images", never as images.
        rendered = sum(1 for source in self.images.values() if self._is_image(source))
        references = sum(1 for source in self.references.values() if self._is_image(source))
        out = {"pages": len(self.pages), "systems": len(self.systems), "images": rendered + references}
        if self.wants_truth:
            out["pages_with_truth"] = len(self.truth)
        if self.design.has_reference:
            out["candidates"] = len(self.pages) * len(self.systems)
            out["failed_renders"] = out["candidates"] - rendered
            out["comparisons"] = len(self._pairs()) if "comparisons" not in self.options else 0
        else:
            out["items"] = rendered
            out["predicates"] = len(self.predicates)
        return out

    def report(self) -> str:
        """The dry run's text: counts per system, then each kind of problem (a few examples each)."""
        counts = self.counts()
        lines = [f"new_study {self.kind} " + (f"(created study {self.created})" if self.created else "(dry run, nothing written)")]
        if self.references:
            lines.append(f"pages: {len(self.pages):,} ({len(self.references):,} reference images)")
        else:
            lines.append(f"pages: {len(self.pages):,}")
        missing = self.missing()
        for system in self.systems:
            n = sum(1 for p in self.pages if (p, system) in self.images and self._is_image(self.images[p, system]))
            n_missing = len(missing[system])
            gap = f", {n_missing:,} page{'s' if n_missing != 1 else ''} missing its image" if n_missing else ""
            lines.append(f"system {system}: {n:,} images{gap}")
        if self.render is not None:
            settings_line = ", ".join(
                f"{k} {v}" for k, v in self.render.items() if v is not None and k != "failure_rule"
            )
            lines.append(f"HTML rendered with: {settings_line}")
            if self.viewport_from_references:
                other = f", {len(self.page_viewports):,} at another than the study's" if self.page_viewports else ""
                lines.append(f"render viewport: each page's reference's width (one scale per trial{other})")
            lines.append(f"Render failures: {self.render.get('failure_rule')} rule (in the leaderboards)")
            for group, (ok, failed) in self.render_counts.items():
                lines.append(f"rendered {group}: {ok:,} pages rendered, {failed:,} failed")
        if self.assets:
            lines.append(f"assets beside the HTML pages (served to them when they render): {len(self.assets):,}")
        if self.design.has_reference:
            with_regions = sum(1 for p in self.pages if p in self.references and self.render_media.get(self.references[p].label))
            lines.append(
                f"media neutralization: {'on' if neutralizes(self.options) else 'off'} "
                f"({with_regions:,} of {len(self.references):,} references with media regions)"
            )
        if self.wants_truth:
            lines.append(
                f"ground truth: {len(self.truth):,} of {len(self.pages):,} pages "
                f"({sum(1 for v in self.truth_sources.values() if v == 'html'):,} rendered from HTML)"
            )
        if self.check_answers:
            answers = ", ".join(f"{key} {n:,}" for key, n in sorted(self.check_answers.items()))
            lines.append(f"checks answered from the render: {answers}")
        if self.requirements:
            scored = [r for r in self.rule_results.values() if r.get("rule") is not None]
            failed = sum(1 for key in self.rule_results if key in self.render_failed)
            mean = sum(float(r["rule"]) for r in scored) / len(scored) if scored else None
            lines.append(
                f"rule score: {len(self.requirements):,} briefs with requirements, {len(self.rule_results):,} "
                f"rendered outputs scored" + (f", mean Rule {mean:.3f}" if mean is not None else "")
                + (
                    f"; {failed:,} failed renders score 0" + ("" if self.design.has_reference else " and have no item")
                    if failed else ""
                )
            )
        sizes, modes = self.outliers()
        sections: list[tuple[str, list[str]]] = [
            (
                "pages missing a system's image",
                [
                    f"{s}: {p}" + (f" ({self.near_matches[p, s]})" if (p, s) in self.near_matches else "")
                    for s in self.systems
                    for p in missing[s]
                ],
            ),
            ("failed renders (HTML)", [f"{s}: {p}: {why}" for (p, s), why in self.render_failed.items()]),
            *(
                [("ground truth refused (those pages are left without truth)",
                  [f"{p}: {why}" for p, why in self.truth_problems.items()])]
                if self.wants_truth else []
            ),
            ("pages shown unequally (media neutralized on some panes only)", self.unequal_pages()),
            ("width mismatches (renders and their reference at two scales)", self.width_mismatches()),
            ("stray files", self.stray),
            ("duplicate stems", [f"{label}: {what}" for label, what in self.duplicates]),
            ("not images", [f"{label}: {problem}" for label, problem in self.not_images()]),
            ("size outliers", sizes),
            ("colour-mode outliers", modes),
        ]
        for title, entries in sections:
            lines.append(f"{title}: {len(entries):,}")
            lines.extend(f"  {entry}" for entry in entries[:LISTED])
            if len(entries) > LISTED:
                lines.append(f"  … and {len(entries) - LISTED:,} more")
        made = ", ".join(f"{key.replace('_', ' ')} {value:,}" for key, value in counts.items())
        lines.append(f"would create: {made}")
        error = self.first_error()
        if self.created:
            lines.append(f"created: study {self.created}")
        else:
            lines.append(f"a real run would stop: {error}" if error else "a real run would import this")
        return "\n".join(lines) + "\n"

    # --- the bundle ---------------------------------------------------------------------------

    def _pairs(self) -> list[tuple[str, str, str, str]]:
        if self.comparisons == "none":
            return []
        pairs = []
        for page in self.pages:
            rendered = [s for s in self.systems if (page, s) in self.images]
            k = 0
            for i, a in enumerate(rendered):
                for b in rendered[i + 1 :]:
                    k += 1
                    pairs.append((f"{page}-{k}", page, a, b))
        return pairs

    def bundle_paths(self) -> dict[str, Source]:
        """Bundle-relative image path → its source (``images/<n>.<ext>``: ids need not be file names)."""
        paths: dict[str, Source] = {}
        for page in self.pages:
            if page in self.references:
                source = self.references[page]
                paths[f"images/r{len(paths):06d}{source.suffix}"] = source
            for system in self.systems:
                source = self.images.get((page, system))  # type: ignore[assignment]
                if source is not None:
                    paths[f"images/{len(paths):06d}{source.suffix}"] = source
        return paths

    def document(self) -> dict[str, Any]:
        """``study.json``: the options as given, plus what the files make."""
        by_source = {source.label: path for path, source in self.bundle_paths().items()}
        doc: dict[str, Any] = {"instructions_md": "", **self.options, "kind": self.kind}
        if self.render is not None:
            doc[RENDER_KEY] = self.render  # the settings used, defaults filled in (stored with the study)
        doc.setdefault("title", str(doc.get("slug", "")))
        doc["systems"] = [{"id": s, "name": s} for s in self.systems]
        if self.design.has_reference:
            doc.setdefault("axes", [])
            doc["pages"] = [
                {
                    "id": p, "image": by_source[self.references[p].label], **self._media(self.references[p]),
                    **({"truth": self.truth[p]} if p in self.truth else {}),
                    **({"meta": {"render_viewport": self.page_viewports[p]}} if p in self.page_viewports else {}),
                    **({"requirements": self.requirements[p].to_json()} if p in self.requirements else {}),
                }
                for p in self.pages
            ]
            doc["candidates"] = [
                {
                    "page": p,
                    "system": s,
                    "image": by_source[self.images[(p, s)].label] if (p, s) in self.images else None,
                    "rendered": (p, s) in self.images,
                    **(self._media(self.images[(p, s)]) if (p, s) in self.images else {}),
                    **({"render_reason": self.render_failed[(p, s)][:300]} if (p, s) in self.render_failed else {}),
                    **({"rule": self.rule_results[(p, s)]} if (p, s) in self.rule_results else {}),
                    **(
                        {"dom_blocks": self.dom_blocks[self.images[p, s].label]}
                        if (self.truth or self.design.keeps_page_text)
                        and (p, s) in self.images
                        and self.images[p, s].label in self.dom_blocks
                        else {}
                    ),
                }
                for p in self.pages
                for s in self.systems
            ]
            if "comparisons" not in self.options:
                doc["comparisons"] = [
                    {"id": cid, "page": p, "a": a, "b": b, "set": "human"} for cid, p, a, b in self._pairs()
                ]
            return doc
        doc["briefs"] = [
            {
                "id": p, "text": self.texts.get(p, ""),
                **({"requirements": self.requirements[p].to_json()} if p in self.requirements else {}),
            }
            for p in self.pages
        ]
        doc["items"] = [
            {
                "id": item_id(p, s), "image": by_source[self.images[(p, s)].label], "brief": p, "system": s,
                **({"rule": self.rule_results[(p, s)]} if (p, s) in self.rule_results else {}),
                **(
                    {"dom_blocks": self.dom_blocks[self.images[p, s].label]}
                    if self.images[p, s].label in self.dom_blocks
                    else {}
                ),
            }
            for p in self.pages
            for s in self.systems
            if (p, s) in self.images
        ]
        if self.predicates:
            doc["predicates"] = self.predicates
        return doc


    def _media(self, source: Source) -> dict[str, Any]:
        """``{"media": [...], "blocks": [...]}`` for a rendered HTML page, each key when it has any."""
        regions = self.render_media.get(source.label)
        blocks = self.render_blocks.get(source.label)
        return {
            **({"media": [{"kind": m["kind"], "bbox_1000": m["bbox_1000"]} for m in regions]} if regions else {}),
            **({"blocks": blocks} if blocks else {}),
        }


def item_id(page: str, system: str) -> str:
    """The item id of a system's image of a page (what a predicates file or option names)."""
    return f"{page}-{system}"
