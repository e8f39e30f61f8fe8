"""The ``checklist`` poster demo (docs/study-kinds.md "Demo studies"): one candidate, one yes/no predicate per
trial.

Six yes/no predicates per item (types Content / Layout / Style), whose true answer is read off the
drawn look; element boxes where the question is about a drawn element; an imported ``automatic``
answer that is right 85 % of the time. Raters answer the truth with their accuracy (~0.85),
sometimes Unclear (more often on borderline predicates). Every fourth brief is empty.
"""

from __future__ import annotations

import random
from typing import Any

from annotation.models import Trial
from demo.kinds.base import PosterKind
from demo.kinds.drawing import poster_layout
from demo.kinds.plan import (
    DemoBrief,
    DemoItem,
    DemoPredicate,
    ItemSlot,
    KindPlan,
    quality_look,
    quality_truth,
)
from demo.kinds.simulation import SIMULATED_RATERS_PER_BLOCK, KindAnswer, KindRater, StudyUnits, response_ms

AUTOMATIC_ACCURACY = 0.85
INSTRUCTIONS = """\
Each trial shows a poster (with its brief when there is one) and one yes/no question about it.
Outlined boxes, when shown, mark the element the question is about.
Answer **Yes** or **No**; answer **Unclear** only when the image does not show enough to tell.
Always note the evidence you see in a few words (e.g. "headline visible top left").

Some trials are attention checks that tell you which answer to give: please give it.
"""


QUESTION_BANK: tuple[tuple[str, str, str], ...] = (
    # (topic, type, question)
    ("headline_top", "Layout", "Is the headline at the top of the poster?"),
    ("date", "Content", "Does the poster show the date of the event?"),
    ("warm", "Style", "Is the colour palette warm (reds, oranges, beige)?"),
    ("shape_right", "Layout", "Is the main shape on the right half of the poster?"),
    ("readable", "Style", "Is the headline easy to read against its background?"),
    ("button", "Content", "Is there a ticket button at the bottom?"),
)
BOTTOM_BAND = (0, 780, 1000, 1000)


def _predicates_for(
    item: DemoItem, boxes: dict[str, tuple[int, int, int, int]], start: int, rng: random.Random
) -> list[DemoPredicate]:
    look = item.look
    truths = {
        "headline_top": look.headline_top,
        "date": look.date_shown,
        "warm": look.warm,
        "shape_right": look.shape_right,
        "readable": look.contrast >= 0.5,
        "button": look.button_shown,
    }
    element_boxes = {
        "headline_top": (boxes["headline"],),
        "shape_right": (boxes["shape"],),
        "readable": (boxes["headline"],),
        "button": (BOTTOM_BAND,),
    }
    out = []
    for k, (topic, qtype, question) in enumerate(QUESTION_BANK):
        truth = "YES" if truths[topic] else "NO"
        if rng.random() < AUTOMATIC_ACCURACY:
            automatic = truth
        else:
            automatic = "UNCLEAR" if rng.random() < 0.4 else ("NO" if truth == "YES" else "YES")
        out.append(
            DemoPredicate(
                id=f"p{start + k:03d}",
                item=item.id,
                question=question,
                type=qtype,
                boxes=element_boxes.get(topic, ()),
                truth=truth,
                automatic=automatic,
                borderline=topic == "readable" and 0.35 < look.contrast < 0.65,
                topic=topic,
            )
        )
    return out


EVIDENCE = {
    "headline_top": {
        "YES": "headline visible top left",
        "NO": "headline sits in the middle",
        "UNCLEAR": "cannot tell where the headline starts",
    },
    "date": {
        "YES": "date shown bottom left",
        "NO": "no date anywhere",
        "UNCLEAR": "small text, not sure it is a date",
    },
    "warm": {"YES": "oranges and beige", "NO": "blues and greens", "UNCLEAR": "mixed colours"},
    "shape_right": {
        "YES": "shape on the right side",
        "NO": "shape on the left side",
        "UNCLEAR": "shape near the centre",
    },
    "readable": {
        "YES": "dark headline on a light background",
        "NO": "headline faint against the background",
        "UNCLEAR": "readable but low contrast",
    },
    "button": {
        "YES": "button bottom right",
        "NO": "no button at the bottom",
        "UNCLEAR": "a box at the bottom, no label",
    },
}


def checklist_answer(*, rater: KindRater, predicate: DemoPredicate, rng: random.Random) -> KindAnswer:
    """The truth with the rater's accuracy, else the opposite; Unclear sometimes (borderline: often)."""
    ms = response_ms(rater, rng)
    if rater.careless:
        return KindAnswer("YES", None, "ok", None, ms)
    unclear = rater.unclear_rate + (0.25 if predicate.borderline else 0.0)
    accuracy = rater.accuracy - (0.15 if predicate.borderline else 0.0)
    u = rng.random()
    if u < unclear:
        answer = "UNCLEAR"
    elif rng.random() < accuracy:
        answer = predicate.truth
    else:
        answer = "NO" if predicate.truth == "YES" else "YES"
    return KindAnswer(answer, None, EVIDENCE[predicate.topic][answer], None, ms)


class ChecklistKind(PosterKind):
    kind = "checklist"
    default_sizes = (12, 2)
    brief_limits = (2, 60)
    system_limits = (1, 6)
    instructions = INSTRUCTIONS
    units_word = "predicates"
    ability_spread = 0.8
    blank_brief_every = 4  # checklist briefs may be empty: the image is shown alone

    def item_make(self, slot: ItemSlot, rng: random.Random) -> DemoItem:
        quality, look = quality_look(slot.brief, slot.abilities[slot.system], rng)
        return DemoItem(
            id=slot.item_id, brief=slot.brief.id, system=slot.system, look=look, quality=quality, metrics={}
        )

    def predicates_make(
        self, *, brief: DemoBrief, item: DemoItem, start: int, rng: random.Random
    ) -> list[DemoPredicate]:
        return _predicates_for(item, poster_layout(brief, item.look), start, rng)

    def bundle_section(self, plan: KindPlan) -> dict[str, Any]:
        return {
            "predicates": [
                {
                    "id": p.id,
                    "item": p.item,
                    "question": p.question,
                    "boxes": [list(b) for b in p.boxes],
                    "automatic": p.automatic,
                    "type": p.type,
                }
                for p in plan.predicates
            ],
            "options": {"k": SIMULATED_RATERS_PER_BLOCK},
        }

    def truth_section(self, plan: KindPlan) -> dict[str, Any]:
        return {
            **quality_truth(plan),
            "predicate_truth": {p.id: p.truth for p in plan.predicates},
            "borderline": [p.id for p in plan.predicates if p.borderline],
            "automatic_agreement": round(
                sum(p.automatic == p.truth for p in plan.predicates) / max(1, len(plan.predicates)), 4
            ),
        }

    def fresh_answer(
        self, *, rater: KindRater, trial: Trial, units: StudyUnits, rng: random.Random
    ) -> KindAnswer:
        predicate = units.predicates[units.predicate_of[int(trial.predicate_id or 0)]]
        return checklist_answer(rater=rater, predicate=predicate, rng=rng)

    def attention_answer(
        self, *, rater: KindRater, expected: str, habit: KindAnswer, fail: bool, rng: random.Random
    ) -> KindAnswer:
        ms = response_ms(rater, rng)
        verdict = expected
        if fail:
            verdict = habit.verdict if habit.verdict != expected else "NO"
        return KindAnswer(verdict, None, "answered as the check asks" if not fail else "ok", None, ms)

    def made_line(self, counts: dict[str, int]) -> str:
        return f", predicates: {counts['predicates']} (k = {SIMULATED_RATERS_PER_BLOCK})"


KIND = ChecklistKind()
