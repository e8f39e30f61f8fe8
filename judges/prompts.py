"""The judge prompt (docs/protocol.md "Judges and calibration"): the study's template, or the project's
default, plus ``ACTIVE_AXES``.

A template is study data that researchers edit. It may place the axes with the literal marker
``{{ACTIVE_AXES}}``; a template without the marker gets the ``ACTIVE_AXES`` block appended, so a
researcher cannot accidentally send a request without it. No other substitution happens (JSON
examples in a template keep their braces). Nothing here ever names a system.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

ACTIVE_AXES_MARKER = "{{ACTIVE_AXES}}"

DEFAULT_JUDGE_PROMPT = """\
You are an expert evaluator of document-to-HTML conversion. You are given three images, in this order:

1. REFERENCE: the original document page.
2. CANDIDATE A: a rendering of one conversion of that page.
3. CANDIDATE B: a rendering of another conversion of the same page.

Task: decide which candidate reproduces the REFERENCE more faithfully, as a careful reader would
judge it: the same content, in the same regions and reading order, with the same text
presentation and structure. Do not reward a candidate for looking more polished than the
reference; reward fidelity to the reference. Grey boxes with a diagonal cross stand for photos or
charts that were hidden on purpose: treat them as correct placeholders in all three images.
Ignore the order in which the candidates are shown and the length of your own explanation.

Score every axis listed in ACTIVE_AXES, in the order given. Each axis has an id, a scope
("fixed": always scored; "conditional": scored because the page has a target for it), a
description, and the page's targets for that axis (role and bbox_1000 = [x0, y0, x1, y1] in
0..1000 page-normalized coordinates of the REFERENCE). For each axis give an integer score:
  +2  CANDIDATE A is much more faithful on this axis
  +1  CANDIDATE A is somewhat more faithful
   0  no meaningful difference
  -1  CANDIDATE B is somewhat more faithful
  -2  CANDIDATE B is much more faithful

ACTIVE_AXES:
{{ACTIVE_AXES}}

Then give the overall winner ("A", "B" or "TIE" when neither is more faithful), your confidence
as an integer from 1 (a guess) to 5 (certain), and a one- or two-sentence reason.

Answer with one JSON object and nothing else (no prose, no Markdown), exactly of this shape:
{"winner": "A", "confidence": 4, "reason": "...", "axes": [{"id": "AXIS_ID", "score": 1}]}
The "axes" list must contain every ACTIVE_AXES id exactly once, in the same order.
"""


def active_axes_payload(axes: Sequence[Any], targets: Sequence[dict[str, Any]], active_ids: Sequence[str]) -> list[dict[str, Any]]:
    """The ``ACTIVE_AXES`` array (docs/protocol.md "Judges and calibration"): id, scope, description and the
    page's targets for it.

    ``axes`` are objects with ``axis_id``, ``scope`` and ``description`` (the study's axes in
    order); ``targets`` the page's ``[{axis, role, bbox_1000, ...}]``. Targets carry only role and
    bbox_1000.
    """
    by_id = {a.axis_id: a for a in axes}
    payload = []
    for axis_id in active_ids:
        axis = by_id[axis_id]
        payload.append(
            {
                "id": axis.axis_id,
                "scope": str(axis.scope),
                "description": axis.description,
                "targets": [
                    {"role": t.get("role", ""), "bbox_1000": list(t.get("bbox_1000") or [])}
                    for t in targets
                    if t.get("axis") == axis_id
                ],
            }
        )
    return payload


def prompt_template_sha256(template: str, default: str = "") -> str:
    """The fingerprint of the template a call uses (the study's, or the kind's default when it is
    blank; ``default`` empty: the reference protocol's).

    Recorded with every reply, so outputs produced before and after a prompt edit can be told
    apart (the blocks, ``ACTIVE_AXES`` and the others, differ per unit and are not part of it).
    """
    text = template.strip() or default.strip() or DEFAULT_JUDGE_PROMPT
    return hashlib.sha256(text.encode()).hexdigest()


def render_blocks(template: str, blocks: Mapping[str, Any], default: str = "") -> str:
    """The prompt text: the template (or ``default``, or the reference protocol's) with each block in
    place of its ``{{NAME}}`` marker, in one pass (a block's own text is never searched for markers);
    a block whose marker the template lacks is appended as ``NAME:`` and its value. A string block
    is written as it is, any other value as indented JSON."""
    text = template.strip() or default.strip() or DEFAULT_JUDGE_PROMPT
    rendered = {
        name: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
        for name, value in blocks.items()
    }
    if rendered:
        pattern = re.compile("|".join(re.escape("{{" + name + "}}") for name in rendered))
        present = {m.group(0)[2:-2] for m in pattern.finditer(text)}
        text = pattern.sub(lambda m: rendered[m.group(0)[2:-2]], text)
        for name, value in rendered.items():
            if name not in present:
                text = f"{text.rstrip()}\n\n{name}:\n{value}\n"
    return text


def render_prompt(template: str, active_axes: list[dict[str, Any]], blocks: Mapping[str, Any] | None = None,
                  default: str = "") -> str:
    """The verdict prompt: the template (or the default) with the ``ACTIVE_AXES`` JSON in place, and
    any other blocks of the study kind (a pairwise study's ``BRIEF``)."""
    return render_blocks(template, {**(blocks or {}), "ACTIVE_AXES": active_axes}, default)
