"""The built-in demo judge (provider ``demo``): answers on this machine, no network (issue 17).

It exists so a newcomer can press "Run judges" on the demo study and watch the calls complete.
It is an adapter like the others (registered in ``judges.providers.ADAPTERS``) whose
:meth:`Demo.answer` replaces the HTTP exchange: ``judges.providers.call`` hands it the request
body exactly as a remote model would get it (the Chat Completions body of
:class:`~judges.providers.openai_chat.OpenAIChat`, which it inherits), recognizes the two candidate images by their content
hash (stored images are named by it), and answers from the demo's recorded ground truth
(``study.options["demo"]["candidate_quality"]``, written by ``make_demo_study``): the candidate
of higher latent quality wins, a small difference is a tie. The reply follows
docs/protocol.md "Judges and calibration" and goes through the same validation as any other judge's.

It answers two other requests (docs/protocol.md "The built-in local judge", decision 0077). A checklist
call (one image and a ``QUESTIONS`` array, docs/protocol.md "Checklist judges") is answered question by
question for the rendering whose image it got: from the demo's recorded truth where
``make_demo_study --kind checklist`` wrote one (``study.options["demo"]["predicate_truth"]``), else
from what the renderer exported of the page (``CandidateBlocks``: its blocks' text, types and boxes
and its live charts, kept for an HTML output) by the rule of :mod:`judges.page_questions` (decision
0084). The request carries nothing new: the rendering is found, here, by its image's hash. A
rendering without a kept page (an image output) gets ``unclear`` on every question, with evidence
saying why. A call with two images
(a pairwise study without a reference) is refused with its reason: the local judge's only measure is
likeness to a reference. A call with one image and no questions (ratings) is refused likewise.

On any other three-image study (a candidate the ground truth does not know) it is a real, free baseline: it
compares each candidate with the reference by structural similarity (``stats.image_similarity``,
docs/protocol.md "The built-in local judge") on greyscale copies scaled to one width, and the
candidate more like the reference wins; a difference under ``SSIM_TIE_BAND`` is a tie. Calibration
then weighs it like any judge. A request it cannot read or without three images is refused for
good (``ProviderRefused``) with its reason, so the call is stored as failed, not retried.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.db.models import Q

from annotation.models import Candidate
from judges.providers.base import Endpoint, ProviderRefused, Reply
from judges.providers.openai_chat import OpenAIChat

if TYPE_CHECKING:
    import numpy as np

TIE_BAND = 0.15  # |quality difference| below this is a tie
STRONG = 0.6  # above this an axis scores ±2
# The image-similarity answer (docs/protocol.md "The built-in local judge").
SSIM_WIDTH = 160  # every image scaled to this width (aspect kept) before comparing
SSIM_MAX_HEIGHT = 2400  # rows compared at most (a tall page's top 15 widths)
SSIM_TIE_BAND = 0.005  # |SSIM(ref, A) − SSIM(ref, B)| below this is a tie
SSIM_STRONG = 0.05  # above this an axis scores ±2


def demo_reply(body: bytes) -> str:
    """The reply text to one judge request body (docs/protocol.md "Judges and calibration" JSON)."""
    try:
        messages = json.loads(body)["messages"]
        message = next(m["content"] for m in messages if m["role"] == "user")  # after the system message
        prompt = next(p["text"] for p in message if p.get("type") == "text")
        images = [p["image_url"]["url"] for p in message if p.get("type") == "image_url"]
    except (ValueError, KeyError, IndexError, TypeError, StopIteration):
        raise ProviderRefused("the demo judge got a request it cannot read") from None
    questions = _questions(prompt)
    if len(images) == 1 and questions is not None:
        return checklist_reply(images[0], questions)
    if len(images) == 2:
        raise ProviderRefused(
            "the local judge measures each candidate's likeness to a reference image, and a pairwise study "
            "without a reference has none: register a model judge (add_judge) for this study"
        )
    if len(images) == 1:
        raise ProviderRefused("the local judge answers checklist questions only; it does not rate an image")
    if len(images) != 3:
        raise ProviderRefused("the demo judge expects three images (reference, A, B)")
    quality_a, quality_b = (_quality(url) for url in images[1:])
    if quality_a is None or quality_b is None:
        return similarity_reply(images, prompt)
    diff = quality_a - quality_b
    winner = "TIE" if abs(diff) < TIE_BAND else ("A" if diff > 0 else "B")
    sign = 0 if winner == "TIE" else (1 if diff > 0 else -1)
    score = sign * (2 if abs(diff) >= STRONG else 1)
    reply = {
        "winner": winner,
        "confidence": min(5, 1 + int(abs(diff) / 0.25)),
        "reason": {"A": "A is closer to the reference.", "B": "B is closer to the reference.",
                   "TIE": "Both are about as faithful."}[winner],
        "axes": [{"id": axis["id"], "score": score} for axis in _active_axes(prompt)],
    }
    return json.dumps(reply)


def similarity_reply(images: list[str], prompt: str) -> str:
    """The answer by image similarity: the candidate whose SSIM with the reference is higher wins
    (docs/protocol.md "The built-in local judge")."""
    from stats.errors import StatisticsError
    from stats.image_similarity import structural_similarity

    reference, first, second = (_greyscale(url) for url in images)
    try:
        ssim_a = structural_similarity(*_same_height(reference, first))
        ssim_b = structural_similarity(*_same_height(reference, second))
    except StatisticsError as exc:
        raise ProviderRefused(f"the local judge cannot compare these images: {exc}") from None
    diff = ssim_a - ssim_b
    winner = "TIE" if abs(diff) < SSIM_TIE_BAND else ("A" if diff > 0 else "B")
    sign = 0 if winner == "TIE" else (1 if diff > 0 else -1)
    score = sign * (2 if abs(diff) >= SSIM_STRONG else 1)
    return json.dumps(
        {
            "winner": winner,
            "confidence": min(5, 1 + int(abs(diff) / 0.02)),
            "reason": f"Structural similarity with the reference: A {ssim_a:.3f}, B {ssim_b:.3f}.",
            "axes": [{"id": axis["id"], "score": score} for axis in _active_axes(prompt)],
        }
    )


LOCAL_UNCLEAR_EVIDENCE = (
    "the local judge reads no text or elements in an image, and no page text was kept for this rendering "
    "(not rendered from HTML here); it cannot settle this question"
)


def checklist_reply(image_url: str, questions: list[dict[str, Any]]) -> str:
    """The local judge's checklist answer (module docstring): the demo's recorded truth where it has
    one for this rendering's question, else the rule's answer from the kept page, else ``unclear``."""
    from judges.page_questions import answer_question, page_of

    candidate = _candidate_of(image_url)
    truths = _predicate_truths(candidate)
    kept = _kept_page(candidate)
    page = page_of(kept) if kept is not None else None
    answers = []
    for i, question in enumerate(questions):
        truth = truths[i] if i < len(truths) else None
        if truth in ("YES", "NO"):
            answers.append({"id": question["id"], "answer": truth.lower(),
                            "evidence": "the demo's recorded look of this poster"})
        elif page is not None:
            found = answer_question(str(question["question"]), page)
            answers.append({"id": question["id"], "answer": found.answer, "evidence": found.evidence})
        else:
            answers.append({"id": question["id"], "answer": "unclear", "evidence": LOCAL_UNCLEAR_EVIDENCE})
    return json.dumps({"answers": answers})


def _kept_page(candidate: Candidate | None) -> dict[str, Any] | None:
    """The page the renderer exported for this rendering (``CandidateBlocks``), or None."""
    from annotation.models import CandidateBlocks

    if candidate is None:
        return None
    row = CandidateBlocks.objects.filter(candidate=candidate).values_list("blocks", flat=True).first()
    return row if isinstance(row, dict) else None


def _predicate_truths(candidate: Candidate | None) -> list[str | None]:
    """The recorded truth of each question of this rendering, in the order the checklist design
    sends them (position, then id); empty when the study recorded none."""
    from annotation.models import Predicate

    if candidate is None:
        return []
    truth = ((candidate.page.study.options or {}).get("demo") or {}).get("predicate_truth") or {}
    if not isinstance(truth, dict):
        return []
    ids = Predicate.objects.filter(candidate=candidate).order_by("position", "external_id").values_list(
        "external_id", flat=True
    )
    return [truth.get(pid) if isinstance(truth.get(pid), str) else None for pid in ids]


def _questions(prompt: str) -> list[dict[str, Any]] | None:
    """The ``QUESTIONS`` array of a checklist prompt (wherever the template put it), or None."""
    for value in _json_arrays(prompt):
        if value and all(isinstance(q, dict) and set(q) == {"id", "question"} for q in value):
            return value
    return None


def _json_arrays(prompt: str) -> Iterator[list[Any]]:
    """Every JSON array written in the prompt, in order."""
    decoder = json.JSONDecoder()
    start = prompt.find("[")
    while start != -1:
        try:
            value, _end = decoder.raw_decode(prompt, start)
        except ValueError:
            value = None
        if isinstance(value, list):
            yield value
        start = prompt.find("[", start + 1)


def _greyscale(data_url: str) -> np.ndarray:
    """An image of the request as greyscale 0–255, scaled to ``SSIM_WIDTH`` wide, at most
    ``SSIM_MAX_HEIGHT`` rows (the top of a taller page)."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    try:
        data = base64.b64decode(data_url.split(",", 1)[1], validate=True)
        with Image.open(io.BytesIO(data)) as image:
            grey = image.convert("L")
    except (IndexError, ValueError, OSError, UnidentifiedImageError, Image.DecompressionBombError):
        raise ProviderRefused("the local judge got an image it cannot decode") from None
    height = max(1, round(grey.height * SSIM_WIDTH / max(1, grey.width)))
    scaled = grey.resize((SSIM_WIDTH, height), Image.Resampling.BILINEAR)
    return np.asarray(scaled, dtype=np.float64)[:SSIM_MAX_HEIGHT]


def _same_height(reference: np.ndarray, candidate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both images as tall as the taller one, the shorter extended with white (a page's background):
    a candidate much taller or shorter than the reference is less like it."""
    import numpy as np

    rows = max(reference.shape[0], candidate.shape[0])

    def padded(image: np.ndarray) -> np.ndarray:
        return np.pad(image, ((0, rows - image.shape[0]), (0, 0)), constant_values=255.0)

    return padded(reference), padded(candidate)


def _candidate_of(data_url: str) -> Candidate | None:
    """The candidate whose stored image (or its neutralized variant) this request image is."""
    try:
        data = base64.b64decode(data_url.split(",", 1)[1], validate=True)
    except (IndexError, ValueError):
        return None
    digest = hashlib.sha256(data).hexdigest()
    return (
        Candidate.objects.filter(Q(image__sha256=digest) | Q(neutralized_image__sha256=digest))
        .select_related("page__study", "system").order_by("pk").first()
    )


def _quality(data_url: str) -> float | None:
    """The recorded latent quality of the candidate whose image this is (None: unknown)."""
    candidate = _candidate_of(data_url)
    if candidate is None:
        return None
    truth = ((candidate.page.study.options or {}).get("demo") or {}).get("candidate_quality") or {}
    value = truth.get(f"{candidate.page.external_id}/{candidate.system.external_id}")
    return float(value) if isinstance(value, int | float) else None


def _active_axes(prompt: str) -> list[dict[str, Any]]:
    """The ``ACTIVE_AXES`` array in the prompt (wherever the template put it)."""
    for value in _json_arrays(prompt):
        if all(isinstance(a, dict) and "id" in a and "scope" in a for a in value):
            return value
    return []


class Demo(OpenAIChat):
    """Provider ``demo``: the Chat Completions body, answered here instead of being sent."""

    name = "demo"
    default_base_url = ""
    local = True

    def url(self, endpoint: Endpoint) -> str:
        raise ProviderRefused("the demo judge answers locally; it has no URL")

    def answer(self, body: bytes) -> Reply:
        return Reply(text=demo_reply(body), model="demo", finish_reason="stop")
