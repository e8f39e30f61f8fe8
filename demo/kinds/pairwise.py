"""The ``pairwise`` poster demo (docs/study-kinds.md "Demo studies"): every pair of a brief's items compared,
no reference.

Each system has an ability θ, each item a latent quality ``q = θ + noise`` that drives both its
look and its two metrics (``aesthetic``, ``clip``, noisy increasing functions of q). Every pair of
a brief's items is compared (the bundle leaves ``comparisons`` out). Raters answer the displayed
pair with the ordered-logit model of ``demo.simulation``; one extra participant fails the
comprehension check twice and is screened out (never claims a slot).
"""

from __future__ import annotations

import random
from typing import Any

from annotation.models import Trial
from demo.kinds.base import PosterKind
from demo.kinds.plan import DemoItem, ItemSlot, KindPlan, quality_look, quality_truth
from demo.kinds.simulation import KindAnswer, KindRater, StudyUnits, response_ms
from demo.simulation import logistic_draw

INSTRUCTIONS = """\
Each trial shows an event brief and two posters, **A** (left) and **B** (right).
Pick the poster that answers the brief better: a clear, readable headline, the requested colours,
the date and a ticket button, a tidy layout. Answer **Tie** when you see no stable difference, and
*Cannot judge* only when an image does not load. Then say how confident you are (1–5); a short
reason is welcome but optional.

Some trials are attention checks that tell you which answer to give: please give it.
"""


PAIRWISE_REASONS = {
    "A": ("left headline easier to read", "left has the date and the button", "left is tidier", ""),
    "B": ("right headline easier to read", "right has the date and the button", "right is tidier", ""),
    "TIE": ("both about the same", ""),
}


def pairwise_answer(*, rater: KindRater, q_left: float, q_right: float, rng: random.Random) -> KindAnswer:
    """Ordered logit on the displayed pair (``demo.simulation``): left wins when z > tie band."""
    ms = response_ms(rater, rng)
    if rater.careless:
        return KindAnswer("A", 5, "", None, ms)
    if rng.random() < 0.01:
        return KindAnswer("CANNOT_JUDGE", 1, "image did not load", None, ms)
    z = (q_left - q_right) / rater.noise + logistic_draw(rng)
    verdict = "A" if z > rater.tie_band else "B" if z < -rater.tie_band else "TIE"
    confidence = max(1, min(5, 1 + int(abs(z) - rater.tie_band + 1.2)))
    reason = rng.choice(PAIRWISE_REASONS[verdict]) if rng.random() < 0.4 else ""
    return KindAnswer(verdict, confidence, reason, None, ms)


class PairwiseKind(PosterKind):
    kind = "pairwise"
    default_sizes = (16, 4)
    brief_limits = (2, 60)
    system_limits = (2, 6)
    instructions = INSTRUCTIONS
    units_word = "comparisons"
    ability_spread = 1.2
    screens_out_one = True

    def item_make(self, slot: ItemSlot, rng: random.Random) -> DemoItem:
        quality, look = quality_look(slot.brief, slot.abilities[slot.system], rng)
        metrics = {
            "aesthetic": round(5.5 + 0.9 * quality + rng.gauss(0.0, 0.35), 3),
            "clip": round(0.30 + 0.02 * quality + rng.gauss(0.0, 0.01), 4),
        }
        return DemoItem(
            id=slot.item_id,
            brief=slot.brief.id,
            system=slot.system,
            look=look,
            quality=quality,
            metrics=metrics,
        )

    # The bundle leaves "comparisons" out, so every pair of a brief's items is compared.

    def truth_section(self, plan: KindPlan) -> dict[str, Any]:
        return quality_truth(plan)

    def fresh_answer(
        self, *, rater: KindRater, trial: Trial, units: StudyUnits, rng: random.Random
    ) -> KindAnswer:
        a, b = units.comparison_items[int(trial.comparison_id or 0)]
        left, right = (b, a) if trial.swapped else (a, b)
        return pairwise_answer(
            rater=rater, q_left=units.items[left].quality, q_right=units.items[right].quality, rng=rng
        )

    def attention_answer(
        self, *, rater: KindRater, expected: str, habit: KindAnswer, fail: bool, rng: random.Random
    ) -> KindAnswer:
        ms = response_ms(rater, rng)
        verdict = expected
        if fail:
            verdict = habit.verdict if habit.verdict != expected else "B"
        return KindAnswer(verdict, 5, "", None, ms)

    def made_line(self, counts: dict[str, int]) -> str:
        return f", comparisons: {counts['comparisons']} (every pair of a brief's items)"


KIND = PairwiseKind()
