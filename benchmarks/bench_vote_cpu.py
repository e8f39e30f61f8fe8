"""CPU of one rater vote in one process (issue 47 item 5): the htmx answer and the next trial's images.

The benchmark's study of ``bench_raters.py`` (80 pages, 3 images of 700×1400 px a trial, 2–3
axes, 4 blocks of 60), built on a database of its own. One participant after another answers
through ``django.test.Client`` with the whole middleware stack, as a browser would: the trial's
three images, then the htmx POST of the answer, whose response is the next trial. Each request's
CPU in this process is taken with ``time.process_time``; the database server's CPU is not in it
(``bench_raters.py`` and ``bench_peer_potato.py`` report that one). CPU time does not depend much
on what else the machine does, so the figure holds on a loaded machine; wall times would not.

``--root DIR`` adds another checkout (e.g. ``git worktree add /tmp/base main``), run with this
checkout's ``.venv`` in alternation with this one, ``--rounds`` times each, so both see the same
machine; the ratio of the medians is printed.

Run: .venv/bin/python benchmarks/bench_vote_cpu.py [--votes 600] [--root DIR --rounds 3]
        [--database-url postgres://postgres@127.0.0.1:5432/arbiter_vote_cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, os, random, subprocess, sys, time
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import bench_raters as br
url = os.environ["DATABASE_URL"]
if url.startswith("postgres"):
    br.recreate_database(url)
subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], check=True)
link, _ = br.build_study(pages=80, blocks=4, block_size=60, raters_per_block=50)
from django.test import Client
rng = random.Random(1)
joined = 0

def join():
    global joined
    joined += 1
    client = Client(HTTP_HOST="127.0.0.1")
    page = client.get(f"/s/{link}/", {"participant": f"p{joined}"}, follow=True).content.decode()
    return client, page

def vote(client, page):
    token, key = br.TOKEN_RE.search(page), br.KEY_RE.search(page)
    if token is None:
        return None, 0.0, 0.0
    started = time.process_time()
    for image in dict.fromkeys(br.IMAGE_RE.findall(page)):
        response = client.get(image)
        assert response.status_code == 200, response.status_code
        b"".join(response.streaming_content)
    images = time.process_time() - started
    verdict, confidence, axes = br.random_answer(rng, list(dict.fromkeys(br.AXIS_RE.findall(page))))
    form = {"verdict": verdict, "confidence": str(confidence), "rationale": "", "idempotency_key": key.group(1),
            **{f"axis:{a}": str(v) for a, v in axes.items()}}
    started = time.process_time()
    response = client.post(f"/t/{token.group(1)}/vote/", form, HTTP_HX_REQUEST="true")
    answer = time.process_time() - started
    assert response.status_code == 200, response.status_code
    return response.content.decode(), images, answer

client, page = join()
votes = images = answers = 0
target = int(os.environ["BENCH_VOTES"])
warm = 20
while votes < target + warm:
    next_page, image_cpu, answer_cpu = vote(client, page)
    if next_page is None:
        client, page = join()
        continue
    page = next_page
    votes += 1
    if votes > warm:
        images += image_cpu
        answers += answer_cpu
print(json.dumps({"votes": target, "answer_ms": 1000 * answers / target, "images_ms": 1000 * images / target}))
"""


def measure(root: Path, votes: int, database_url: str) -> dict[str, float]:
    media = tempfile.mkdtemp(prefix="bench-vote-cpu-")
    env = dict(os.environ, DATABASE_URL=database_url, MEDIA_ROOT=media, DJANGO_SETTINGS_MODULE="config.settings.local",
               DJANGO_DEBUG="0", DATABASE_CONN_MAX_AGE="600", LOG_LEVEL="ERROR", BENCH_VOTES=str(votes),
               PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=root, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the run in {root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--votes", type=int, default=600)
    parser.add_argument("--root", type=Path, help="another checkout, measured in alternation with this one")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/arbiter_vote_cpu")
    args = parser.parse_args()
    roots = [("this", ROOT)] + ([("other", args.root.resolve())] if args.root else [])
    rounds = args.rounds if args.root else 1
    print(f"{args.votes} votes a run, {args.database_url.split('@')[-1]}; load average {os.getloadavg()[0]:.1f}")
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in roots}
    order = list(roots)
    for number in range(rounds):
        for name, root in order:
            started = time.perf_counter()
            result = measure(root, args.votes, args.database_url)
            results[name].append(result)
            print(f"round {number + 1}, {name} ({root}): htmx answer {result['answer_ms']:.2f} ms CPU a vote, "
                  f"its three images {result['images_ms']:.2f} ms ({time.perf_counter() - started:.0f} s)", flush=True)
        order.reverse()  # the other one first next round
    medians = {name: {k: statistics.median(r[k] for r in runs) for k in ("answer_ms", "images_ms")}
               for name, runs in results.items()}
    for name, m in medians.items():
        print(f"{name}: median htmx answer {m['answer_ms']:.2f} ms, images {m['images_ms']:.2f} ms, "
              f"together {m['answer_ms'] + m['images_ms']:.2f} ms CPU a vote")
    if args.root:
        this, other = medians["this"], medians["other"]
        print(f"this / other: htmx answer {this['answer_ms'] / other['answer_ms']:.2f} x, together "
              f"{(this['answer_ms'] + this['images_ms']) / (other['answer_ms'] + other['images_ms']):.2f} x")
    random.seed(0)


if __name__ == "__main__":
    main()
