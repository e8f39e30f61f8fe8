"""The demo study's plan and its docs/protocol.md "Files" bundle (pure: no Django).

:func:`demo_plan_make` decides everything from the seed: the pages' content, each system's latent
ability θ, each candidate's latent quality ``u = θ + page noise`` and the visible defects that
quality produces, the failed renders, the human-study comparisons (balanced over system pairs)
and the deployment comparisons (docs/protocol.md "Deployment leaderboard" quotas, via
``ranking.deployment_schedule``).
:func:`demo_bundle_write` draws the images and writes ``study.json`` into a folder that
``import_study`` accepts. The simulated votes and judge replies (``simulation``) answer from the
same latent qualities, so a later analysis can be checked against the known abilities.
"""

from __future__ import annotations

import json
import math
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

from demo.drawing import Defects, PageContent, content_generate, page_draw, text_cache_clear
from ranking.deployment_schedule import make_deployment_schedule

AXES: tuple[dict[str, str], ...] = (
    {
        "id": "GLOBAL_LAYOUT_FIDELITY",
        "scope": "fixed",
        "description": "Page-level spatial organization: regions and columns, alignment, adjacency, spacing, "
        "grouping, reading order, proportions, whitespace and visual balance.",
    },
    {
        "id": "TEXT_VISUAL_PRESENTATION",
        "scope": "fixed",
        "description": "Visible presentation of text: missing or extra text regions, wrapping, line count, density, "
        "typography, size, weight, colour, emphasis, alignment and legibility (not OCR correctness).",
    },
    {
        "id": "TABLE",
        "scope": "conditional",
        "description": "Visible row/column organization, grid and cell alignment of the reference table.",
    },
    {
        "id": "FORMULA",
        "scope": "conditional",
        "description": "Fractions, scripts, summation limits and mathematical alignment of the display formula.",
    },
    {
        "id": "MEDIA",
        "scope": "conditional",
        "description": "Presence, placement and proportions of photographs and charts (their interiors are hidden).",
    },
)
AXIS_IDS = tuple(a["id"] for a in AXES)

# Which visible defect hurts which axis (the simulated raters and judges score axes from these).
DEFECT_AXES: dict[str, tuple[str, ...]] = {
    "merged_columns": ("GLOBAL_LAYOUT_FIDELITY",),
    "column_shift": ("GLOBAL_LAYOUT_FIDELITY",),
    "figures_swapped": ("GLOBAL_LAYOUT_FIDELITY", "MEDIA"),
    "font_scale": ("TEXT_VISUAL_PRESENTATION",),
    "line_spacing": ("TEXT_VISUAL_PRESENTATION", "GLOBAL_LAYOUT_FIDELITY"),
    "text_kept": ("TEXT_VISUAL_PRESENTATION",),
    "colour_shift": ("TEXT_VISUAL_PRESENTATION",),
    "dropped_table_rows": ("TABLE",),
    "table_grid_lost": ("TABLE",),
    "formula_lost": ("FORMULA", "GLOBAL_LAYOUT_FIDELITY"),
    "formula_flattened": ("FORMULA",),
    "photo_missing": ("MEDIA", "GLOBAL_LAYOUT_FIDELITY"),
    "chart_missing": ("MEDIA", "GLOBAL_LAYOUT_FIDELITY"),
}

SYSTEM_NAMES = (
    ("atlas", "Atlas Parser v2"),
    ("borealis", "Borealis Render 7B"),
    ("cobalt", "Cobalt Doc Large"),
    ("dune", "Dune OCR-to-HTML"),
    ("ember", "Ember Layout 3"),
    ("fjord", "Fjord Vision Mini"),
    ("granite", "Granite Markup"),
    ("harbor", "Harbor DocNet"),
    ("iris", "Iris Pages 14B"),
    ("juniper", "Juniper Converter"),
)

INSTRUCTIONS_MD = """\
Each trial shows a **reference page** and two candidate reconstructions, **A** and **B**.
Say which candidate a reader would find **more faithful to the reference**: A, B, or a tie when
there is no stable perceptible difference. Use *Cannot judge* only when an image does not load or
you cannot tell.

Then score every axis shown on its five buttons, read from A's side: **A much better** (the
button nearest A, key 1), *A better* (2), *Equal* (3), *B better* (4), **B much better** (key 5):

- *Global layout*: regions, columns, spacing, reading order, proportions.
- *Text presentation*: wrapping, line count, size, weight, colour, legibility — not spelling.
- *Table*, *Formula*, *Media* appear only when the reference has that element (outlined for you).

Photographs and charts may be shown as grey boxes: judge their presence and placement, not their
content. The overall choice is a holistic judgment, not the sum of the axis scores.
"""

PAGE_NOISE = 0.35  # sd of a candidate's quality around its system's ability


@dataclass(frozen=True)
class DemoSystem:
    id: str
    name: str
    ability: float


@dataclass(frozen=True)
class DemoCandidate:
    page: str
    system: str
    quality: float
    defects: Defects | None  # None: the render failed (no image)
    # Count of visible defects per axis, the per-axis evidence simulated answers use.
    axis_penalty: dict[str, float]

    @property
    def rendered(self) -> bool:
        return self.defects is not None


@dataclass(frozen=True)
class DemoComparison:
    id: str
    page: str
    a: str
    b: str
    set: str


@dataclass(frozen=True)
class DemoPlan:
    slug: str
    title: str
    seed: int
    systems: tuple[DemoSystem, ...]
    pages: tuple[PageContent, ...]
    candidates: dict[tuple[str, str], DemoCandidate]
    comparisons: tuple[DemoComparison, ...]

    @property
    def abilities(self) -> dict[str, float]:
        return {s.id: s.ability for s in self.systems}

    def page(self, page_id: str) -> PageContent:
        return self._pages_by_id()[page_id]

    def _pages_by_id(self) -> dict[str, PageContent]:
        return {p.page_id: p for p in self.pages}

    def active_axes(self, page_id: str) -> list[str]:
        """Fixed axes, then the conditional ones the page has a target for (display order,
        docs/protocol.md "The study model")."""
        return page_active_axes(self.page(page_id))

    def human(self) -> list[DemoComparison]:
        return [c for c in self.comparisons if c.set == "human"]

    def deployment(self) -> list[DemoComparison]:
        return [c for c in self.comparisons if c.set == "deployment"]


def page_active_axes(content: PageContent) -> list[str]:
    present = {
        "TABLE": content.table is not None,
        "FORMULA": content.formula,
        "MEDIA": content.has_figures,
    }
    return [a["id"] for a in AXES if a["scope"] == "fixed" or present[a["id"]]]


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _defects_sample(content: PageContent, quality: float, rng: random.Random) -> Defects:
    """Visible defects of a candidate of latent quality ``quality``: the worse, the more and larger.

    Every candidate is jittered by a few pixels, so even the best one differs from the reference.
    """

    def hit(base: float) -> bool:
        return rng.random() < _sigmoid(base - 1.6 * quality)

    jitter = (rng.randint(-3, 3) or 1, rng.randint(-3, 3))
    merged = hit(-1.8)
    kwargs: dict[str, Any] = {
        "jitter": jitter,
        "merged_columns": merged,
        "column_shift": 0 if merged or not hit(-1.2) else rng.choice((-14, 18, 26)),
        "font_scale": rng.choice((0.82, 0.88, 1.14, 1.22)) if hit(-1.0) else rng.choice((0.97, 1.0, 1.0, 1.03)),
        "line_spacing": rng.choice((0.8, 1.3, 1.45)) if hit(-1.6) else 1.0,
        "text_kept": rng.uniform(0.55, 0.85) if hit(-2.0) else 1.0,
        "colour_shift": (rng.randint(-60, 60), rng.randint(-60, 60), rng.randint(-60, 60)) if hit(-1.4) else (0, 0, 0),
    }
    if content.table is not None:
        kwargs["dropped_table_rows"] = rng.randint(1, 3) if hit(-1.0) else 0
        kwargs["table_grid_lost"] = hit(-1.6)
    if content.formula:
        lost = hit(-1.5)
        kwargs["formula_lost"] = lost
        kwargs["formula_flattened"] = not lost and hit(-0.6)
    if content.photo_seed is not None:
        kwargs["photo_missing"] = hit(-1.6)
    if content.chart_values is not None:
        kwargs["chart_missing"] = hit(-1.6)
    if content.photo_seed is not None and content.chart_values is not None:
        kwargs["figures_swapped"] = hit(-2.0)
    return Defects(**kwargs)


def _axis_penalty(defects: Defects) -> dict[str, float]:
    penalty = dict.fromkeys(AXIS_IDS, 0.0)
    active = {
        "merged_columns": defects.merged_columns,
        "column_shift": bool(defects.column_shift),
        "figures_swapped": defects.figures_swapped,
        "font_scale": abs(defects.font_scale - 1.0) >= 0.1,
        "line_spacing": abs(defects.line_spacing - 1.0) >= 0.15,
        "text_kept": defects.text_kept < 0.95,
        "colour_shift": any(defects.colour_shift),
        "dropped_table_rows": bool(defects.dropped_table_rows),
        "table_grid_lost": defects.table_grid_lost,
        "formula_lost": defects.formula_lost,
        "formula_flattened": defects.formula_flattened,
        "photo_missing": defects.photo_missing,
        "chart_missing": defects.chart_missing,
    }
    for name, on in active.items():
        if on:
            for axis in DEFECT_AXES[name]:
                penalty[axis] += 1.0
    return penalty


def _abilities(n_systems: int, rng: random.Random) -> list[float]:
    """Evenly spread, centred abilities (θ in logits), assigned to systems in seeded order."""
    if n_systems == 1:
        return [0.0]
    spread = [1.4 - 2.8 * k / (n_systems - 1) for k in range(n_systems)]
    rng.shuffle(spread)
    return [round(v, 4) for v in spread]


def demo_plan_make(
    *,
    slug: str = "demo",
    seed: int = 1,
    n_pages: int = 40,
    n_systems: int = 6,
    n_human: int | None = None,
    n_deployment: int | None = None,
) -> DemoPlan:
    """Everything the demo study contains, decided from ``seed`` (deterministic).

    Defaults: 40 pages, 6 systems, 48 human-study comparisons (two blocks of 24) and 300 deployment
    comparisons (at least 5 per page, at most what one comparison per (page, pair) allows), all
    system pairs covered. Smaller ``n_pages`` shrink the human set to 2 per page.
    """
    if not 2 <= n_systems <= len(SYSTEM_NAMES):
        raise ValueError(f"--systems must be between 2 and {len(SYSTEM_NAMES)}, got {n_systems}")
    if n_pages < 4:
        raise ValueError(f"--pages must be at least 4, got {n_pages}")
    rng = random.Random(f"arbiter-demo:{seed}")
    abilities = _abilities(n_systems, rng)
    systems = tuple(DemoSystem(id=sid, name=name, ability=abilities[k]) for k, (sid, name) in enumerate(SYSTEM_NAMES[:n_systems]))
    pages = tuple(content_generate(f"p{k + 1:03d}", rng, page_number=k + 1) for k in range(n_pages))

    candidates: dict[tuple[str, str], DemoCandidate] = {}
    for page in pages:
        for system in systems:
            quality = system.ability + rng.gauss(0.0, PAGE_NOISE)
            defects = _defects_sample(page, quality, rng)
            candidates[(page.page_id, system.id)] = DemoCandidate(
                page=page.page_id, system=system.id, quality=round(quality, 4), defects=defects, axis_penalty=_axis_penalty(defects)
            )
    # A few failed renders, more likely for weaker systems; never more than one per page.
    n_failed = max(2, round(0.02 * n_pages * n_systems))
    weights = {s.id: _sigmoid(-1.5 * s.ability) for s in systems}
    failed_pages = rng.sample([p.page_id for p in pages], min(n_failed, n_pages // 2))
    for page_id in failed_pages:
        sys_ids = [s.id for s in systems]
        system_id = rng.choices(sys_ids, weights=[weights[s] for s in sys_ids])[0]
        old = candidates[(page_id, system_id)]
        candidates[(page_id, system_id)] = DemoCandidate(
            page=page_id, system=system_id, quality=old.quality, defects=None, axis_penalty=dict.fromkeys(AXIS_IDS, 0.0)
        )

    rendered: dict[str, list[str]] = {
        p.page_id: [s.id for s in systems if candidates[(p.page_id, s.id)].rendered] for p in pages
    }
    pairs = list(combinations([s.id for s in systems], 2))
    # At most one comparison per (page, pair): every pair's quota must fit its eligible pages.
    pair_pages = min(sum(1 for ok in rendered.values() if s in ok and t in ok) for s, t in pairs)
    capacity = len(pairs) * pair_pages
    if n_human is None:
        n_human = 2 * (min(48, 2 * n_pages, capacity // 2) // 2)
    if n_deployment is None:
        n_deployment = max(0, min(max(5 * n_pages, 300), capacity - n_human))
    human: list[tuple[str, str, str]] = []
    used: set[tuple[str, frozenset[str]]] = set()
    load = dict.fromkeys(rendered, 0)
    pair_order: list[tuple[str, str]] = []
    while len(pair_order) < n_human:
        batch = pairs[:]
        rng.shuffle(batch)
        pair_order.extend(batch)
    for s, t in pair_order[:n_human]:
        eligible = [p for p, ok in rendered.items() if s in ok and t in ok and (p, frozenset((s, t))) not in used]
        if not eligible:
            continue
        low = min(load[p] for p in eligible)
        page_id = rng.choice([p for p in eligible if load[p] == low])
        load[page_id] += 1
        used.add((page_id, frozenset((s, t))))
        a, b = (s, t) if rng.random() < 0.5 else (t, s)
        human.append((page_id, a, b))
    schedule = make_deployment_schedule(
        [s.id for s in systems],
        {p: ok for p, ok in rendered.items() if len(ok) >= 2},
        human,
        len(human) + n_deployment,
        seed=seed,
    )
    comparisons = [DemoComparison(id=f"h{k + 1:03d}", page=p, a=a, b=b, set="human") for k, (p, a, b) in enumerate(human)]
    comparisons += [
        DemoComparison(id=f"d{k + 1:04d}", page=p, a=a, b=b, set="deployment") for k, (p, a, b) in enumerate(schedule.comparisons)
    ]
    return DemoPlan(
        slug=slug,
        title=f"Demo: page reconstruction fidelity (seed {seed})",
        seed=seed,
        systems=systems,
        pages=pages,
        candidates=candidates,
        comparisons=tuple(comparisons),
    )


def _save_png(image: Any, path: Path) -> None:
    # Fast, low compression: the import re-encodes every image anyway (annotation.images).
    image.save(path, format="PNG", compress_level=1)


def _page_files(plan: DemoPlan, content: PageContent, folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Draw one page and its candidates; returns its study.json page entry and candidate entries."""
    descriptions = {"table": "results table", "formula": "display formula (1)", "photo": "photograph", "chart": "bar chart"}
    axis_of = {"table": "TABLE", "formula": "FORMULA", "photo": "MEDIA", "chart": "MEDIA"}
    drawn = page_draw(content)
    name = f"images/{content.page_id}.png"
    _save_png(drawn.image, folder / name)
    page_json = {
        "id": content.page_id,
        "image": name,
        "targets": [
            {"axis": axis_of[r.role], "role": r.role, "bbox_1000": list(r.bbox_1000), "description": descriptions[r.role]}
            for r in drawn.regions
        ],
        "media": drawn.media(),
        "meta": {"synthetic": True, "elements": list(content.element_order), "page_number": content.page_number},
    }
    candidates_json: list[dict[str, Any]] = []
    for system in plan.systems:
        candidate = plan.candidates[(content.page_id, system.id)]
        if candidate.defects is None:
            candidates_json.append({"page": content.page_id, "system": system.id, "image": None, "rendered": False, "media": []})
            continue
        rendered = page_draw(content, candidate.defects)
        cname = f"images/{content.page_id}-{system.id}.png"
        _save_png(rendered.image, folder / cname)
        candidates_json.append(
            {"page": content.page_id, "system": system.id, "image": cname, "rendered": True, "media": rendered.media()}
        )
    return page_json, candidates_json


def demo_bundle_write(plan: DemoPlan, folder: Path, *, workers: int = 4) -> Path:
    """Draw every image and write ``study.json`` (docs/protocol.md "Files") into ``folder``; returns
    ``study.json``'s path.

    The reference page gets its targets from where the drawing put the table, the formula and the
    media (so the bbox_1000 outlines are exact); each candidate gets its own media regions. Pages
    are drawn on a few threads (Pillow releases the GIL while rasterizing and encoding); the
    output does not depend on the order they finish in.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "images").mkdir(exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        drawn = list(pool.map(lambda content: _page_files(plan, content, folder), plan.pages))
    text_cache_clear()
    study = {
        "slug": plan.slug,
        "title": plan.title,
        "kind": "pairwise_reference",
        "instructions_md": INSTRUCTIONS_MD,
        "axes": [dict(a) for a in AXES],
        "systems": [{"id": s.id, "name": s.name} for s in plan.systems],
        "pages": [page for page, _ in drawn],
        "candidates": [c for _, candidates in drawn for c in candidates],
        "comparisons": [{"id": c.id, "page": c.page, "a": c.a, "b": c.b, "set": c.set} for c in plan.comparisons],
    }
    path = folder / "study.json"
    path.write_text(json.dumps(study, indent=1))
    return path
