"""What the researcher's objective pages show (docs/protocol.md "Objective scores beside the
rankings", "The per-page view of the objective scores"): the scored candidates worst first, and one
candidate's scores with its matched blocks drawn on its page's ground truth and on its render.
Researchers only (the views check the study is theirs); nothing here is served to a rater."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from django.http import Http404

from annotation.models import Candidate, ObjectiveScore, Study

SORTS = {
    "s_layout": ("S_layout", False),  # (label, higher is worse): worst first
    "d_text": ("D_text", True),
    "teds": ("TEDS", False),
    "teds_s": ("TEDS-S", False),
}
DEFAULT_SORT = "s_layout"


def objective_scores_sorted(*, study: Study, by: str) -> QuerySet[ObjectiveScore]:
    """The study's kept scores, worst first by ``by`` (one of :data:`SORTS`; pages without a truth
    table last when sorting by a table score)."""
    from django.db.models import F, FloatField
    from django.db.models.fields.json import KT
    from django.db.models.functions import Cast

    if by not in SORTS:
        by = DEFAULT_SORT
    value = Cast(KT(f"score__{by}"), FloatField())
    order = value.desc(nulls_last=True) if SORTS[by][1] else value.asc(nulls_last=True)
    return (
        ObjectiveScore.objects.filter(candidate__page__study=study)
        .annotate(sort_value=value)
        .select_related("candidate__page", "candidate__system")
        .order_by(order, F("candidate__page__position"), F("candidate__system__position"))
    )


@dataclass(frozen=True)
class DrawnBox:
    """One block drawn on a pane: its box in the pane's page units, its type, its colour (the same
    for both sides of a match), and what it is matched to."""

    x: float
    y: float
    w: float
    h: float
    type: str
    colour: str
    label: str
    matched: bool


@dataclass(frozen=True)
class Pane:
    width: float
    height: float
    image_url: str | None
    boxes: tuple[DrawnBox, ...]


@dataclass(frozen=True)
class ObjectivePageView:
    candidate: Candidate
    score: dict[str, Any]
    truth: Pane
    prediction: Pane
    matches: tuple[dict[str, Any], ...]
    unmatched_truth: int
    unmatched_prediction: int


UNMATCHED = "#d62728"


def _colour(i: int) -> str:
    """A colour per match, far from its neighbours' (golden-angle hues), never the unmatched red."""
    return f"hsl({(137.5 * i + 200) % 360:.0f}, 70%, 40%)"


def _boxes(page: dict[str, Any], side: dict[int, tuple[int, str]]) -> tuple[DrawnBox, ...]:
    out = []
    for i, block in enumerate(page.get("blocks", [])):
        x0, y0, x1, y1 = block["bbox"]
        match = side.get(i)
        out.append(
            DrawnBox(
                x=x0,
                y=y0,
                w=x1 - x0,
                h=y1 - y0,
                type=block["type"],
                colour=match[1] if match else UNMATCHED,
                label=f"{block['type']} {i}: " + (f"match {match[0] + 1}" if match else "unmatched"),
                matched=match is not None,
            )
        )
    return tuple(out)


def objective_page_view(
    *, study: Study, candidate_id: int, truth_url: str | None, prediction_url: str | None
) -> ObjectivePageView:
    """One scored candidate of ``study`` (Http404 otherwise) with its boxes to draw."""
    row = (
        ObjectiveScore.objects.filter(candidate_id=candidate_id, candidate__page__study=study)
        .select_related("candidate__page__truth", "candidate__system", "candidate__objective_blocks")
        .first()
    )
    if row is None:
        raise Http404("no objective score for this candidate")
    candidate = row.candidate
    truth = candidate.page.truth.blocks
    blocks_row = getattr(candidate, "objective_blocks", None)
    predicted = blocks_row.blocks if blocks_row is not None else {"page": truth["page"], "blocks": []}
    on_truth: dict[int, tuple[int, str]] = {}
    on_prediction: dict[int, tuple[int, str]] = {}
    matches = []
    # A text group with one empty side is a deletion or an insertion: its blocks are unmatched.
    paired = [m for m in row.score.get("matches") or [] if m.get("truth") and m.get("pred")]
    for k, match in enumerate(paired):
        colour = _colour(k)
        for i in match.get("truth", []):
            on_truth[int(i)] = (k, colour)
        for j in match.get("pred", []):
            on_prediction[int(j)] = (k, colour)
        matches.append({**match, "number": k + 1, "colour": colour})
    n_truth = len(truth.get("blocks", []))
    n_pred = len(predicted.get("blocks", []))
    return ObjectivePageView(
        candidate=candidate,
        score=row.score,
        truth=Pane(truth["page"]["width"], truth["page"]["height"], truth_url, _boxes(truth, on_truth)),
        prediction=Pane(
            predicted["page"]["width"],
            predicted["page"]["height"],
            prediction_url if candidate.rendered else None,
            _boxes(predicted, on_prediction),
        ),
        matches=tuple(matches),
        unmatched_truth=n_truth - len(on_truth),
        unmatched_prediction=n_pred - len(on_prediction),
    )
