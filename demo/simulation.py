"""Simulated raters and judges answering from known latent qualities (pure: no Django).

Both answer a displayed pair (left, right) from the latent qualities of its candidates with an
ordered-logit model: ``z = (u_left − u_right) / noise + position_bias + ε``, ε ~ Logistic(0, 1);
the displayed left wins when ``z > tie_band``, the right when ``z < −tie_band``, otherwise TIE.
Without bias and tie band this is P(left) = σ((u_left − u_right) / noise), the Bradley–Terry model
of docs/protocol.md "Deployment leaderboard" on the latent scale, so an analysis of the answers should recover
the systems' order.

Axis scores follow the visible defects behind each axis (``DemoCandidate.axis_penalty``) plus the
overall difference, and are made consistent with the verdict (never against the chosen side).
A judge's reply is the raw text a judge would send (docs/protocol.md "Judges and calibration"): JSON in
*display* terms — for order ``swapped`` the left image is canonical B, so a judge preferring canonical A
answers "B" and negates its axis scores; some judges sometimes fence the JSON, answer in prose or send the
axes in the wrong order (invalid, as the validator must find).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from demo.bundle import DemoPlan

LABELS = ("A", "B", "TIE", "CANNOT_JUDGE")


@dataclass(frozen=True)
class PairEvidence:
    """What a simulated observer sees of a comparison, canonical orientation (A minus B)."""

    quality_diff: float  # u_A − u_B
    axis_diff: dict[str, float]  # per active axis: penalty_B − penalty_A (positive favours A)
    active_axes: tuple[str, ...]  # display order


@dataclass(frozen=True)
class RaterProfile:
    id: str
    noise: float  # scale of the latent difference (larger: noisier)
    position_bias: float  # logit added in favour of the left image
    tie_band: float
    cannot_judge_rate: float
    repeat_consistency: float  # probability a hidden repeat replays the original answer
    median_ms: int


@dataclass(frozen=True)
class JudgeProfile:
    name: str
    family: str
    model: str
    noise: float
    position_bias: float
    tie_band: float
    prose_rate: float  # replies in prose (invalid)
    fence_rate: float  # wraps the JSON in a ```json fence (valid, unwrapped by the validator)
    axis_error_rate: float  # sends the axes in the wrong order or drops one (invalid)
    note: str


@dataclass(frozen=True)
class SimulatedAnswer:
    """A rater's answer in display orientation (what the trial page would submit)."""

    verdict: str
    confidence: int
    axes: dict[str, int]
    rationale: str
    response_ms: int


JUDGE_PROFILES: tuple[JudgeProfile, ...] = (
    JudgeProfile("demo-anthropic-large", "anthropic", "demo/claude-like-large", 0.45, 0.0, 0.30, 0.0, 0.05, 0.0,
                 "strong and calibrated"),
    JudgeProfile("demo-anthropic-small", "anthropic", "demo/claude-like-small", 0.75, 0.1, 0.35, 0.0, 0.0, 0.02,
                 "good, occasionally misorders axes"),
    JudgeProfile("demo-google-pro", "google", "demo/gemini-like-pro", 0.7, 0.9, 0.25, 0.0, 0.25, 0.0,
                 "position-biased: prefers the image shown first"),
    JudgeProfile("demo-openai-sol", "openai", "demo/gpt-like-sol", 1.6, 0.0, 0.30, 0.0, 0.0, 0.0,
                 "noisy"),
    JudgeProfile("demo-openai-terra", "openai", "demo/gpt-like-terra", 0.8, -0.1, 0.45, 0.05, 0.1, 0.0,
                 "sometimes answers in prose"),
)


def rater_profiles(n: int, seed: int) -> tuple[RaterProfile, ...]:
    """``n`` simulated raters with known noise; rater 2 leans to the left image, the last is sloppy."""
    rng = random.Random(f"arbiter-demo-raters:{seed}")
    profiles = []
    for k in range(n):
        noise = round(rng.uniform(0.55, 0.9), 3)
        bias = 0.0
        consistency = round(rng.uniform(0.8, 0.95), 3)
        cannot = 0.02
        if k == 1:
            bias = 0.5
        if k == n - 1 and n > 2:
            noise, consistency, cannot = 1.8, 0.55, 0.05
        profiles.append(
            RaterProfile(
                id=f"sim-rater-{k + 1:02d}",
                noise=noise,
                position_bias=bias,
                tie_band=round(rng.uniform(0.25, 0.5), 3),
                cannot_judge_rate=cannot,
                repeat_consistency=consistency,
                median_ms=rng.randint(7000, 16000),
            )
        )
    return tuple(profiles)


def logistic_draw(rng: random.Random) -> float:
    p = min(max(rng.random(), 1e-12), 1 - 1e-12)
    return math.log(p / (1 - p))


def _display_latent(diff: float, *, swapped: bool, noise: float, bias: float, rng: random.Random) -> tuple[float, float]:
    """(z, mean) on the display scale: positive favours the left image."""
    left_minus_right = -diff if swapped else diff
    mean = left_minus_right / noise + bias
    return mean + logistic_draw(rng), mean


def _verdict(z: float, tie_band: float) -> str:
    if z > tie_band:
        return "A"
    if z < -tie_band:
        return "B"
    return "TIE"


def _axis_scores(evidence: PairEvidence, verdict: str, *, swapped: bool, noise: float, rng: random.Random) -> dict[str, int]:
    """Display-orientation axis scores, consistent with the verdict (never against the chosen side)."""
    sign = -1.0 if swapped else 1.0
    scores: dict[str, int] = {}
    for axis in evidence.active_axes:
        raw = sign * (0.9 * evidence.axis_diff.get(axis, 0.0) + 0.45 * evidence.quality_diff) + rng.gauss(0.0, 0.5 * noise)
        score = max(-2, min(2, round(raw)))
        if verdict == "A":
            score = max(score, 0)
        elif verdict == "B":
            score = min(score, 0)
        else:
            score = max(-1, min(1, score))
        scores[axis] = int(score)
    if verdict in ("A", "B") and all(v == 0 for v in scores.values()) and scores:
        # The chosen side is better somewhere: mark the axis with the largest evidence.
        best = max(evidence.active_axes, key=lambda a: abs(evidence.axis_diff.get(a, 0.0)))
        scores[best] = 1 if verdict == "A" else -1
    return scores


def _confidence(z: float, tie_band: float) -> int:
    return max(1, min(5, 1 + int(abs(z) - tie_band + 1.2)))


RATIONALES = {
    "A": ("left keeps the layout", "left is closer to the reference", "table and columns better on the left", ""),
    "B": ("right keeps the layout", "right is closer to the reference", "left lost part of the page", ""),
    "TIE": ("both similar", "no clear difference", ""),
    "CANNOT_JUDGE": ("cannot tell", "image hard to read"),
}


def rater_answer(
    *, profile: RaterProfile, evidence: PairEvidence, swapped: bool, rng: random.Random
) -> SimulatedAnswer:
    """One rater's answer to a displayed trial (display orientation, as the trial page submits)."""
    response_ms = max(1500, int(profile.median_ms * math.exp(rng.gauss(0.0, 0.45))))
    if rng.random() < profile.cannot_judge_rate:
        return SimulatedAnswer("CANNOT_JUDGE", 1, {}, rng.choice(RATIONALES["CANNOT_JUDGE"]), response_ms)
    z, _ = _display_latent(evidence.quality_diff, swapped=swapped, noise=profile.noise, bias=profile.position_bias, rng=rng)
    verdict = _verdict(z, profile.tie_band)
    axes = _axis_scores(evidence, verdict, swapped=swapped, noise=profile.noise, rng=rng)
    rationale = rng.choice(RATIONALES[verdict]) if rng.random() < 0.4 else ""
    return SimulatedAnswer(verdict, _confidence(z, profile.tie_band), axes, rationale, response_ms)


def rater_repeat_answer(
    *, profile: RaterProfile, original: SimulatedAnswer, evidence: PairEvidence, swapped: bool, rng: random.Random
) -> SimulatedAnswer:
    """A hidden repeat (same display orientation as its original): mostly the same answer again."""
    if rng.random() < profile.repeat_consistency:
        response_ms = max(1500, int(profile.median_ms * 0.8 * math.exp(rng.gauss(0.0, 0.4))))
        return SimulatedAnswer(original.verdict, original.confidence, dict(original.axes), "", response_ms)
    return rater_answer(profile=profile, evidence=evidence, swapped=swapped, rng=rng)


REASONS = {
    "A": ("A preserves the two-column layout and the table structure.", "A is closer to the reference overall.",
          "B loses elements that A keeps."),
    "B": ("B preserves the two-column layout and the table structure.", "B is closer to the reference overall.",
          "A loses elements that B keeps."),
    "TIE": ("Both candidates are similarly faithful.", "No stable perceptible difference."),
}


def judge_reply(
    *, profile: JudgeProfile, evidence: PairEvidence, order: str, rng: random.Random
) -> str:
    """The raw reply of a judge for one call (docs/protocol.md "Judges and calibration", display terms of
    ``order``)."""
    if order not in ("primary", "swapped"):
        raise ValueError(f"order must be primary or swapped, got {order!r}")
    swapped = order == "swapped"
    z, _ = _display_latent(evidence.quality_diff, swapped=swapped, noise=profile.noise, bias=profile.position_bias, rng=rng)
    winner = _verdict(z, profile.tie_band)
    if rng.random() < profile.prose_rate:
        side = {"A": "the first candidate", "B": "the second candidate", "TIE": "neither candidate"}[winner]
        return f"Looking at the reference, I think {side} is more faithful overall, mostly because of the layout."
    axes = _axis_scores(evidence, winner, swapped=swapped, noise=profile.noise, rng=rng)
    axis_list = [{"id": a, "score": axes[a]} for a in evidence.active_axes]
    if len(axis_list) >= 2 and rng.random() < profile.axis_error_rate:
        axis_list = axis_list[1:] + axis_list[:1] if rng.random() < 0.5 else axis_list[:-1]
    reply = {
        "winner": winner,
        "confidence": _confidence(z, profile.tie_band),
        "reason": rng.choice(REASONS[winner]),
        "axes": axis_list,
    }
    text = json.dumps(reply)
    if rng.random() < profile.fence_rate:
        text = f"```json\n{json.dumps(reply, indent=1)}\n```"
    return text


def evidence_for(
    *, quality_a: float, quality_b: float, penalty_a: dict[str, float], penalty_b: dict[str, float], active_axes: Sequence[str]
) -> PairEvidence:
    return PairEvidence(
        quality_diff=quality_a - quality_b,
        axis_diff={a: penalty_b.get(a, 0.0) - penalty_a.get(a, 0.0) for a in active_axes},
        active_axes=tuple(active_axes),
    )


def call_rng(seed: int, *parts: object) -> random.Random:
    """A deterministic generator for one simulated act (string seeds hash with SHA-512, stable)."""
    return random.Random(":".join(str(p) for p in (seed, *parts)))


def plan_evidence(plan: DemoPlan, page: str, a: str, b: str) -> PairEvidence:
    """The evidence of comparison (page, A = a, B = b) in a demo plan."""
    ca, cb = plan.candidates[(page, a)], plan.candidates[(page, b)]
    return evidence_for(
        quality_a=ca.quality,
        quality_b=cb.quality,
        penalty_a=ca.axis_penalty,
        penalty_b=cb.axis_penalty,
        active_axes=plan.active_axes(page),
    )


def judge_outputs_jsonl_write(*, plan: DemoPlan, path: Path, seed: int) -> int:
    """docs/protocol.md "Files" judge-outputs JSONL of raw replies: every human comparison in 2 orders × 2
    repeats, every deployment comparison in primary order, repeat 0, from every judge of
    :data:`JUDGE_PROFILES`. ``family`` (an extra key the importer reads) names the vendor family of
    a judge it has to create. Returns the number of lines."""
    lines = []
    for comparison in plan.comparisons:
        evidence = plan_evidence(plan, comparison.page, comparison.a, comparison.b)
        calls = [("primary", 0), ("swapped", 0), ("primary", 1), ("swapped", 1)] if comparison.set == "human" else [("primary", 0)]
        for judge in JUDGE_PROFILES:
            for order, repeat in calls:
                rng = call_rng(seed, "judge", judge.name, comparison.id, order, repeat)
                raw = judge_reply(profile=judge, evidence=evidence, order=order, rng=rng)
                lines.append(json.dumps({"comparison": comparison.id, "judge": judge.name, "order": order,
                                         "repeat": repeat, "raw": raw, "family": judge.family}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)
