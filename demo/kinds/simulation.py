"""The simulated participants of the kind demos (pure): profiles, response times, what every kind shares.

Every kind has one careless rater (the last one): a straight-liner answering in well under a
second, who fails the first attention check; the hygiene rules (``too_fast_median``,
``straight_lining_share``, ``attention``) find them and nobody else. The second rater passes the
comprehension check only at the second attempt. A kind's own answers (the ordered-logit pairwise
answer of ``demo.simulation``, checklist accuracy, rating noise) live in the kind's module.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from demo.kinds.plan import DemoItem, DemoPredicate

SIMULATED_RATERS_PER_BLOCK = 3  # checklist: k = 3 raters per predicate


@dataclass(frozen=True)
class KindRater:
    id: str
    careless: bool
    median_ms: int
    noise: float  # pairwise: latent scale; rating: sd of a rating around the latent
    tie_band: float  # pairwise
    accuracy: float  # checklist
    unclear_rate: float  # checklist
    bias: float  # rating: added to every rating
    comprehension_attempts: int  # 1: right at once; 2: right at the second try; 0: fails twice


@dataclass(frozen=True)
class KindAnswer:
    """An answer as the trial page submits it (display terms)."""

    verdict: str
    confidence: int | None
    rationale: str
    ratings: dict[str, int] | None
    response_ms: int


def kind_raters(kind: str, n: int, seed: int) -> tuple[KindRater, ...]:
    """``n`` simulated raters: the second needs two comprehension attempts, the last is careless."""
    rng = random.Random(f"arbiter-demo-{kind}-raters:{seed}")
    raters = []
    for k in range(n):
        careless = k == n - 1 and n > 2
        raters.append(
            KindRater(
                id=f"sim-rater-{k + 1:02d}",
                careless=careless,
                median_ms=rng.randint(650, 900) if careless else rng.randint(4000, 9000),
                noise=round(rng.uniform(0.45, 0.7), 3),
                tie_band=round(rng.uniform(0.3, 0.6), 3),
                accuracy=round(rng.uniform(0.82, 0.92), 3),
                unclear_rate=round(rng.uniform(0.02, 0.06), 3),
                bias=round(rng.gauss(0.0, 0.2), 3),
                comprehension_attempts=2 if k == 1 else 1,
            )
        )
    return tuple(raters)


def screened_out_rater() -> KindRater:
    """The participant who fails the comprehension check twice (pairwise demo)."""
    return KindRater(
        id="sim-screened-01",
        careless=True,
        median_ms=800,
        noise=1.0,
        tie_band=0.5,
        accuracy=0.5,
        unclear_rate=0.0,
        bias=0.0,
        comprehension_attempts=0,
    )


def response_ms(rater: KindRater, rng: random.Random) -> int:
    if rater.careless:
        return int(rater.median_ms * math.exp(rng.gauss(0.0, 0.15)))
    return max(1500, int(rater.median_ms * math.exp(rng.gauss(0.0, 0.4))))


@dataclass(frozen=True)
class StudyUnits:
    """What a trial's unit is in the plan: the imported study's primary keys mapped to plan ids."""

    items: dict[str, DemoItem]
    predicates: dict[str, DemoPredicate]
    comparison_items: dict[int, tuple[str, str]]  # comparison pk -> (item of A, item of B)
    item_of_candidate: dict[int, str]
    predicate_of: dict[int, str]
