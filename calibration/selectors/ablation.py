"""Reads that assemble the judge-subset ablation inputs of a study (adapter in front of the pure
``stats.judge_ablation.judge_ablation``; issue 16 part 1, paper B.4).

- the human table and the judges of the docs/protocol.md "Judges and calibration" calibration
(``calibration_inputs``: every judge
  with a valid output on the human set and no call still running; dropped judges with why);
- per judge and human-set comparison: the overall evidence (mean canonical vote of its valid
  outputs) and the axis evidence (mean of its valid outputs' mean axis score mapped to [0, 1]);
- the cost per comparison per judge: from the usage its outputs recorded and its prices (US
  dollars) when every judge has both; else recorded tokens when every judge has usage; else an
  estimate from the image sizes (:func:`estimated_image_tokens`, documented there).

No writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from annotation.models import Comparison, ComparisonSet, Study
from calibration.selectors.calibration import calibration_inputs
from judges.models import JudgeOutput, OutputStatus
from judges.selectors import judge_progress

if TYPE_CHECKING:
    import numpy as np

#: The cost estimate's unit, when no judge usage was recorded (imported outputs, say).
COST_UNIT = "estimated input image tokens per comparison"
RECORDED_COST_UNIT = "US dollars per comparison"
RECORDED_TOKENS_UNIT = "recorded tokens (input + output) per comparison"


@dataclass(frozen=True, eq=False)
class AblationInputs:
    judges: tuple[str, ...]
    comparisons: tuple[str, ...]
    overall: np.ndarray  # (n, J)
    axis: np.ndarray  # (n, J), NaN without scored axes
    h: np.ndarray
    valid_votes: np.ndarray
    blocks: tuple[str, ...]
    pages: tuple[str, ...]
    costs: tuple[float, ...]
    cost_method: Mapping[str, object]
    dropped_judges: tuple[Mapping[str, object], ...]


def estimated_image_tokens(width: int, height: int) -> int:
    """Input tokens of one image under the published OpenAI high-detail rule (an estimate).

    The image is scaled (never up) to fit 2048 × 2048, then so that its short side is at most 768;
    it costs ``85 + 170 × tiles`` with ``tiles = ⌈w / 512⌉ · ⌈h / 512⌉``. Other providers count
    differently; the figure only ranks subsets by what they send.
    """
    w, h = float(width), float(height)
    if w <= 0 or h <= 0:
        return 0
    scale = min(1.0, 2048 / max(w, h))
    w, h = w * scale, h * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _request_tokens(*, study: Study, comparisons: list[str]) -> float:
    """Mean estimated image tokens of one judge request (reference, candidate A, candidate B)."""
    import numpy as np

    rows = Comparison.objects.filter(study=study, external_id__in=comparisons).values_list(
        "page__image__width",
        "page__image__height",
        "candidate_a__image__width",
        "candidate_a__image__height",
        "candidate_b__image__width",
        "candidate_b__image__height",
    )
    totals = [
        sum(estimated_image_tokens(w or 0, h or 0) for w, h in ((r[0], r[1]), (r[2], r[3]), (r[4], r[5])))
        for r in rows
    ]
    return float(np.mean(totals)) if totals else 0.0


def _recorded_costs(
    *, study: Study, comparisons: list[str], judges: list[str]
) -> tuple[tuple[float, ...] | None, dict[str, object]]:
    """Each judge's cost per human-set comparison from what its calls recorded (issue 14 usage).

    Dollars when every judge has usage and prices; tokens when every judge has usage but some
    price is missing; ``(None, {})`` when some judge recorded no usage.
    """
    progress = {p.judge: p for p in judge_progress(study=study, comparisons=comparisons, judge_names=judges)}
    rows = [progress.get(j) for j in judges]
    if not judges or any(r is None or r.input_tokens is None or not r.comparisons for r in rows):
        return None, {}
    assert all(r is not None for r in rows)
    dollars = [r.cost_per_comparison for r in rows if r is not None]
    if all(d is not None for d in dollars):
        return tuple(float(d) for d in dollars if d is not None), {
            "source": "recorded usage × the judges' prices",
            "unit": RECORDED_COST_UNIT,
            "rule": "per judge: the input and output tokens its calls on the human set reported (every attempt, "
            "batch calls at the batch discount) at its price per million tokens, over the comparisons it judged",
            "per_judge": {r.judge: r.as_dict() for r in rows if r is not None},
            "note": "cached input tokens are billed as input (an upper bound)",
        }
    return tuple(
        float(((r.input_tokens or 0) + (r.output_tokens or 0)) / r.comparisons) for r in rows if r is not None
    ), {
        "source": "recorded usage (some judge has no price)",
        "unit": RECORDED_TOKENS_UNIT,
        "rule": "per judge: the input and output tokens its calls on the human set reported, over the comparisons "
        "it judged",
        "per_judge": {r.judge: r.as_dict() for r in rows if r is not None},
        "note": "set prices with add_judge NAME --update to compare in dollars",
    }


def ablation_inputs(*, study: Study) -> AblationInputs:
    """Evidence, human reference, blocks, pages and estimated costs of ``study``'s human set."""
    import numpy as np
    import pandas as pd

    from stats.preference import VOTE_VALUE

    base = calibration_inputs(study=study)
    human = base.human[base.human["n_valid"] > 0].reset_index(drop=True)
    comparisons = [str(c) for c in human["comparison"]]
    judges = list(base.judges)
    index = {c: i for i, c in enumerate(comparisons)}
    column = {j: k for k, j in enumerate(judges)}
    outputs = JudgeOutput.objects.filter(
        comparison__study=study, comparison__set=ComparisonSet.HUMAN, judge__name__in=judges
    ).values_list("comparison__external_id", "judge__name", "status", "winner", "axis_scores")
    frame = pd.DataFrame.from_records(
        list(outputs), columns=["comparison", "judge", "status", "winner", "axes"]
    )
    n, n_judges = len(comparisons), len(judges)
    vote_sum = np.zeros((n, n_judges))
    vote_n = np.zeros((n, n_judges))
    axis_sum = np.zeros((n, n_judges))
    axis_n = np.zeros((n, n_judges))
    calls = np.zeros(n_judges)
    for c, j, status, winner, axes in frame.itertuples(index=False):
        if c not in index:
            continue
        i, k = index[c], column[j]
        calls[k] += 1
        if status != OutputStatus.VALID or winner not in VOTE_VALUE:
            continue
        vote_sum[i, k] += VOTE_VALUE[winner]
        vote_n[i, k] += 1
        scores = [float(a["score"]) for a in (axes or []) if isinstance(a, dict) and "score" in a]
        if scores:
            axis_sum[i, k] += (np.mean(scores) + 2.0) / 4.0
            axis_n[i, k] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        overall = np.where(vote_n > 0, vote_sum / np.where(vote_n > 0, vote_n, 1), np.nan)
        axis = np.where(axis_n > 0, axis_sum / np.where(axis_n > 0, axis_n, 1), np.nan)
    tokens = _request_tokens(study=study, comparisons=comparisons)
    calls_per_comparison = calls / n if n else calls
    costs, cost_method = _recorded_costs(study=study, comparisons=comparisons, judges=judges)
    if costs is None:
        costs = tuple(float(tokens * c) for c in calls_per_comparison)
        cost_method = {
            "source": "estimate from image sizes",
            "unit": COST_UNIT,
            "rule": "per call: reference, candidate A and candidate B images, each 85 + 170 × 512-px tiles after "
            "scaling to fit 2048 × 2048 and a short side of at most 768 (OpenAI high detail); "
            "per comparison: that × the judge's calls per human-set comparison (orders × repeats)",
            "tokens_per_call": tokens,
            "calls_per_comparison": {j: float(c) for j, c in zip(judges, calls_per_comparison, strict=True)},
            "note": "some judge's outputs record no usage (imported outputs, say); text tokens of the prompt are "
            "left out",
        }
    return AblationInputs(
        judges=tuple(judges),
        comparisons=tuple(comparisons),
        overall=overall,
        axis=axis,
        h=human["h"].to_numpy(dtype=float),
        valid_votes=human["n_valid"].to_numpy(dtype=float),
        blocks=tuple(str(b) for b in human["block"]),
        pages=tuple(str(p) for p in human["page"]),
        costs=costs,
        cost_method=cost_method,
        dropped_judges=base.dropped_judges,
    )
