"""Report figures drawn on a request of their own and kept in the cache.

Drawing the figures with matplotlib is most of the agreement and calibration pages' time (about
2 s of 2.5 s for the demo study). The pages therefore show their numbers at once and point each
figure's ``<img>`` at a URL of its own: the browser shows the page, a placeholder says the figure
is being drawn, and the figures arrive as they are drawn. A drawn figure is kept in Django's cache
under the content it was drawn from (the agreement report's hash, the stored calibration report's
id), so a page whose votes have not changed shows its figures at once. The self-contained HTML
downloads still embed every figure as a data URI.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django.core.cache import cache

from annotation.errors import NotFound
from annotation.models import Study
from calibration.calibration_plots import CALIBRATION_FIGURES
from calibration.models import CalibrationReport
from calibration.reports import AGREEMENT_FIGURES, agreement_figure
from calibration.services.agreement import StudyAgreement, agreement_report_compute

FIGURE_CACHE_SECONDS = 24 * 3600


def report_content_key(report: Mapping[str, Any]) -> str:
    """A short hash of a JSON report: equal reports (same votes, rules, resamples, seed) share it."""
    text = json.dumps(report, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _svg_bytes(data_uri: str) -> bytes:
    return base64.b64decode(data_uri.split(",", 1)[1])


def _inputs_key(study: Study, key: str) -> str:
    return f"arbiter:agreement-figure-inputs:{study.pk}:{key}"


def _figure_key(kind: str, study_id: int, key: str, name: str) -> str:
    return f"arbiter:{kind}-figure:{study_id}:{key}:{name}"


def agreement_figures_prepare(*, agreement: StudyAgreement) -> str:
    """Keep what the report's figures are drawn from in the cache; return the report's content key."""
    key = report_content_key(agreement.report)
    if cache.get(_figure_key("agreement", agreement.study.pk, key, AGREEMENT_FIGURES[-1])) is None:
        inputs = {"report": agreement.report, "loro": agreement.result.leave_one_rater_out_scores()}
        cache.set(_inputs_key(agreement.study, key), inputs, FIGURE_CACHE_SECONDS)
    return key


def agreement_figure_svg(*, study: Study, key: str, name: str, resamples: int, seed: int) -> bytes:
    """The SVG of one agreement figure of the report whose content key is ``key``.

    Drawn from the inputs ``agreement_figures_prepare`` kept; when the cache no longer has them
    (another web process, a restart) the report is computed again with the same options.
    """
    if name not in AGREEMENT_FIGURES:
        raise NotFound(f"the agreement report has no figure {name!r}")
    svg = cache.get(_figure_key("agreement", study.pk, key, name))
    if svg is not None:
        return bytes(svg)
    inputs = cache.get(_inputs_key(study, key))
    if inputs is None:
        agreement = agreement_report_compute(study=study, resamples=resamples, seed=seed)
        key = report_content_key(agreement.report)
        inputs = {"report": agreement.report, "loro": agreement.result.leave_one_rater_out_scores()}
    svg = _svg_bytes(agreement_figure(name, inputs["report"], inputs["loro"]))
    cache.set(_figure_key("agreement", study.pk, key, name), svg, FIGURE_CACHE_SECONDS)
    return svg


def calibration_figure_svg(*, stored: CalibrationReport, name: str) -> bytes:
    """The SVG of one figure of a stored calibration report (stored reports never change)."""
    draw = CALIBRATION_FIGURES.get(name)
    if draw is None:
        raise NotFound(f"the calibration report has no figure {name!r}")
    cache_key = _figure_key("calibration", stored.study_id, str(stored.pk), name)
    svg = cache.get(cache_key)
    if svg is None:
        svg = _svg_bytes(draw(stored.report))
        cache.set(cache_key, svg, FIGURE_CACHE_SECONDS)
    return bytes(svg)
