"""The disagreement lens page of a study and judge (docs/protocol.md "The disagreement lens")."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from annotation.errors import ArbiterError
from annotation.models import StudyKind
from annotation.selectors.studies import study_get_for_user
from annotation.views.decorators import researcher_required

CONDITION_TITLES = {
    "inconsistent": "the judge's two orders differ",
    "taller": "the judge leans to the taller page, people to the other",
    "more_text": "the judge leans to the page with more text, people to the other",
    "more_media": "the judge leans to the page with more media, people to the other",
    "failed": "a candidate failed to render",
}
CHECKLIST_CONDITION_TITLES = {
    "judge_passes_people_no": "the judge passes it, the people's majority says no",
    "judge_fails_people_yes": "the judge fails it, the people's majority says yes",
    "judge_unclear": "the judge answered unclear",
    "no_evidence": "the judge said yes without evidence",
}
POSITION_TITLES = {
    "consistent": "Consistent",
    "biased_first": "Biased toward the first",
    "biased_second": "Biased toward the second",
    "error": "Error (no valid reply in an order)",
}
ATTRIBUTE_TITLES = {
    "height": "the taller page",
    "text": "the page with more text",
    "media": "the page with more media area",
    "failed": "a failed render's opponent",
}
#: What "more text" counted (the report's ``text_measure``, docs/protocol.md "The disagreement lens").
TEXT_MEASURE_NOTES = {
    "characters": " (visible characters of its text blocks)",
    "area": " (area of its text blocks: the page text was not kept)",
}


@researcher_required
@require_GET
def disagreement_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The page answers at once with the judge's choice and "Comparing…"; the tables, the figure and
    the drill-down come on the page's own htmx request (``?part=body``), which computes them (as
    the agreement page does)."""
    # NumPy and matplotlib only when the page is asked for, never at the web's start-up
    # (tests/test_startup_imports.py).
    from calibration.lens_plots import agreement_by_gap_figure
    from calibration.services.lens import CONDITIONS, disagreement_report, drilldown_select, lens_judges
    from calibration.services.lens_checklist import CHECKLIST_CONDITIONS

    study = study_get_for_user(user=request.user, slug=slug)
    judges = lens_judges(study=study)
    judge = (request.GET.get("judge") or "").strip() or (judges[0] if judges else "")
    context: dict[str, object] = {"study": study, "judges": judges, "judge": judge}
    if request.GET.get("part") != "body":
        query = {k: request.GET[k] for k in ("pair", "condition", "page") if request.GET.get(k)}
        context["query"] = urlencode({"judge": judge} | query)
        return render(request, "calibration/lens_page.html", context)
    try:
        report = disagreement_report(study=study, judge=judge)
        chosen = drilldown_select(
            report,
            pair=request.GET.get("pair", ""),
            condition=request.GET.get("condition", ""),
            page=request.GET.get("page") or 1,
        )
    except ArbiterError as exc:  # shown in place of the body (htmx swaps a 200 only)
        return render(request, "calibration/lens_error.html", {"message": str(exc)})
    base = {"judge": judge, "pair": chosen.pair, "condition": chosen.condition}
    paging = {
        "drill": chosen,
        "pairs": sorted({row["pair"] for row in report["drilldown"]}),
        "previous_query": urlencode(base | {"page": chosen.page - 1}) if chosen.page > 1 else "",
        "next_query": urlencode(base | {"page": chosen.page + 1}) if chosen.page < chosen.pages else "",
    }
    if report["kind"] == StudyKind.CHECKLIST:
        context |= paging | {
            "report": report,
            "conditions": [(c, CHECKLIST_CONDITION_TITLES[c]) for c in CHECKLIST_CONDITIONS],
        }
        return render(request, "calibration/lens_body.html", context)
    context |= paging | {
        "report": report,
        "position": [
            (POSITION_TITLES[k], report["position"]["counts"][k], report["position"]["shares"][k])
            for k in POSITION_TITLES
        ],
        "conditioned": [
            (ATTRIBUTE_TITLES[row["attribute"]] + TEXT_MEASURE_NOTES[report["text_measure"]], row)
            if row["attribute"] == "text"
            else (ATTRIBUTE_TITLES[row["attribute"]], row)
            for row in report["conditioned"]
        ],
        "gap_figure": agreement_by_gap_figure(report["agreement_by_gap"]),
        "conditions": [(c, CONDITION_TITLES[c]) for c in CONDITIONS],
    }
    return render(request, "calibration/lens_body.html", context)
