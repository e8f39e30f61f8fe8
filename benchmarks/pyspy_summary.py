"""Summarize a py-spy raw (collapsed-stack) profile of the rater hot paths, per request kind.

    .venv/bin/py-spy record --pid <gunicorn master> --subprocesses --format raw -o prof.raw --duration 15
    .venv/bin/python benchmarks/pyspy_summary.py prof.raw [--top 12]

Each sample is assigned to the request it served (by the view function on its stack) and, within
it, to a phase: middleware, session, database (driver and ORM compilation), template rendering,
serializers, the rest of the view. Printed: the share of each kind, and per kind the phases and
the functions with the most inclusive samples.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

KINDS = (  # (kind, a frame that marks it), first match wins
    ("image", "trial_image_view"),
    ("htmx answer", "trial_vote"),
    ("trial page (link)", "study_link"),
    ("api trial", "TrialNextApi.get"),
    ("api vote", "VoteSubmitApi.post"),
)
PHASES = (  # (phase, pattern on a frame), the innermost match wins
    ("render", re.compile(r"django/template/|render_to_string|Template\.render|jinja")),
    ("database", re.compile(r"psycopg/|django/db/backends/|sqlite3|SQLCompiler|django/db/models/sql/")),
    ("orm", re.compile(r"django/db/models/(query|base|manager|fields)")),
    ("session", re.compile(r"django/contrib/sessions/")),
    ("serializer", re.compile(r"rest_framework/(serializers|fields|renderers)")),
    ("file", re.compile(r"FileResponse|file_wrapper|sendfile|wsgi\.py.*close")),
)
FRAME_RE = re.compile(r"^(?P<func>.+?) \((?P<file>[^:()]+):\d+\)$")


def classify(frames: list[str]) -> tuple[str, str]:
    kind = next((k for k, mark in KINDS if any(mark in f for f in frames)), "other")
    if kind == "other":
        return kind, "other"
    phase = "view/other"
    for frame in frames:
        for name, pattern in PHASES:
            if pattern.search(frame):
                phase = name
    if phase == "view/other" and any("middleware" in f.lower() for f in frames[-3:]):
        phase = "middleware"
    return kind, phase


def short(frame: str) -> str:
    m = FRAME_RE.match(frame.strip())
    if not m:
        return frame.strip()[:80]
    file = m["file"].split("site-packages/")[-1]
    return f"{m['func']} ({file})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("raw", type=Path)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    kinds: Counter[str] = Counter()
    phases: dict[str, Counter[str]] = defaultdict(Counter)
    inclusive: dict[str, Counter[str]] = defaultdict(Counter)
    for line in args.raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        frames = [f for f in stack.split(";") if not f.startswith("process ")]
        n = int(count)
        kind, phase = classify(frames)
        kinds[kind] += n
        phases[kind][phase] += n
        start = next((i for i, f in enumerate(frames) if "WSGIHandler.__call__" in f), 0)
        for frame in set(frames[start:]):
            inclusive[kind][short(frame)] += n
    total = sum(kinds.values())
    print(f"{total} samples")
    for kind, n in kinds.most_common():
        print(f"\n== {kind}: {n} samples ({100 * n / total:.0f} %)")
        print("   phases: " + ", ".join(f"{p} {100 * c / n:.0f} %" for p, c in phases[kind].most_common()))
        for frame, c in inclusive[kind].most_common(args.top):
            print(f"   {100 * c / n:5.1f} %  {frame}")


if __name__ == "__main__":
    main()
