"""Studies of the other study kinds (docs/study-kinds.md "Scheduling") with stored votes, built without the
scheduler.

A study is imported from a bundle derived from ``fixtures/bundles/<kind>`` (same images, more
briefs when asked) with the real importer; blocks, assignments, trials and votes are then created
directly with the ORM, so the report is tested on exactly the rows the rater pages will write.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db.models import Max

from annotation.models import (
    Assignment,
    AssignmentState,
    Block,
    BlockItem,
    Candidate,
    Comparison,
    Predicate,
    Rater,
    Study,
    Trial,
    Vote,
)
from annotation.services.bundles.importing import study_import_bundle

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"


def kind_bundle(
    kind: str,
    target: Path,
    *,
    slug: str | None = None,
    briefs: int | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Path:
    """A writable copy of ``fixtures/bundles/<kind>``; ``briefs=N`` rebuilds it with N briefs.

    With ``briefs``, every brief gets one item per system of the fixture, reusing the fixture's
    images in turn; metrics (pairwise) are left for ``edit`` to set; the comparisons key is left
    out (every pair of items of each brief, ``<brief>-1``, …). ``checklist`` gets three predicates
    per item (types Layout / Content / untagged, automatic YES / NO / UNCLEAR / none in turn).
    """
    shutil.copytree(FIXTURES / kind, target)
    for path in target.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    doc = json.loads((target / "study.json").read_text())
    if slug:
        doc["slug"] = slug
    if briefs is not None:
        images = sorted({item["image"] for item in doc["items"]})
        systems = [s["id"] for s in doc["systems"]]
        doc["briefs"] = [{"id": f"b{i + 1}", "text": f"Brief number {i + 1}."} for i in range(briefs)]
        doc["items"] = [
            {
                "id": f"b{i + 1}-{s}",
                "image": images[(i * len(systems) + j) % len(images)],
                "brief": f"b{i + 1}",
                "system": s,
                "metrics": {},
            }
            for i in range(briefs)
            for j, s in enumerate(systems)
        ]
        doc.pop("comparisons", None)
        if kind == "checklist":
            autos = ["YES", "NO", "UNCLEAR", None]
            types = ["Layout", "Content", None]
            preds: list[dict[str, Any]] = []
            for item in doc["items"]:
                for q in range(3):
                    n = len(preds)
                    p: dict[str, Any] = {
                        "id": f"p{n + 1}",
                        "item": item["id"],
                        "question": f"Question {q + 1} about {item['id']}?",
                        "automatic": autos[n % len(autos)],
                    }
                    if types[q]:
                        p["type"] = types[q]
                    preds.append(p)
            doc["predicates"] = preds
    if edit is not None:
        edit(doc)
    (target / "study.json").write_text(json.dumps(doc, indent=1))
    return target


def import_kind_study(
    kind: str,
    tmp_dir: Path,
    *,
    slug: str | None = None,
    briefs: int | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
    researchers: Sequence[Any] = (),
) -> Study:
    folder = tmp_dir / f"bundle-{slug or kind}"
    study = study_import_bundle(path=kind_bundle(kind, folder, slug=slug, briefs=briefs, edit=edit))
    for user in researchers:
        study.researchers.add(user)
    return study


@dataclass
class VoteWriter:
    """Creates one block per study and, per call, the rows a rater page would write."""

    study: Study
    block: Block = field(init=False)

    def __post_init__(self) -> None:
        self.block = Block.objects.create(study=self.study, name="block-1", position=0, target_raters=10)

    def rater(self, external_id: str, *, attempts: int = 1, passed: bool = True) -> Rater:
        rater, _ = Rater.objects.get_or_create(
            study=self.study,
            external_id=external_id,
            defaults={
                "source": Rater.Source.LINK,
                "comprehension_attempts": attempts,
                "comprehension_passed": passed,
            },
        )
        return rater

    def assignment(self, rater: Rater, *, state: str = AssignmentState.FINISHED) -> Assignment:
        slot = (Assignment.objects.filter(block=self.block).aggregate(m=Max("slot"))["m"] or 0) + 1
        return Assignment.objects.create(block=self.block, slot=slot, rater=rater, state=state)

    def _unit_fields(self, unit: Comparison | Predicate | Candidate) -> dict[str, Any]:
        if isinstance(unit, Comparison):
            return {"comparison": unit}
        if isinstance(unit, Predicate):
            return {"predicate": unit}
        return {"candidate": unit}

    def trial(
        self,
        assignment: Assignment,
        unit: Comparison | Predicate | Candidate,
        *,
        label: str = "",
        ratings: dict[str, int] | None = None,
        rationale: str = "",
        swapped: bool = False,
        repeat_of: Trial | None = None,
        attention: str = "",
        response_ms: int | None = 2500,
        confidence: int | None = None,
    ) -> Trial:
        fields = self._unit_fields(unit)
        if not BlockItem.objects.filter(block=self.block, **fields).exists():
            position = BlockItem.objects.filter(block=self.block).count()
            BlockItem.objects.create(block=self.block, position=position, **fields)
        position = Trial.objects.filter(assignment=assignment).count()
        trial = Trial.objects.create(
            assignment=assignment,
            position=position,
            swapped=swapped,
            is_repeat=repeat_of is not None,
            repeat_of=repeat_of,
            attention_expected=attention,
            **fields,
        )
        if isinstance(unit, Comparison) and confidence is None and label != "CANNOT_JUDGE":
            confidence = 3
        Vote.objects.create(
            trial=trial,
            label=label,
            confidence=confidence,
            rationale=rationale or ("seen" if isinstance(unit, Predicate) else ""),
            answers={"ratings": ratings} if ratings is not None else {},
            response_ms=response_ms,
        )
        return trial


def displayed(label: str, swapped: bool) -> str:
    """The label as shown on screen (A = left) for a canonical pairwise label."""
    return {"A": "B", "B": "A"}.get(label, label) if swapped else label


def canonical(shown: str, swapped: bool) -> str:
    """The canonical label stored for an answer given on screen."""
    return displayed(shown, swapped)
