"""An adaptive study's scores and saving through the real served path (issue 46 item 2;
docs/protocol.md "Serve-time choice", "Scores of an adaptive study").

Run (a scratch SQLite database, removed afterwards; nothing else is touched):
    nice -n 10 .venv/bin/python benchmarks/bench_served_adaptive.py [--seeds 6] [--first-seed 5000]
        [--start-blocks 1] [--serve-blocks 2] [--clickers 0.05]

Each seed is one ``pairwise_reference`` study of 10 systems (true scores at the normal quantiles of
a 100-Elo sd), 40 pages with every pair compared in one A/B order (1,800 comparisons), scheduled by
``study_schedule`` as ``schedule_blocks --blocks 1 --block-size 234 --allocation adaptive`` does
(the uniform start: 234 comparisons × 5 raters, 1,170 votes, 26 per pair), then played by
participants who join through ``participant_claim`` and answer through ``trial_next`` and
``vote_submit`` until ``--serve-blocks`` serve-time blocks are full (each comparison's quota the
blocks' 5 raters; the weights refitted every 50 serves, ``ARBITER_SERVE_REFIT_VOTES``'s default).
The raters (``tests/annotation/served_study.py``): log-normal noise (sd 0.3, 10 % three times
noisier), a left-pane bias (sd 0.25 logit), 10 % ties, ``--clickers`` of them clicking at random;
a hidden repeat replays its original's answer. The uniform arm is the same raters on the fixed
design (simulated outside the database: its trials are fixed before anyone starts).

Printed, over the seeds: the reported scores (``annotation.selectors.allocation.adaptive_scores``:
the debiased fit of docs/protocol.md "Scores of an adaptive study") of the full study — the error of
each of the true top three (Elo, ± its standard error over seeds) and the share of 95 % intervals
that hold the target (the Bradley–Terry limit of the population's answers under the uniform
design), for the true top four and for all systems; the uniform arm's plain fit at the same votes
by the same participants, the same way; both again against the target of the study's own panel
(``panel_target``: a study of a few raters answers towards their own mixture, which no interval of
either design covers); and the saving: the votes until the plain fit (what the allocator and the stopping
rule read) names the true top three in a share ≥ P of the seeds, adaptive and uniform, for P =
0.7, 0.8, 0.9 ("not reached" when the share stays below P within the votes played; never
extrapolated). A seed costs about 35 ms per vote on an idle core (3,510 votes: 2 minutes), so a run
of a few seeds says little more than the sign of a bias; the many-seed figures are
``benchmarks/bench_adaptive.py --debias-only``'s, on the same model without the database.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SCRATCH = Path(tempfile.mkdtemp(prefix="arbiter-bench-served-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
os.environ["DATABASE_URL"] = f"sqlite:///{SCRATCH / 'db.sqlite3'}"
os.environ["MEDIA_ROOT"] = str(SCRATCH / "media")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
os.environ.pop("CELERY_BROKER_URL", None)

import django  # noqa: E402

django.setup()

import numpy as np  # noqa: E402
from django.core.management import call_command  # noqa: E402

LEVELS = (0.7, 0.8, 0.9)
Z95 = 1.959963984540054


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--first-seed", type=int, default=5000)
    parser.add_argument("--start-blocks", type=int, default=1)
    parser.add_argument("--serve-blocks", type=int, default=2)
    parser.add_argument("--clickers", type=float, default=0.05)
    parser.add_argument(
        "--uniform-votes", type=int, default=4680, help="votes the uniform arm plays (default 4,680)"
    )
    args = parser.parse_args()

    from annotation.selectors.allocation import adaptive_scores
    from stats.adaptive_estimation import ipw_bradley_terry
    from stats.bradley_terry import SCORE_SCALE
    from stats.study_simulation import votes_to_share
    from tests.annotation.served_study import (
        RaterModel,
        panel_target,
        study_build,
        study_play,
        top_right_at,
        truth_of,
        uniform_votes,
    )

    call_command("migrate", verbosity=0)
    model = RaterModel(
        start_blocks=args.start_blocks, serve_blocks=args.serve_blocks, clicker_share=args.clickers
    )
    m = model.n_systems
    looks = np.arange(model.look_every, max(model.total_votes, args.uniform_votes) + 1, model.look_every)
    print(
        f"served path: {m} systems, {model.pages} pages ({model.pages * model.k_pairs} comparisons), start "
        f"{model.start_blocks} block(s) of {model.block_size} x {model.raters} = {model.start_votes} votes "
        f"({model.start_votes / model.k_pairs:.0f} per pair), {model.serve_blocks} serve-time block(s), quota "
        f"{model.raters}, refit every {model.refit_votes}; raters: noise sd {model.rater_noise}, position bias sd "
        f"{model.position_bias_sd}, ties {model.tie_rate:.0%}, clickers {model.clicker_share:.0%}; "
        f"seeds {args.first_seed}..{args.first_seed + args.seeds - 1}; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    errors: dict[str, list[np.ndarray]] = {"adaptive": [], "uniform": []}
    panel_errors: dict[str, list[np.ndarray]] = {"adaptive": [], "uniform": []}
    panel_covered: dict[str, list[np.ndarray]] = {"adaptive": [], "uniform": []}
    covered: dict[str, list[np.ndarray]] = {"adaptive": [], "uniform": []}
    reached: dict[str, list[np.ndarray]] = {"adaptive": [], "uniform": []}
    votes_played = []
    started = time.perf_counter()
    for s in range(args.seeds):
        seed = args.first_seed + s
        t0 = time.perf_counter()
        truth = truth_of(model, seed)
        study = study_build(model, f"served-{seed}", seed)
        served = study_play(model, study, truth, seed)
        votes_played.append(len(served.first))
        scores = adaptive_scores(study)
        assert scores is not None
        order = np.argsort(-truth.elo, kind="stable")
        by_system = {row["system"]: row for row in scores["systems"]}
        est = np.array([by_system[f"s{i}"]["score"] for i in range(m)])
        low = np.array([by_system[f"s{i}"]["ci95"][0] for i in range(m)])
        high = np.array([by_system[f"s{i}"]["ci95"][1] for i in range(m)])
        target = SCORE_SCALE * truth.target
        panel = SCORE_SCALE * panel_target(model, truth, served.panel)
        errors["adaptive"].append((est - est.mean() - target)[order[:3]])
        covered["adaptive"].append(((low - est.mean() <= target) & (target <= high - est.mean()))[order])
        panel_errors["adaptive"].append((est - est.mean() - panel)[order[:3]])
        panel_covered["adaptive"].append(((low - est.mean() <= panel) & (panel <= high - est.mean()))[order])
        reached["adaptive"].append(top_right_at(served.first, served.second, served.points, looks, truth, m))
        a, b, y = uniform_votes(model, truth, seed, int(looks[-1]), served.panel)
        n = len(served.first)
        fit = ipw_bradley_terry(a[:n], b[:n], y[:n], np.full(n, 1.0 / model.k_pairs), m)
        u_est = fit.scores[0]
        u_se = fit.standard_errors[0]
        errors["uniform"].append((u_est - u_est.mean() - target)[order[:3]])
        covered["uniform"].append((np.abs(u_est - u_est.mean() - target) <= Z95 * u_se)[order])
        panel_errors["uniform"].append((u_est - u_est.mean() - panel)[order[:3]])
        panel_covered["uniform"].append((np.abs(u_est - u_est.mean() - panel) <= Z95 * u_se)[order])
        reached["uniform"].append(top_right_at(a, b, y, looks, truth, m))
        print(
            f"  seed {seed}: {n} votes ({int(np.isnan(served.propensity).sum())} uniform start), reported "
            f"top-3 errors {', '.join(f'{e:+.1f}' for e in errors['adaptive'][-1])} Elo, "
            f"{time.perf_counter() - t0:.0f} s",
            flush=True,
        )
    n_seeds = len(votes_played)
    print(
        f"\n{n_seeds} seeds in {time.perf_counter() - started:.0f} s; votes per study {min(votes_played)}-{max(votes_played)}"
    )
    for (arm, against), (err_list, cover_list) in (
        (("adaptive", "the population"), (errors["adaptive"], covered["adaptive"])),
        (("uniform", "the population"), (errors["uniform"], covered["uniform"])),
        (("adaptive", "the study's panel"), (panel_errors["adaptive"], panel_covered["adaptive"])),
        (("uniform", "the study's panel"), (panel_errors["uniform"], panel_covered["uniform"])),
    ):
        err = np.array(err_list)
        cover = np.array(cover_list)
        sem = err.std(axis=0, ddof=1) / math.sqrt(n_seeds) if n_seeds > 1 else np.full(3, math.nan)
        label = "reported (debiased) fit" if arm == "adaptive" else "plain fit, same votes"
        print(
            f"  against {against:17s} {arm:8s} {label}: error of the true top-3 "
            + " / ".join(f"{b:+.1f}±{e:.1f}" for b, e in zip(err.mean(axis=0), sem, strict=True))
            + f" Elo; coverage top-4 {cover[:, :4].mean():.3f}, all {cover.mean():.3f} ({cover.size} intervals)"
        )
    played = looks <= min(votes_played)  # the adaptive arm's looks: every seed has its votes there
    a_reached = np.array(reached["adaptive"]).T
    u_reached = np.array(reached["uniform"]).T
    cells = []
    for level in LEVELS:
        a_votes = votes_to_share(looks[played], a_reached[played], level)
        u_votes = votes_to_share(looks, u_reached, level)
        a_text = f"{a_votes:.0f}" if math.isfinite(a_votes) else f"not reached by {looks[played][-1]}"
        u_text = f"{u_votes:.0f}" if math.isfinite(u_votes) else f"not reached by {looks[-1]}"
        ratio = f" = {a_votes / u_votes:.2f} x" if math.isfinite(a_votes) and math.isfinite(u_votes) else ""
        cells.append(f"P >= {level}: adaptive {a_text} / uniform {u_text}{ratio}")
    print(
        "  votes until the plain fit names the true top-3 in a share >= P of the seeds: " + "; ".join(cells)
    )
    print(
        f"  share at the last adaptive look ({looks[played][-1]} votes): adaptive {a_reached[played][-1].mean():.2f}, "
        f"uniform {u_reached[played][-1].mean():.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
