"""Benchmark of ``manage.py score_pages`` (docs/protocol.md "Scoring folders: score_pages"; issue 48
item 6): pages scored per second on the seed's size, rendering excluded.

Generates a synthetic corpus shaped like AmbiHTMLBench's (1,115 pages of about 26 blocks and 2,300
characters; a quarter of the pages with a table of 6–16 rows) and, per system, predictions that
differ from the truth as model outputs do: character typos, dropped, split and merged blocks,
shifted boxes, edited table cells, and some tables written out as paragraphs. Predictions are
ground-truth-format JSON, so nothing is rendered. Then it times:

- the command, end to end as a subprocess (interpreter and Django start-up included), with
  ``--workers`` processes and an empty cache;
- a plain loop: each (page, system) read and scored one by one in this process.

It prints both rates in (page, system) pairs per second and their ratio, and the command's time
extrapolated to 1,115 pages × 10 systems when run on fewer.

Run: .venv/bin/python benchmarks/bench_score_pages.py [--pages 1115] [--systems 10] [--loop-pages N] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from objective.blocks import load_page  # noqa: E402
from objective.score import score_page  # noqa: E402

SEED_PAGES, SEED_SYSTEMS = 1115, 10
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "revenue",
    "quarter",
    "growth",
    "region",
    "market",
    "share",
    "total",
    "cost",
    "price",
    "figure",
    "table",
    "result",
    "method",
    "model",
    "data",
    "value",
    "sample",
    "error",
    "rate",
    "mean",
    "report",
    "annual",
    "page",
    "section",
    "analysis",
    "increase",
    "decrease",
    "percent",
    "year",
    "month",
    "week",
    "studie",
    "résumé",
    "naïve",
    "数据",
    "分析",
    "年度",
    "報告",
    "μ",
    "σ",
    "≤",
    "≥",
    "α",
    "β",
]
W, H = 1000.0, 1414.0


def sentence(rnd: random.Random, n_chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < n_chars:
        word = rnd.choice(WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out).capitalize() + "."


def table_html(rows: list[list[str]]) -> str:
    body = "".join(
        "<tr>"
        + "".join(f"<{'th' if r == 0 else 'td'}>{c}</{'th' if r == 0 else 'td'}>" for c in row)
        + "</tr>"
        for r, row in enumerate(rows)
    )
    return f"<table>{body}</table>"


def truth_page(rnd: random.Random, with_table: bool) -> dict[str, object]:
    """About 26 blocks and 2,300 characters in one or two columns, and maybe a table."""
    blocks: list[dict[str, object]] = []
    y = 40.0
    blocks.append({"type": "title", "text": sentence(rnd, 40), "bbox": [60, y, 940, y + 40]})
    y += 60
    columns = rnd.choice((1, 1, 2))
    table_at = rnd.randrange(3, 12) if with_table else -1
    n = rnd.randint(18, 30)
    col_y = [y, y]
    for k in range(n):
        col = k % columns
        x0, x1 = (60, 940) if columns == 1 else ((60, 480) if col == 0 else (520, 940))
        top = col_y[col]
        if k == table_at:
            n_rows, n_cols = rnd.randint(6, 16), rnd.randint(3, 6)
            rows = [[sentence(rnd, 8)[:-1] for _ in range(n_cols)]] + [
                [str(rnd.randint(0, 99999)) if c else sentence(rnd, 10)[:-1] for c in range(n_cols)]
                for _ in range(n_rows - 1)
            ]
            height = 22.0 * n_rows
            blocks.append(
                {
                    "type": "table",
                    "text": " ".join(c for r in rows for c in r),
                    "html": table_html(rows),
                    "bbox": [60, top, 940, min(top + height, H - 1)],
                }
            )
            col_y = [top + height + 12] * 2
            continue
        kind = rnd.choices(("text", "title", "list", "formula"), weights=(80, 8, 8, 4))[0]
        chars = {"text": rnd.randint(40, 160), "title": 30, "list": 120, "formula": 20}[kind]
        text = sentence(rnd, chars) if kind != "formula" else "$x_i = \\alpha + \\beta y_i$"
        height = 14.0 * (1 + len(text) // (90 if columns == 1 else 45))
        if top + height >= H - 10:
            break
        blocks.append({"type": kind, "text": text, "bbox": [x0, top, x1, top + height]})
        col_y[col] = top + height + 8
    return {"page": {"width": W, "height": H}, "blocks": blocks}


def typo(rnd: random.Random, text: str, rate: float) -> str:
    chars = list(text)
    for i in range(len(chars)):
        if rnd.random() < rate:
            chars[i] = rnd.choice("abcdefghijklmnopqrstuvwxyz ")
    return "".join(chars)


def prediction(rnd: random.Random, truth: dict[str, object], quality: float) -> dict[str, object]:
    """The truth as a system of this quality (0 worst, 1 best) would give it back."""
    out: list[dict[str, object]] = []
    shift = (rnd.uniform(-30, 30) * (1 - quality), rnd.uniform(-60, 60) * (1 - quality))
    blocks = list(truth["blocks"])  # type: ignore[call-overload]
    k = 0
    while k < len(blocks):
        block = dict(blocks[k])
        k += 1
        x0, y0, x1, y1 = block["bbox"]
        box = [min(max(x0 + shift[0], 0), W - 2), min(max(y0 + shift[1], 0), H - 2)]
        box += [min(max(x1 + shift[0], box[0] + 1), W), min(max(y1 + shift[1], box[1] + 1), H)]
        roll = rnd.random()
        if roll < 0.06 * (1 - quality):
            continue  # dropped
        if block["type"] == "table":
            html = str(block["html"])
            if rnd.random() < 0.25 * (1 - quality):  # written out as paragraphs
                for row in html.split("<tr>")[1:]:
                    cells = [c.split(">", 1)[1] for c in row.split("</t")[:-1] if ">" in c]
                    out.append({"type": "text", "text": " ".join(cells), "bbox": box})
                continue
            cells = html.split("<td>")
            for c in range(1, len(cells)):
                if rnd.random() < 0.15 * (1 - quality):
                    value, rest = cells[c].split("</td>", 1)
                    cells[c] = typo(rnd, value, 0.5) + "</td>" + rest
            out.append({**block, "html": "<td>".join(cells), "bbox": box})
            continue
        text = typo(rnd, str(block["text"]), 0.03 * (1 - quality))
        if roll < 0.06 * (1 - quality) + 0.05 and len(text) > 40:  # split in two
            cut = len(text) // 2
            mid = (box[1] + box[3]) / 2
            out.append({**block, "text": text[:cut], "bbox": [box[0], box[1], box[2], max(mid, box[1] + 1)]})
            out.append({**block, "text": text[cut:], "bbox": [box[0], min(mid, box[3] - 1), box[2], box[3]]})
            continue
        if roll > 0.95 and k < len(blocks) and blocks[k]["type"] == "text":  # merged with the next
            nxt = blocks[k]
            k += 1
            text += " " + str(nxt["text"])
            box[3] = max(box[3], min(float(nxt["bbox"][3]) + shift[1], H))  # type: ignore[index]
        out.append({**block, "text": text, "bbox": box})
    if rnd.random() < 0.1:
        out.append({"type": "text", "text": sentence(rnd, 60), "bbox": [60, H - 60, 940, H - 20]})  # invented
    return {"page": truth["page"], "blocks": out}


def make_corpus(folder: Path, pages: int, systems: int, seed: int = 48) -> None:
    rnd = random.Random(seed)
    (folder / "truth").mkdir(parents=True)
    for s in range(systems):
        (folder / "pred" / f"system-{s:02d}").mkdir(parents=True)
    for p in range(pages):
        truth = truth_page(rnd, with_table=rnd.random() < 263 / 1115)
        (folder / "truth" / f"page-{p:04d}.json").write_text(json.dumps(truth))
        for s in range(systems):
            pred = prediction(rnd, truth, quality=0.5 + 0.5 * s / max(systems - 1, 1))
            (folder / "pred" / f"system-{s:02d}" / f"page-{p:04d}.json").write_text(json.dumps(pred))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=SEED_PAGES)
    parser.add_argument("--systems", type=int, default=SEED_SYSTEMS)
    parser.add_argument(
        "--loop-pages", type=int, default=None, help="pages for the plain loop (default: all)"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the corpus and the report")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-score-pages-"))
    try:
        started = time.perf_counter()
        make_corpus(folder, args.pages, args.systems)
        print(
            f"corpus: {args.pages} pages x {args.systems} systems in {time.perf_counter() - started:.1f} s ({folder})"
        )
        pairs = args.pages * args.systems

        children_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "score_pages",
                "--truth",
                str(folder / "truth"),
                "--pred",
                str(folder / "pred"),
                "--json",
                str(folder / "scores.json"),
                "--workers",
                str(args.workers),
            ],
            cwd=ROOT,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        scoring_cpu = float(re.search(r"\(([0-9.]+) s CPU scoring\)", done.stdout).group(1))  # type: ignore[union-attr]
        command_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        command_cpu = after.ru_utime + after.ru_stime - children_cpu.ru_utime - children_cpu.ru_stime
        command_rate = pairs / command_s

        loop_pages = min(args.loop_pages or args.pages, args.pages)
        started, cpu = time.perf_counter(), time.process_time()
        for p in range(loop_pages):
            truth = load_page(folder / "truth" / f"page-{p:04d}.json")
            for s in range(args.systems):
                score_page(truth, load_page(folder / "pred" / f"system-{s:02d}" / f"page-{p:04d}.json"))
        loop_s, loop_cpu = time.perf_counter() - started, time.process_time() - cpu
        loop_rate = loop_pages * args.systems / loop_s

        seed_pairs = SEED_PAGES * SEED_SYSTEMS
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"load average {load} at the end (2 cores)")
        print(
            f"score_pages --workers {args.workers}: {pairs} pairs in {command_s:.1f} s = {command_rate:.1f} pairs/s,"
            f" {1000 * scoring_cpu / pairs:.1f} ms CPU per pair in the scoring processes,"
            f" {command_cpu:.1f} s CPU in the command's own process (start-up, hashing, the report)"
        )
        print(
            f"  1,115 x 10 at this rate: {seed_pairs / command_rate / 60:.1f} min wall; at this CPU per pair on"
            f" {args.workers} idle cores: {seed_pairs * scoring_cpu / pairs / args.workers / 60:.1f} min (target 10 min)"
        )
        print(
            f"plain loop: {loop_pages * args.systems} pairs in {loop_s:.1f} s = {loop_rate:.1f} pairs/s,"
            f" {1000 * loop_cpu / (loop_pages * args.systems):.1f} ms CPU per pair"
        )
        print(f"ratio: {command_rate / loop_rate:.2f} x the plain loop")
        report = json.loads((folder / "scores.json").read_text())
        print("systems' S_obj:", ", ".join(f"{k} {v['s_obj']:.3f}" for k, v in report["systems"].items()))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
