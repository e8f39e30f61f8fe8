"""What a study kind asks a judge (docs/protocol.md "Judge requests by study kind"; decision 0077).

Each kind's design declares one :class:`JudgeRequestPlan` (``StudyDesign.judge_plan``): the unit a
call is about, the labelled image slots in the order the judge sees them, the form of the reply,
the orders a call is made in and the kind's default prompt; and, per unit, the blocks its prompt
carries and the ids the reply must answer (``StudyDesign.judge_unit_context``). ``judges`` builds,
sends, validates and stores calls from these alone and never tests a kind's name, so a new kind
that reuses a slot source and a reply form needs no judge code.

The vocabularies ``judges`` understands:

- ``unit``: ``comparison`` (page + canonical A + canonical B) or ``candidate`` (one rendering);
- slot sources: ``reference`` (the comparison's page image), ``first`` / ``second`` (the candidate
  shown as A / as B in this call's order: canonical A first in ``primary``, canonical B first in
  ``swapped``), ``item`` (the candidate itself);
- reply forms: ``verdict`` (winner, confidence, reason and the active axes' scores, docs/protocol.md
  "Judges and calibration"), ``answers`` (yes / no / unclear with evidence per question,
  docs/protocol.md "Checklist judges"), ``ratings`` (one score per dimension on the study's scale).

Prompt blocks are written into the template at ``{{NAME}}`` markers, or appended as ``NAME:`` blocks
when the template has no marker (``judges.prompts.render_prompt``). Nothing here names a system: a
checklist's questions are sent as ``Q1``, ``Q2``, … whatever the predicates' ids are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

UNIT_COMPARISON = "comparison"
UNIT_CANDIDATE = "candidate"
SLOT_SOURCES = ("reference", "first", "second", "item")
REPLY_VERDICT = "verdict"
REPLY_CHECKLIST = "answers"  # yes / no / unclear with evidence per question
REPLY_RATINGS = "ratings"
BOTH_ORDERS = ("primary", "swapped")
ONE_ORDER = ("primary",)


@dataclass(frozen=True)
class JudgeRequestPlan:
    """The judge request a study kind builds (decision 0077).

    ``refusal``, when not empty, says why no judge request can be built for this study (the kind,
    or the study's settings, give a judge nothing to answer); run_judges stops with it.
    """

    unit: str
    slots: tuple[tuple[str, str], ...]  # (label shown before the image, slot source)
    reply: str
    orders: tuple[str, ...]
    default_prompt: str
    refusal: str = ""


@dataclass(frozen=True)
class JudgeUnitContext:
    """One unit's part of a request: prompt blocks (name → JSON value or text) and the ids the reply
    answers in order; ``keys`` says what each id stands for (a predicate's pk for a checklist)."""

    blocks: dict[str, Any] = field(default_factory=dict)
    ids: tuple[str, ...] = ()
    keys: tuple[int, ...] = ()
    scale: tuple[int, int] | None = None  # a ratings reply's allowed range


NOT_JUDGED = JudgeRequestPlan(
    unit="",
    slots=(),
    reply="",
    orders=(),
    default_prompt="",
    refusal="this study kind declares no judge request",
)

# The kinds' default prompts. A study's own ``judge_prompt`` replaces them; the blocks are filled in
# either way.

PAIRWISE_PROMPT = """\
You compare two images made for the same brief. They come in this order:

1. CANDIDATE A: one rendering made for the brief.
2. CANDIDATE B: another rendering made for the same brief.

There is no reference image: judge each rendering by how well it does what the brief asks, as a
careful reader of the brief would. Look at what the images show, not at how long or how polished
they are; ignore which one comes first.

BRIEF:
{{BRIEF}}

If ACTIVE_AXES lists axes, score each of them, in the order given, as an integer:
  +2  A is much better on this axis    +1  A is somewhat better    0  no real difference
  -1  B is somewhat better             -2  B is much better

ACTIVE_AXES:
{{ACTIVE_AXES}}

Then give the overall winner ("A", "B" or "TIE" when neither does the brief better), your confidence
as an integer from 1 (a guess) to 5 (certain), and a one- or two-sentence reason.

Answer with one JSON object and nothing else (no prose, no Markdown), exactly of this shape:
{"winner": "A", "confidence": 4, "reason": "...", "axes": [{"id": "AXIS_ID", "score": 1}]}
The "axes" list holds every ACTIVE_AXES id exactly once, in the same order (an empty list when there
are none).
"""

CHECKLIST_PROMPT = """\
You check one rendered image against a fixed list of yes/no questions. You see a single image,
labelled IMAGE; there is no reference to compare it with.

For every question of QUESTIONS decide from the image alone:
  "yes"      the image shows that the question holds;
  "no"       the image shows that it does not hold;
  "unclear"  the image does not settle it: the element cannot be found or read, it is cut off or
             too small, or the question cannot be resolved at this size.
Every "yes" and every "no" needs evidence: name what you see that decides it and where it is on the
image, in a few words. Do not guess. If you cannot point at visible evidence, answer "unclear";
it is scored as a failure, not as a pass. For a question about how two elements sit relative to each
other, find both first; elements that touch, overlap, cross or are clipped do not satisfy it.

BRIEF (what the image was made for; may be empty):
{{BRIEF}}

QUESTIONS:
{{QUESTIONS}}

Answer with one JSON object and nothing else (no prose, no Markdown), exactly of this shape:
{"answers": [{"id": "Q1", "answer": "yes", "evidence": "..."}]}
"answers" holds every question id exactly once, in the order given; "answer" is "yes", "no" or
"unclear"; "evidence" is a short string.
"""

RATING_PROMPT = """\
You rate one rendered image, labelled IMAGE, on each dimension of DIMENSIONS. There is no reference
to compare it with.

BRIEF (what the image was made for; may be empty):
{{BRIEF}}

Rate every dimension with an integer of SCALE (the lowest value is the worst, the highest the best),
judging only what the image shows.

DIMENSIONS:
{{DIMENSIONS}}

SCALE:
{{SCALE}}

Answer with one JSON object and nothing else (no prose, no Markdown), exactly of this shape:
{"ratings": [{"id": "DIMENSION", "score": 3}], "reason": "..."}
"ratings" holds every dimension exactly once, in the order given.
"""
