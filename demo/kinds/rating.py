"""The ``rating`` poster demo (docs/study-kinds.md "Demo studies"): one candidate scored on the study's
dimensions.

Two systems, dimensions ``aesthetics`` and ``brief_fidelity`` on 1–5 (margin 0.5); the planted
system difference is small on ``aesthetics`` (equivalent) and large on ``brief_fidelity``. Raters
give latent + their own bias + noise, rounded and clipped.
"""

from __future__ import annotations

import random
from typing import Any

from annotation.models import Trial
from demo.kinds.base import PosterKind
from demo.kinds.plan import DIMENSIONS, DemoItem, ItemSlot, KindPlan, look_sample
from demo.kinds.simulation import KindAnswer, KindRater, StudyUnits, response_ms

RATING_SCALE = (1, 5)
RATING_MARGIN = 0.5
# Planted system means per dimension: close on aesthetics, apart on fidelity.
RATING_MEANS = {
    "aesthetics": (3.5, 3.4),
    "brief_fidelity": (3.9, 2.8),
}
INSTRUCTIONS = """\
Each trial shows a poster and the brief it was made for. Rate it on both dimensions from
**1 (poor)** to **5 (excellent)**:

- *Aesthetics*: is it pleasant, tidy and readable?
- *Brief fidelity*: does it give what the brief asks for (colours, date, ticket button)?

Some trials are attention checks that tell you which value to give: please give it.
"""


def rating_answer(*, rater: KindRater, latent: dict[str, float], rng: random.Random) -> KindAnswer:
    """Latent + the rater's bias + noise, rounded and clipped to the scale, per dimension."""
    ms = response_ms(rater, rng)
    low, high = RATING_SCALE
    if rater.careless:
        return KindAnswer("", None, "", dict.fromkeys(DIMENSIONS, 3), ms)
    ratings = {
        d: int(max(low, min(high, round(latent[d] + rater.bias + rng.gauss(0.0, rater.noise)))))
        for d in DIMENSIONS
    }
    return KindAnswer("", None, "", ratings, ms)


class RatingKind(PosterKind):
    kind = "rating"
    default_sizes = (16, 2)
    brief_limits = (4, 60)
    system_limits = (2, 2)
    instructions = INSTRUCTIONS
    units_word = "items"

    def item_make(self, slot: ItemSlot, rng: random.Random) -> DemoItem:
        k = slot.systems.index(slot.system)
        latent = {
            d: round(min(4.4, max(1.6, RATING_MEANS[d][k] + slot.brief_effect[d] + rng.gauss(0.0, 0.2))), 4)
            for d in DIMENSIONS
        }
        look = look_sample(
            slot.brief,
            aesthetics=(latent["aesthetics"] - 3.3) * 1.3,
            fidelity=(latent["brief_fidelity"] - 3.3) * 1.3,
            rng=rng,
        )
        return DemoItem(id=slot.item_id, brief=slot.brief.id, system=slot.system, look=look, latent=latent)

    def bundle_section(self, plan: KindPlan) -> dict[str, Any]:
        return {
            "options": {"dimensions": list(DIMENSIONS), "scale": list(RATING_SCALE), "margin": RATING_MARGIN}
        }

    def truth_section(self, plan: KindPlan) -> dict[str, Any]:
        first, second = (s for s, _ in plan.systems)
        by = {(i.brief, i.system): i.latent for i in plan.items}
        return {
            "system_means": {
                s: {d: RATING_MEANS[d][k] for d in DIMENSIONS} for k, (s, _) in enumerate(plan.systems)
            },
            "item_latent": {i.id: i.latent for i in plan.items},
            "planted_difference": {
                "systems": [first, second],
                **{
                    d: round(
                        sum(by[(b.id, first)][d] - by[(b.id, second)][d] for b in plan.briefs)
                        / len(plan.briefs),
                        4,
                    )
                    for d in DIMENSIONS
                },
            },
            "equivalent_dimension": "aesthetics",
        }

    def fresh_answer(
        self, *, rater: KindRater, trial: Trial, units: StudyUnits, rng: random.Random
    ) -> KindAnswer:
        item = units.items[units.item_of_candidate[int(trial.candidate_id or 0)]]
        return rating_answer(rater=rater, latent=item.latent, rng=rng)

    def attention_answer(
        self, *, rater: KindRater, expected: str, habit: KindAnswer, fail: bool, rng: random.Random
    ) -> KindAnswer:
        ms = response_ms(rater, rng)
        value = int(expected)
        if fail:
            value = 3 if value != 3 else 4
        return KindAnswer("", None, "", dict.fromkeys(DIMENSIONS, value), ms)


KIND = RatingKind()
