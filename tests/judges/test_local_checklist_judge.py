"""The local judge on a checklist study made from HTML outputs (docs/protocol.md "The built-in local
judge"; decision 0084): its answers come from the page the renderer exported, checked here against
pages whose content the test wrote; the rule's answers on a hand-written page; and the whole path
with no API key: a checklist study, ``run_judges`` with the local judge, the kind report's pass rates."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from annotation.models import Candidate, CandidateBlocks, Predicate, Study
from demo.service import demo_judge_ensure
from judges.models import JudgeChecklistAnswer, JudgeOutput
from judges.page_questions import answer_question, page_of
from kind_reports.services import kind_report_build

# A page 800 × 1000 CSS px: a title at the top, a paragraph (left) beside a table (right), a bar
# chart below the table, a short label near the bottom.
KEPT: dict[str, Any] = {
    "page": {"width": 800, "height": 1000},
    "blocks": [
        {"type": "title", "text": "Quarterly Report 2025", "bbox": [50, 20, 750, 80]},
        {"type": "text", "text": "Join us on March 14, 7:30 pm. Tickets $25 at www.example.com",
         "bbox": [50, 100, 380, 200]},
        {"type": "table", "text": "Region Sales North 10 South 20", "bbox": [420, 100, 750, 300]},
        {"type": "figure", "text": "", "bbox": [50, 400, 380, 600]},
        {"type": "text", "text": "Buy tickets", "bbox": [300, 900, 500, 950]},
    ],
    "charts": [{"box": [420, 400, 750, 600], "types": ["bar"], "names": ["Sales"], "categories": ["Jan", "Feb"]}],
}


@pytest.mark.parametrize(
    ("question", "answer", "evidence"),
    [
        ('Does the page show the title "Quarterly Report"?', "yes", '"Quarterly Report 2025" (title block at x 50–750'),
        ('Is the title "Annual Summary" shown?', "no", 'looked for the text "Annual Summary"'),
        ("Is the colour palette warm?", "unclear", "asks about 'colour'"),
        ("Is the headline easy to read against its background?", "unclear", "not colours or styles"),
        ("Does the poster show the date of the event?", "yes", 'a date: "March 14"'),
        ("Is the price of a ticket shown?", "yes", 'a price: "$25"'),
        ("Is there a ticket button at the bottom?", "yes", '"Buy tickets" (text block at x 300–500, y 900–950 px) is in the bottom third'),
        ("Is the headline at the top of the poster?", "yes", "is in the top third"),
        ("Is the table on the left half of the page?", "no", "is not in the left half"),
        ("Is there a bar chart?", "yes", "(bar chart block at x 420–750, y 400–600 px)"),
        ("Is there a pie chart?", "no", "looked for a pie chart"),
        ("Is the chart below the table?", "yes", "is below"),
        ("Is the chart beside the table?", "no", "is not beside"),
        ('Is the text "Join us" to the left of the table?', "yes", "is to the left of"),
        ("Is the content laid out in two columns?", "yes", "at most 2 blocks stand side by side"),
        ("Are there at least two tables?", "no", "counted 1 of a table on the page (at least 2 asked)"),
        ("Does it list sales by region?", "yes", 'key terms "sales", "region"'),
        ("Does the slide mention dinosaurs?", "no", "not found: dinosaurs"),
        ("Is there an image on the left?", "yes", "(figure block at x 50–380, y 400–600 px) is in the left half"),
        ("Is there no pie chart?", "yes", "asks for the opposite ('no') of: looked for a pie chart"),
        ("Is the page free of tables?", "no", "asks for the opposite ('free of') of: a table:"),
        ("Are there no more than two tables?", "yes", "counted 1 of a table on the page (no more than 2 asked)"),
        ('Is the title "Not Found" shown?', "no", 'looked for the text "Not Found"'),
        ("Is it good?", "unclear", "asks about 'good'"),
        ("Is it there?", "unclear", "names no text, element or value"),
    ],
)
def test_the_rule_answers_from_the_kept_page(question: str, answer: str, evidence: str) -> None:
    got = answer_question(question, page_of(KEPT))
    assert (got.answer, evidence in got.evidence) == (answer, True), got.evidence


def test_touching_boxes_are_not_above_each_other() -> None:
    """AesCode §E.1: elements that touch do not satisfy a relation."""
    kept: dict[str, Any] = {"page": {"width": 100, "height": 100}, "blocks": [
        {"type": "title", "text": "Top", "bbox": [0, 0, 100, 50]},
        {"type": "table", "text": "cells", "bbox": [0, 50, 100, 90]},
    ]}
    assert answer_question("Is the title above the table?", page_of(kept)).answer == "no"
    kept["blocks"][1]["bbox"] = [0, 51, 100, 90]
    assert answer_question("Is the title above the table?", page_of(kept)).answer == "yes"


# ---------------------------------------------------------------------------------------------
# A checklist study from HTML outputs, the local judge, the kind report
# ---------------------------------------------------------------------------------------------

RENDER = json.dumps({"viewport": "600x800", "mode": "canvas", "timeout_s": 8, "max_height": 800, "settle_ms": 100})
# The good system: the title at the top, the date, a table, a live bar chart (ECharts from the npm
# copy). The bad one: the title at the bottom,
# no date, no table.
GOOD = (
    "<body style='margin:0;font:16px sans-serif'><h1 style='margin:20px'>{title}</h1>"
    "<p style='margin:20px'>Saturday, May 3 at 8 pm in the town hall.</p>"
    "<table style='margin:20px'><tr><th>Seat</th><th>Price</th></tr><tr><td>Front</td><td>30</td></tr></table>"
    "<div id='chart' style='width:400px;height:200px'></div>"
    "<script src='https://cdn.jsdelivr.net/npm/echarts@5.4.3/dist/echarts.min.js'></script>"
    "<script>echarts.init(document.getElementById('chart')).setOption({{xAxis: {{type: 'category', "
    "data: ['Front', 'Back']}}, yAxis: {{type: 'value'}}, series: [{{name: 'Seats sold', type: 'bar', "
    "data: [30, 12]}}]}});</script></body>"
)
BAD = (
    "<body style='margin:0;font:16px sans-serif'><p style='margin:20px'>Music in the town hall.</p>"
    "<h1 style='position:absolute;top:700px;left:20px;margin:0'>{title}</h1></body>"
)
TITLES = {"p0": "Spring Concert", "p1": "Autumn Recital"}
QUESTIONS = (  # (question for brief p, type)
    ('Does the poster show the title "{title}"?', "Content"),
    ("Does the poster show the date of the event?", "Content"),
    ("Is there a table?", "Content"),
    ("Is there a bar chart?", "Content"),
    ("Is the headline at the top of the poster?", "Layout"),
    ("Is the colour palette warm?", "Style"),
)


@pytest.mark.browser
@pytest.mark.django_db
def test_the_local_judge_answers_a_checklist_study_from_html_outputs_with_no_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judges.providers.base import Reply
    from judges.providers.demo import Demo
    from tests.annotation.render.conftest import browser_available

    browser_available()
    root = tmp_path / "in"
    for system, html in (("good", GOOD), ("bad", BAD)):
        (root / system).mkdir(parents=True)
        for page, title in TITLES.items():
            (root / system / f"{page}.html").write_text(html.format(title=title))
    rows = ["page,system,question,type"]
    rows += [
        f'{page},{system},"{question.format(title=title).replace(chr(34), chr(34) * 2)}",{qtype}'
        for page, title in TITLES.items() for system in ("good", "bad") for question, qtype in QUESTIONS
    ]
    (tmp_path / "predicates.csv").write_text("\n".join(rows) + "\n")
    call_command(
        "new_study", "checklist", *[f"--system={s}={root / s}" for s in ("good", "bad")],
        "--predicates", str(tmp_path / "predicates.csv"), "--option", f"render={RENDER}", "--slug", "dom-checks",
        stdout=io.StringIO(), stderr=io.StringIO(),
    )
    study = Study.objects.get(slug="dom-checks")
    assert study.options.get("demo") is None  # not the demo's recorded truth
    # Each rendering keeps its page's text, for researchers and the local judge only.
    assert CandidateBlocks.objects.filter(candidate__page__study=study).count() == 4
    assert Predicate.objects.filter(study=study).count() == 24

    judge = demo_judge_ensure()
    bodies: list[bytes] = []  # what the local provider gets: the request any provider would get
    original = Demo.answer

    def recorded(self: Demo, body: bytes) -> Reply:
        bodies.append(body)
        return original(self, body)

    monkeypatch.setattr(Demo, "answer", recorded)
    out = io.StringIO()
    call_command("run_judges", study.slug, "--judge", judge.name, "--concurrency", "1", stdout=out)
    assert "valid 4, invalid 0, failed 0" in out.getvalue()
    assert len(bodies) == 4
    for body in bodies:
        parts = [p for m in json.loads(body)["messages"] if isinstance(m["content"], list) for p in m["content"]]
        prompt = " ".join(p["text"] for p in parts if p.get("type") == "text")
        assert len([p for p in parts if p.get("type") == "image_url"]) == 1
        # No system name, no page text: only the brief and the questions.
        assert "QUESTIONS" in prompt and "the poster show the date of the event?" in prompt
        assert not {"good", "bad", "saturday", "seat"} & set(prompt.lower().replace('"', " ").split())
    assert JudgeOutput.objects.filter(judge=judge, candidate__page__study=study, status="valid").count() == 4

    titled = {
        (r.predicate.candidate.page.external_id, r.predicate.candidate.system.external_id): r
        for r in JudgeChecklistAnswer.objects.filter(predicate__study=study, predicate__question__contains='title "')
        .select_related("predicate__candidate__page", "predicate__candidate__system")
    }
    for page, title in TITLES.items():
        for system in ("good", "bad"):
            row = titled[page, system]
            # The page has its title: yes, quoting it with its block.
            assert row.answer == "YES" and f'"{title}" in "{title}" (title block at' in row.evidence and row.passed
    by_question = {
        (r.predicate.candidate.system.external_id, r.predicate.question): (r.answer, r.evidence, r.passed)
        for r in JudgeChecklistAnswer.objects.filter(predicate__study=study, predicate__candidate__page__external_id="p0")
        .select_related("predicate__candidate__system")
    }
    assert by_question["good", "Does the poster show the date of the event?"][:1] == ("YES",)
    assert 'a date: "saturday"' in by_question["good", "Does the poster show the date of the event?"][1].lower()
    # The page without a date or a table: no, naming what was looked for.
    assert by_question["bad", "Does the poster show the date of the event?"][:2] == (
        "NO", "looked for a date written on the page and found none")
    assert by_question["bad", "Is there a table?"][:2] == ("NO", "looked for a table and found none on the page")
    assert by_question["good", "Is there a table?"][0] == "YES"
    chart = by_question["good", "Is there a bar chart?"]
    assert chart[0] == "YES" and chart[1].startswith('a bar chart: "Seats sold Front Back" (bar chart block at')
    assert by_question["bad", "Is there a bar chart?"][:2] == ("NO", "looked for a bar chart and found none on the page")
    assert by_question["good", "Is the headline at the top of the poster?"][0] == "YES"
    assert by_question["bad", "Is the headline at the top of the poster?"][0] == "NO"
    for system in ("good", "bad"):  # a colour question: unclear, a failure
        answer, evidence, passed = by_question[system, "Is the colour palette warm?"]
        assert answer == "UNCLEAR" and "not colours or styles" in evidence and passed is False

    # The kind report's pass rates: good passes 4/4 Content, 1/1 Layout, 0/1 Style on both briefs;
    # bad 1/4 Content (its title), 0 Layout, 0 Style.
    report = kind_report_build(study=study, resamples=50, seed=3)
    (entry,) = report["checklist"]["judges"]
    scores = {s["system"]: s for s in entry["scores"]["systems"]}
    dims = {system: {d["dimension"]: d["value"] for d in scores[system]["dimensions"]} for system in scores}
    assert dims["good"] == pytest.approx({"Content": 100.0, "Layout": 100.0, "Style": 0.0})
    assert dims["bad"] == pytest.approx({"Content": 25.0, "Layout": 0.0, "Style": 0.0})
    assert scores["good"]["visual"] == pytest.approx(200 / 3)
    assert scores["bad"]["visual"] == pytest.approx(25 / 3)
    assert scores["bad"]["visual"] > 0


@pytest.mark.django_db
def test_a_rendering_without_a_kept_page_is_unclear(tmp_path: Path) -> None:
    """An image output keeps no page text: every answer is unclear, with its reason."""
    from judges.providers.demo import LOCAL_UNCLEAR_EVIDENCE
    from judges.services.runs import judge_outputs_run_local, judge_run_start
    from tests.kind_reports.kind_report_factories import import_kind_study

    study = import_kind_study("checklist", tmp_path, slug="imgs", briefs=1, edit=None)
    candidate = Candidate.objects.filter(page__study=study).order_by("pk").first()
    assert candidate is not None and not CandidateBlocks.objects.filter(candidate__page__study=study).exists()
    judge = demo_judge_ensure()
    plan = judge_run_start(study=study, judge=judge, dispatch=False)
    assert judge_outputs_run_local(output_ids=plan.output_ids) == {"valid": 2}
    rows = list(JudgeChecklistAnswer.objects.filter(predicate__study=study))
    assert rows and {(r.answer, r.evidence) for r in rows} == {("UNCLEAR", LOCAL_UNCLEAR_EVIDENCE)}


@pytest.mark.django_db
def test_an_items_kept_page_imports_exports_and_is_checked(tmp_path: Path) -> None:
    """docs/bundle-kinds.md: an item's ``dom_blocks`` is kept as its ``CandidateBlocks``, exported
    back as read, and a malformed chart is refused naming its field."""
    from annotation.errors import ValidationFailed
    from annotation.services.bundles.exporting import study_export_bundle
    from tests.annotation.test_bundles import read_doc
    from tests.kind_reports.kind_report_factories import import_kind_study

    def with_page(doc: dict[str, Any]) -> None:
        doc["items"][0]["dom_blocks"] = KEPT

    study = import_kind_study("checklist", tmp_path, slug="kept", briefs=1, edit=with_page)
    (row,) = CandidateBlocks.objects.filter(candidate__page__study=study)
    assert row.blocks["charts"] == KEPT["charts"] and [b["text"] for b in row.blocks["blocks"]] == [
        b["text"] for b in KEPT["blocks"]
    ]
    exported = read_doc(study_export_bundle(study=study, path=tmp_path / "export"))
    assert [item.get("dom_blocks") for item in exported["items"]] == [row.blocks, None]

    def bad_chart(doc: dict[str, Any]) -> None:
        doc["items"][0]["dom_blocks"] = {**KEPT, "charts": [{"box": [0, 0, 1], "types": [], "names": [], "categories": []}]}

    with pytest.raises(ValidationFailed, match=r"items\[0\]\.dom_blocks\.charts\[0\]\.box"):
        import_kind_study("checklist", tmp_path, slug="bad-chart", briefs=1, edit=bad_chart)


def test_a_renders_shown_charts_are_summarised() -> None:
    """``chart_summaries``: a shown chart's box, series types and names, category labels; a hidden
    chart and a failed render give none."""
    from annotation.render.page_charts import chart_summaries

    chart = {
        "box": [0, 10, 200, 110], "shown": True,
        "series": [{"type": "bar", "name": "Sales"}, {"type": "line", "name": "Trend"}, {"type": "bar", "name": None}],
        "x_axes": [{"type": "category", "data": ["Mon", "Tue", 3]}], "y_axes": [{"type": "value", "data": []}],
    }
    record = {"status": "ok", "dom": {"charts": [chart, {**chart, "shown": False}]}}
    assert chart_summaries(record) == [
        {"box": [0.0, 10.0, 200.0, 110.0], "types": ["bar", "line"], "names": ["Sales", "Trend"], "categories": ["Mon", "Tue"]}
    ]
    assert chart_summaries({**record, "status": "failed"}) == []


def test_evidence_stays_within_a_replys_limit() -> None:
    long = "word " * 400
    got = answer_question(f'Does the page show "{long.strip()}"?', page_of(KEPT))
    assert got.answer == "no" and len(got.evidence) == 1_000 and got.evidence.endswith("…")
