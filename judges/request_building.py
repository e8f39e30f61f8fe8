"""Building one judge request from the database (docs/protocol.md "Judges and calibration" (Judge request),
"Judge requests by study kind").

What is sent is what the study kind's design declares (``annotation.kinds.judging``; decision 0077):
its labelled images in order — for the reference protocol REFERENCE, CANDIDATE A, CANDIDATE B, where
for order ``swapped`` canonical B is sent as "CANDIDATE A" and canonical A as "CANDIDATE B"; for a
checklist one IMAGE — the neutralized variants when ``study.neutralize_media``; the study's prompt
template (or the kind's default) with its blocks (``ACTIVE_AXES`` for a verdict, ``BRIEF``,
``QUESTIONS``, …), and the reply contract (``judges.replies``). Nothing that names a system (name,
external id, candidate id, predicate id) enters the request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from annotation.errors import ArbiterError
from annotation.kinds import design_of
from annotation.kinds.judging import REPLY_VERDICT, UNIT_CANDIDATE, UNIT_COMPARISON
from annotation.media import read_media
from annotation.models import Axis, Candidate, Comparison, StoredImage
from judges.image_limits import preset_for
from judges.images import (
    ImageTooLarge,
    PreparedImage,
    PreparedImageCache,
    prepare_image,
    prepare_images_alike,
)
from judges.models import Judge, JudgeOutput, Order
from judges.prompts import active_axes_payload, prompt_template_sha256, render_blocks, render_prompt
from judges.providers import Endpoint, JudgeImage, JudgeRequest, encode_body, request_overhead_bytes
from judges.replies import ReplyContract

_cache = PreparedImageCache()


class RequestNotBuildable(ArbiterError):
    """The comparison cannot be sent (missing image, image too large for the judge)."""


@dataclass(frozen=True)
class BuiltRequest:
    body: bytes
    active_axes: tuple[str, ...]  # the ids the reply answers: active axes, question ids, dimensions
    image_repairs: list[dict[str, Any]]
    request: JudgeRequest
    prompt_sha256: str = ""
    contract: ReplyContract = field(default_factory=ReplyContract)
    keys: tuple[int, ...] = ()  # what each id stands for (a checklist question's predicate pk)


def endpoint_of(judge: Judge) -> Endpoint:
    return Endpoint(
        provider=judge.provider,
        base_url=judge.base_url,
        model=judge.model,
        api_key_env=judge.api_key_env,
        timeout=float(judge.timeout_seconds),
        concurrency=int(judge.concurrency),
        max_tokens=int(judge.max_tokens),
        temperature=judge.temperature,
        name=judge.name,
        seed=judge.seed,
        send_temperature=bool(judge.send_temperature),
        token_param=judge.token_param or "auto",
        reasoning_effort=judge.reasoning_effort or "",
        structured_output=bool(judge.structured_output),
        api_version=judge.api_version or "",
    )


def _pick(image: StoredImage | None, neutral: StoredImage | None, neutralize: bool) -> StoredImage | None:
    return (neutral or image) if neutralize else image


def _stored_png(stored: StoredImage) -> bytes:
    try:
        return read_media(str(stored.file.name))  # MediaUnavailable: the call is released, tried again later
    except OSError as exc:
        raise RequestNotBuildable(f"image {stored.sha256[:12]} cannot be read ({exc.strerror})") from None


def _prepared(stored: StoredImage, *, max_edge: int | None, max_bytes: int | None) -> PreparedImage:
    def prepare() -> PreparedImage:
        return prepare_image(_stored_png(stored), stored.width, stored.height, max_edge=max_edge, max_bytes=max_bytes)

    return _cache.get_or_prepare((stored.sha256, max_edge, max_bytes), prepare)


def _prepared_alike(
    stored_images: list[StoredImage], each: list[PreparedImage], *, max_edge: int | None, max_bytes: int | None
) -> list[PreparedImage]:
    """:func:`prepare_images_alike` once per set of images and limits, whatever the order.

    The calls of one comparison (both orders, every repeat) send the same three images; the repair
    does not depend on their order (one scale and one format for all), so it is computed once in
    the order of their hashes and handed back in the order asked.
    """
    order = sorted(range(len(stored_images)), key=lambda i: stored_images[i].sha256)

    def prepare() -> tuple[PreparedImage, ...]:
        sources = [(_stored_png(stored_images[i]), stored_images[i].width, stored_images[i].height) for i in order]
        return tuple(prepare_images_alike(sources, [each[i] for i in order], max_edge=max_edge, max_bytes=max_bytes))

    key = ("alike", tuple(stored_images[i].sha256 for i in order), max_edge, max_bytes)
    repaired = _cache.get_or_prepare(key, prepare)
    out: list[PreparedImage] = [each[0]] * len(order)
    for position, i in enumerate(order):
        out[i] = repaired[position]
    return out


def load_comparison(comparison_id: int) -> Comparison:
    return Comparison.objects.select_related(
        "study",
        "page__image",
        "page__neutralized_image",
        "candidate_a__image",
        "candidate_a__neutralized_image",
        "candidate_b__image",
        "candidate_b__neutralized_image",
    ).get(pk=comparison_id)


def study_axes(study_id: int) -> list[Axis]:
    return list(Axis.objects.filter(study_id=study_id).order_by("position"))


def load_candidate(candidate_id: int) -> Candidate:
    return Candidate.objects.select_related("page__study", "image", "neutralized_image").get(pk=candidate_id)


def load_unit(output: JudgeOutput) -> Comparison | Candidate:
    """The comparison or the rendering an output is about."""
    if output.comparison_id is not None:
        return load_comparison(output.comparison_id)
    assert output.candidate_id is not None
    return load_candidate(output.candidate_id)


def unit_study_id(unit: Comparison | Candidate) -> int:
    return unit.study_id if isinstance(unit, Comparison) else unit.page.study_id


def _slot_image(unit: Comparison | Candidate, source: str, order: str, neutralize: bool) -> StoredImage | None:
    """The image a slot source names (annotation.kinds.judging) for this unit and order."""
    if isinstance(unit, Candidate):
        if source != "item":
            raise RequestNotBuildable(f"a call about one rendering has no {source!r} image")
        return _pick(unit.image, unit.neutralized_image, neutralize)
    first, second = (
        (unit.candidate_a, unit.candidate_b) if order == Order.PRIMARY else (unit.candidate_b, unit.candidate_a)
    )
    holders = {"reference": unit.page, "first": first, "second": second}
    if source not in holders:
        raise RequestNotBuildable(f"a call about a comparison has no {source!r} image")
    holder: Any = holders[source]
    return _pick(holder.image, holder.neutralized_image, neutralize)


@dataclass(frozen=True)
class AskedOf:
    """What a call about one unit asks, images aside: the study, its kind's plan, the prompt, the reply
    contract, what each reply id stands for and the template's fingerprint."""

    study: Any
    plan: Any
    prompt: str
    contract: ReplyContract
    keys: tuple[int, ...]
    prompt_sha256: str


def request_contract(*, unit: Comparison | Candidate, axes: list[Axis] | None = None) -> AskedOf:
    """The study kind's judge plan applied to ``unit`` (decision 0077), without reading any image:
    a stored batch result is validated against it."""
    if isinstance(unit, Comparison):
        study, page, wanted = unit.study, unit.page, UNIT_COMPARISON
    else:
        study, page, wanted = unit.page.study, unit.page, UNIT_CANDIDATE
    design = design_of(study)
    plan = design.judge_plan(study)
    if plan.refusal:
        raise RequestNotBuildable(f"study {study.slug}: {plan.refusal}")
    if plan.unit != wanted:
        raise RequestNotBuildable(f"study {study.slug}'s judge calls are about a {plan.unit}, not a {wanted}")
    context = design.judge_unit_context(study, unit)
    if plan.reply == REPLY_VERDICT:
        axes = axes if axes is not None else study_axes(study.pk)
        active = page.active_axis_ids(axes)
        prompt = render_prompt(
            study.judge_prompt, active_axes_payload(axes, page.targets, active), context.blocks, plan.default_prompt
        )
        contract = ReplyContract(REPLY_VERDICT, tuple(active))
    else:
        if not context.ids:
            raise RequestNotBuildable("the rendering has nothing to answer (no questions or dimensions)")
        prompt = render_blocks(study.judge_prompt, context.blocks, plan.default_prompt)
        contract = ReplyContract(plan.reply, context.ids, context.scale)
    return AskedOf(study=study, plan=plan, prompt=prompt, contract=contract, keys=context.keys,
                   prompt_sha256=prompt_template_sha256(study.judge_prompt, plan.default_prompt))


def build_judge_request(
    *,
    judge: Judge,
    comparison: Comparison | None = None,
    order: str,
    axes: list[Axis] | None = None,
    byte_scale: float = 1.0,
    candidate: Candidate | None = None,
) -> BuiltRequest:
    """The request body for one call about ``comparison`` or ``candidate``, and the image repairs it
    needed: the images, prompt and reply of the study kind's judge plan (decision 0077)."""
    unit: Comparison | Candidate
    if comparison is not None:
        unit = comparison
    elif candidate is not None:
        unit = candidate
    else:
        raise RequestNotBuildable("a judge call needs a comparison or a rendering")
    asked = request_contract(unit=unit, axes=axes)
    study = asked.study
    neutralize = bool(study.neutralize_media)
    slots = [(label, _slot_image(unit, source, order, neutralize)) for label, source in asked.plan.slots]
    for label, stored in slots:
        if stored is None:
            raise RequestNotBuildable(f"{label} has no image (page or candidate not rendered)")
    prompt, contract, active = asked.prompt, asked.contract, list(asked.contract.ids)
    preset = preset_for(judge.provider)
    max_edge = judge.max_image_edge or (preset.max_edge if preset else None)
    max_bytes = judge.max_image_bytes or (preset.raw_image_bytes() if preset else None)
    max_request = judge.max_request_bytes or (preset.max_request_bytes if preset else None)
    if max_request:
        skeleton = JudgeRequest(prompt, tuple(JudgeImage(label, "image/jpeg", b"") for label, _ in slots))
        overhead = request_overhead_bytes(
            judge.provider, skeleton, model=judge.model, active_axes=active, contract=contract
        )
        # base64 turns 3 bytes into 4; the images share what the prompt leaves.
        budget = int((max_request - overhead) / len(slots) * 3 / 4 * byte_scale)
        if budget < 1024:
            raise RequestNotBuildable(f"max_request_bytes {max_request:,} leaves no room for {len(slots)} images")
        max_bytes = min(max_bytes, budget) if max_bytes else budget
    elif max_bytes and byte_scale < 1.0:
        max_bytes = int(max_bytes * byte_scale)
    if byte_scale < 1.0:
        # The provider refused an image as too large (413, or a 400 naming the image) although it
        # was within every configured limit: shrink below what was sent.
        largest = max(int(stored.size_bytes) for _, stored in slots if stored is not None)
        max_bytes = min(max_bytes or largest, int(largest * byte_scale))

    images: list[JudgeImage] = []
    repairs: list[dict[str, Any]] = []
    each: list[PreparedImage] = []
    for label, stored in slots:
        assert stored is not None
        try:
            each.append(_prepared(stored, max_edge=max_edge, max_bytes=max_bytes))
        except ImageTooLarge as exc:
            raise RequestNotBuildable(f"{label}: {exc}") from None
    if any(p.repair for p in each):
        # One image over a limit: all three are repaired alike (blinding, SECURITY.md row 16).
        stored_images = [stored for _, stored in slots if stored is not None]
        try:
            each = _prepared_alike(stored_images, each, max_edge=max_edge, max_bytes=max_bytes)
        except ImageTooLarge as exc:
            raise RequestNotBuildable(str(exc)) from None
    for (label, _), prepared in zip(slots, each, strict=True):
        images.append(JudgeImage(label, prepared.mime, prepared.data, prepared.encoded))
        if prepared.repair:
            repairs.append({"image": label, **prepared.repair})
    request = JudgeRequest(prompt, tuple(images))
    body = encode_body(endpoint_of(judge), request, active_axes=active, contract=contract)
    return BuiltRequest(
        body=body, active_axes=tuple(active), image_repairs=repairs, request=request,
        prompt_sha256=asked.prompt_sha256, contract=contract, keys=asked.keys,
    )

