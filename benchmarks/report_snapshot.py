"""Deterministic report snapshot: build the demo studies, run every report, diff against a saved run.

A refactor that claims "no behaviour change" proves it here: run this script before the change
(``--save before/``), again after it (``--compare before/``), and every report's JSON must be
identical once the keys that legitimately differ between runs (timestamps, file paths, timings)
are dropped.

    .venv/bin/python benchmarks/report_snapshot.py --save var/snapshot-before
    # … change the code …
    .venv/bin/python benchmarks/report_snapshot.py --compare var/snapshot-before

The run uses a scratch SQLite database and media folder of its own, so it never touches ``var/``.
It prints one line per report (``same`` / ``DIFFERS`` with the first differing JSON paths) and
exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# Keys whose values change from run to run without any change of behaviour: clocks, paths, and the
# response times the server measures while the kind demos' simulated participants answer.
VOLATILE_KEYS = frozenset(
    {
        "generated_at",
        "created_at",
        "computed_at",
        "elapsed_s",
        "seconds",
        "path",
        "data_hash",
        "median_response_ms",
        "response_ms",
        "deployment_scheduled_at",
    }
)
KINDS = ("pairwise", "checklist", "rating")


def manage(env: dict[str, str], *args: str) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise SystemExit(f"error: manage.py {' '.join(args)} failed: {tail[0]}")


def scrub(value: Any) -> Any:
    """The report without its volatile keys, so two runs compare equal when behaviour is equal."""
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in sorted(value.items()) if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def differences(before: Any, after: Any, path: str = "$") -> list[str]:
    if type(before) is not type(after):
        return [path]
    if isinstance(before, dict):
        out: list[str] = []
        for key in sorted(set(before) | set(after)):
            if key not in before or key not in after:
                out.append(f"{path}.{key}")
            else:
                out.extend(differences(before[key], after[key], f"{path}.{key}"))
        return out
    if isinstance(before, list):
        if len(before) != len(after):
            return [f"{path}[len {len(before)} vs {len(after)}]"]
        return [
            d
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            for d in differences(b, a, f"{path}[{i}]")
        ]
    return [] if before == after else [path]


def build_reports(out: Path, *, bootstrap: int) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="arbiter-snapshot-"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.local",
        "DATABASE_URL": f"sqlite:///{scratch / 'db.sqlite3'}",
        "MEDIA_ROOT": str(scratch / "media"),
    }
    env.pop("CELERY_BROKER_URL", None)
    out.mkdir(parents=True, exist_ok=True)
    seeded = ("--bootstrap", str(bootstrap), "--seed", "7")
    steps: list[tuple[str, tuple[str, ...]]] = [
        ("migrate", ("migrate", "--noinput", "-v0")),
        ("demo", ("make_demo_study", "--slug", "demo", "--seed", "1")),
        (
            "agreement_report",
            ("agreement_report", "demo", "--json", str(out / "agreement_report.json"), *seeded),
        ),
        (
            "calibrate",
            ("calibrate", "demo", "--json", str(out / "calibrate.json"), "--freeze", "snapshot", *seeded),
        ),
        (
            "leaderboard",
            (
                "leaderboard",
                "demo",
                "--coefficients",
                "snapshot",
                "--json",
                str(out / "leaderboard.json"),
                *seeded,
            ),
        ),
    ]
    for kind in KINDS:
        report = str(out / f"kind_report-{kind}.json")
        steps.append((f"demo-{kind}", ("make_demo_study", "--kind", kind, "--seed", "1")))
        steps.append((f"kind_report-{kind}", ("kind_report", f"demo-{kind}", "--json", report, *seeded)))
    for name, args in steps:
        started = time.perf_counter()
        manage(env, *args)
        print(f"  {name:<24} {time.perf_counter() - started:6.1f} s", file=sys.stderr)
    for report in out.glob("*.json"):
        report.write_text(json.dumps(scrub(json.loads(report.read_text())), indent=1, sort_keys=True) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path, help="folder to write the scrubbed report JSON into")
    action.add_argument("--compare", type=Path, help="folder of a saved run to compare this run against")
    parser.add_argument("--bootstrap", type=int, default=200, help="resamples per report (default 200)")
    args = parser.parse_args()
    if args.save:
        build_reports(args.save, bootstrap=args.bootstrap)
        print(f"saved {len(list(args.save.glob('*.json')))} reports to {args.save}")
        return 0
    if not args.compare.is_dir():
        print(f"error: {args.compare} is not a folder of saved reports", file=sys.stderr)
        return 1
    current = Path(tempfile.mkdtemp(prefix="arbiter-snapshot-now-"))
    build_reports(current, bootstrap=args.bootstrap)
    failed = False
    for saved in sorted(args.compare.glob("*.json")):
        now = current / saved.name
        if not now.exists():
            print(f"{saved.stem:<24} MISSING in this run")
            failed = True
            continue
        # The saved side is scrubbed too: a key that became volatile after it was saved is not behaviour.
        diff = differences(scrub(json.loads(saved.read_text())), json.loads(now.read_text()))
        failed |= bool(diff)
        print(f"{saved.stem:<24} {'same' if not diff else 'DIFFERS at ' + ', '.join(diff[:5])}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
