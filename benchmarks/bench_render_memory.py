"""Peak memory of render workers under memory bombs (issue 50 item 1; docs/rendering.md "Isolation").

Renders, with the default settings (``memory_mb`` 1024), three pages that would each take 3 GB
(12 × 256 MB ArrayBuffers, a WebAssembly memory grown to 3 GB, 48 canvases of 64 MB: the pages of
``tests/annotation/render/test_memory.py``), each followed by an ordinary page, and samples the
proportional set size (PSS) of the whole render process tree (this process, Playwright's driver,
the browsers) ten times a second. Prints each page's status and browser peak, and the tree's peak.

Run: .venv/bin/python benchmarks/bench_render_memory.py [--workers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    from annotation.render.pages import render_folder
    from annotation.render.settings import RenderSettings
    from benchmarks.bench_render import tree_pss_mb
    from tests.annotation.render.test_memory import ARRAY_BUFFERS, CANVASES, GOOD, WASM

    scratch = Path(tempfile.mkdtemp(prefix="bench_render_memory_"))
    try:
        src, out = scratch / "pages", scratch / "out"
        src.mkdir()
        names = ["array-buffers", "good-1", "wasm-memory", "good-2", "canvases", "good-3"]
        for name, html in zip(names, [ARRAY_BUFFERS, GOOD, WASM, GOOD, CANVASES, GOOD], strict=True):
            (src / f"{name}.html").write_text(html)
        peak = [0.0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.1):
                peak[0] = max(peak[0], tree_pss_mb())

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        settings = RenderSettings()
        render_folder(src=src, out=out, settings=settings, workers=args.workers, resume=False)
        done.set()
        sampler.join()
        for name in names:
            record = json.loads((out / f"{name}.json").read_text())
            print(f"{name:>14}: {record['status']:<6} {record['reason'] or '':<34} browser peak {record['memory_mb']} MB")
        print(f"limit {settings.memory_mb} MB a browser, {args.workers} worker(s): the render process tree peaked at "
              f"{peak[0]:.0f} MB PSS; load average {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
