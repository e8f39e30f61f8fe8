"""Report figures drawn on a request of their own and kept in the cache.

Drawing the figures with matplotlib is most of the report pages' time (about 2 s of 2.5 s for the
demo study's agreement page). The agreement, calibration and kind-report pages therefore show
their numbers at once and point each figure's ``<img>`` at a URL of its own: the browser shows the
page, a placeholder says the figure is being drawn, and the figures arrive as they are drawn. A
drawn figure is kept in Django's cache under the content it was drawn from (a report's hash, a
stored calibration report's id), so a page whose votes have not changed shows its figures at once.
The self-contained HTML downloads still embed every figure as a data URI.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from django.core.cache import cache

from annotation.errors import NotFound
from annotation.models import Study
from calibration.models import CalibrationReport
from calibration.reports import AGREEMENT_FIGURES, agreement_figure
from calibration.services.agreement import StudyAgreement, agreement_report_compute

FIGURE_CACHE_SECONDS = 24 * 3600

#: What a figure is drawn from (the report, and what else its drawing needs).
FigureInputs = Mapping[str, Any]


def report_content_key(report: Mapping[str, Any]) -> str:
    """A short hash of a JSON report: equal reports (same votes, rules, resamples, seed) share it."""
    text = json.dumps(report, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _inputs_key(kind: str, study_id: int, key: str) -> str:
    return f"arbiter:{kind}-figure-inputs:{study_id}:{key}"


def _figure_key(kind: str, study_id: int, key: str, name: str) -> str:
    return f"arbiter:{kind}-figure:{study_id}:{key}:{name}"


def report_figures_keep(*, kind: str, study: Study, key: str, inputs: FigureInputs) -> None:
    """Keep what a report's figures are drawn from, for the figures' own requests."""
    cache.set(_inputs_key(kind, study.pk, key), dict(inputs), FIGURE_CACHE_SECONDS)


def report_figure_svg(
    *,
    kind: str,
    study: Study,
    key: str,
    name: str,
    draw: Callable[[FigureInputs], str],
    recompute: Callable[[], tuple[str, FigureInputs]],
) -> bytes:
    """The SVG of figure ``name`` of the ``kind`` report whose content key is ``key``.

    Drawn (``draw`` returns a data URI) from the inputs ``report_figures_keep`` kept; when the cache
    no longer has them (another web process, a restart) ``recompute`` gives the report again
    from the options in the figure's URL.
    """
    svg = cache.get(_figure_key(kind, study.pk, key, name))
    if svg is not None:
        return bytes(svg)
    inputs = cache.get(_inputs_key(kind, study.pk, key))
    if inputs is None:
        key, inputs = recompute()
    drawn = draw(inputs)
    svg = base64.b64decode(drawn.split(",", 1)[1])
    cache.set(_figure_key(kind, study.pk, key, name), svg, FIGURE_CACHE_SECONDS)
    return svg


def _agreement_inputs(agreement: StudyAgreement) -> tuple[str, FigureInputs]:
    key = report_content_key(agreement.report)
    return key, {"report": agreement.report, "loro": agreement.result.leave_one_rater_out_scores()}


def agreement_figures_prepare(*, agreement: StudyAgreement) -> str:
    """Keep what the agreement report's figures are drawn from; return the report's content key."""
    key, inputs = _agreement_inputs(agreement)
    report_figures_keep(kind="agreement", study=agreement.study, key=key, inputs=inputs)
    return key


def agreement_figure_svg(*, study: Study, key: str, name: str, resamples: int, seed: int) -> bytes:
    """The SVG of one agreement figure (``AGREEMENT_FIGURES``) of the report keyed ``key``."""
    if name not in AGREEMENT_FIGURES:
        raise NotFound(f"the agreement report has no figure {name!r}")
    return report_figure_svg(
        kind="agreement",
        study=study,
        key=key,
        name=name,
        draw=lambda inputs: agreement_figure(name, inputs["report"], inputs["loro"]),
        recompute=lambda: _agreement_inputs(agreement_report_compute(study=study, resamples=resamples, seed=seed)),
    )


def calibration_figure_svg(*, study: Study, stored: CalibrationReport, name: str) -> bytes:
    """The SVG of one figure of ``study``'s stored calibration report (stored reports never change)."""
    from calibration.calibration_plots import CALIBRATION_FIGURES

    draw = CALIBRATION_FIGURES.get(name)
    if draw is None:
        raise NotFound(f"the calibration report has no figure {name!r}")
    inputs = {"report": stored.report}
    # Keyed by the report's content too: a row id alone can come back (SQLite reuses the highest id
    # once its row is deleted), and a figure kept for the old row would be shown for the new one.
    key = f"{stored.pk}-{report_content_key(stored.report)}"
    return report_figure_svg(
        kind="calibration",
        study=study,
        key=key,
        name=name,
        draw=lambda _: draw(stored.report),
        recompute=lambda: (key, inputs),
    )
