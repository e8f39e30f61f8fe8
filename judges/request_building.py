"""Building one judge request from the database (docs/protocol.md "Judges and calibration" (Judge request)).

Three images in order REFERENCE, CANDIDATE A, CANDIDATE B — for order ``swapped`` canonical B is
sent as "CANDIDATE A" and canonical A as "CANDIDATE B" — the neutralized variants when
``study.neutralize_media``; the study's prompt template (or the default) with the ``ACTIVE_AXES``
array. Nothing that names a system (name, external id, candidate id) enters the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation.errors import ArbiterError
from annotation.media import read_media
from annotation.models import Axis, Comparison, StoredImage
from judges.image_limits import preset_for
from judges.images import (
    ImageTooLarge,
    PreparedImage,
    PreparedImageCache,
    prepare_image,
    prepare_images_alike,
)
from judges.models import Judge, Order
from judges.prompts import active_axes_payload, prompt_template_sha256, render_prompt
from judges.providers import Endpoint, JudgeImage, JudgeRequest, encode_body, request_overhead_bytes

_cache = PreparedImageCache()


class RequestNotBuildable(ArbiterError):
    """The comparison cannot be sent (missing image, image too large for the judge)."""


@dataclass(frozen=True)
class BuiltRequest:
    body: bytes
    active_axes: tuple[str, ...]
    image_repairs: list[dict[str, Any]]
    request: JudgeRequest
    prompt_sha256: str = ""


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


def build_judge_request(
    *, judge: Judge, comparison: Comparison, order: str, axes: list[Axis], byte_scale: float = 1.0
) -> BuiltRequest:
    """The request body for one call, and the image repairs it needed."""
    study = comparison.study
    page = comparison.page
    neutralize = bool(study.neutralize_media)
    first, second = (
        (comparison.candidate_a, comparison.candidate_b)
        if order == Order.PRIMARY
        else (comparison.candidate_b, comparison.candidate_a)
    )
    slots = [
        ("REFERENCE", _pick(page.image, page.neutralized_image, neutralize)),
        ("CANDIDATE A", _pick(first.image, first.neutralized_image, neutralize)),
        ("CANDIDATE B", _pick(second.image, second.neutralized_image, neutralize)),
    ]
    for label, stored in slots:
        if stored is None:
            raise RequestNotBuildable(f"{label} has no image (page or candidate not rendered)")

    active = page.active_axis_ids(axes)
    prompt = render_prompt(study.judge_prompt, active_axes_payload(axes, page.targets, active))
    preset = preset_for(judge.provider)
    max_edge = judge.max_image_edge or (preset.max_edge if preset else None)
    max_bytes = judge.max_image_bytes or (preset.raw_image_bytes() if preset else None)
    max_request = judge.max_request_bytes or (preset.max_request_bytes if preset else None)
    if max_request:
        skeleton = JudgeRequest(prompt, tuple(JudgeImage(label, "image/jpeg", b"") for label, _ in slots))
        overhead = request_overhead_bytes(judge.provider, skeleton, model=judge.model, active_axes=active)
        # base64 turns 3 bytes into 4; the three images share what the prompt leaves.
        budget = int((max_request - overhead) / 3 * 3 / 4 * byte_scale)
        if budget < 1024:
            raise RequestNotBuildable(f"max_request_bytes {max_request:,} leaves no room for three images")
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
    body = encode_body(endpoint_of(judge), request, active_axes=active)
    return BuiltRequest(
        body=body, active_axes=tuple(active), image_repairs=repairs, request=request,
        prompt_sha256=prompt_template_sha256(study.judge_prompt),
    )

