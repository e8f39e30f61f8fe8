"""``manage.py score_pages``: folders of truth and predictions scored with no study, resumable,
bad truth reported per page (docs/protocol.md "Scoring folders: score_pages")."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from objective.blocks import parse_truth
from objective.score import score_page
from tests.annotation.render.conftest import browser_available

TABLE = "<table><tr><th>k</th><th>v</th></tr><tr><td>speed</td><td>42</td></tr></table>"


def truth(blocks: list[dict[str, object]]) -> dict[str, object]:
    return {"page": {"width": 1000, "height": 1000}, "blocks": blocks}


P1 = truth(
    [
        {"type": "title", "text": "Annual report", "bbox": [100, 50, 900, 120]},
        {"type": "text", "text": "Revenue grew in every region this year.", "bbox": [100, 150, 900, 250]},
        {"type": "table", "text": "k v speed 42", "html": TABLE, "bbox": [100, 300, 900, 600]},
    ]
)
P2 = truth([{"type": "text", "text": "Only words on this page.", "bbox": [0, 0, 500, 100]}])
P1_TYPO = truth(
    [
        {"type": "title", "text": "Annual report", "bbox": [100, 50, 900, 120]},
        {"type": "text", "text": "Revenue grew in every regions this year.", "bbox": [100, 150, 900, 250]},
        {"type": "table", "text": "", "html": TABLE.replace("42", "43"), "bbox": [100, 300, 900, 600]},
    ]
)


def write(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(*args: str, terminal: bool = False) -> tuple[str, str]:
    stdout, stderr = io.StringIO(), FakeTerminal() if terminal else io.StringIO()
    call_command("score_pages", *args, stdout=stdout, stderr=stderr)
    return stdout.getvalue(), stderr.getvalue()


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    truth_dir, pred_dir = tmp_path / "truth", tmp_path / "pred"
    write(truth_dir / "p1.json", P1)
    write(truth_dir / "p2.json", P2)
    write(pred_dir / "exact" / "p1.json", P1)
    write(pred_dir / "exact" / "p2.json", P2)
    write(pred_dir / "typo" / "p1.json", P1_TYPO)  # and no p2: scored as an empty page
    write(pred_dir / "typo" / "stray.json", P2)  # no truth: not scored
    return truth_dir, pred_dir


def test_folders_are_scored_per_page_and_per_system_and_resumed(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    truth_dir, pred_dir = folders
    out = tmp_path / "scores.json"
    stdout, stderr = run(
        "--truth", str(truth_dir), "--pred", str(pred_dir), "--json", str(out), "--workers", "2"
    )
    assert "2 pages x 2 systems: 4 scored; 1 missing predictions scored as empty pages" in stdout
    assert "typo" in stderr and "1 page(s) with no ground truth" in stderr
    report = json.loads(out.read_text())
    pages = report["pages"]
    assert set(pages) == {"p1", "p2"} and set(pages["p1"]) == {"exact", "typo"}
    assert (
        pages["p1"]["exact"]["teds"],
        pages["p1"]["exact"]["d_text"],
        pages["p1"]["exact"]["s_layout"],
    ) == (1.0, 0.0, 1.0)
    # The command's figures are score_page's on the same pages.
    typo = score_page(parse_truth(P1), parse_truth(P1_TYPO))
    assert pages["p1"]["typo"]["teds"] == pytest.approx(typo.teds)
    assert pages["p1"]["typo"]["d_text"] == pytest.approx(typo.d_text)
    assert pages["p2"]["typo"]["d_text"] == 1.0 and pages["p2"]["typo"]["note"].startswith("no prediction")
    exact = report["systems"]["exact"]
    assert (exact["teds"], exact["d_text"], exact["s_layout"], exact["s_obj"]) == (
        1.0,
        0.0,
        1.0,
        pytest.approx(1.0),
    )
    assert exact["n_table_pages"] == 1 and exact["n_pages"] == 2
    # S_obj from the means: TEDS over p1 only, text and layout over both pages.
    typo_sys = report["systems"]["typo"]
    d_text = (typo.d_text + 1.0) / 2
    s_layout = (typo.s_layout + pages["p2"]["typo"]["s_layout"]) / 2
    assert typo_sys["s_obj"] == pytest.approx((0.3 * typo.teds + (1 - d_text) + s_layout) / 2.3)

    # Run again: everything comes from the cache; a new file alone is scored. Scores are keyed by
    # content, so a file identical to one scored before (the exact system's p2) would be kept.
    stdout, stderr = run(
        "--truth", str(truth_dir), "--pred", str(pred_dir), "--json", str(out), terminal=True
    )
    assert "0 scored, 4 kept from an earlier run" in stdout
    assert "score_pages: scoring 4/4 (100%)" in stderr and "\r" not in stdout  # progress on the terminal only
    write(
        pred_dir / "typo" / "p2.json",
        truth([{"type": "text", "text": "Only words on this page!", "bbox": [0, 0, 500, 100]}]),
    )
    stdout, _ = run("--truth", str(truth_dir), "--pred", str(pred_dir), "--json", str(out))
    assert "1 scored, 3 kept from an earlier run" in stdout
    # "Onlywordsonthispage." against "...page!": one substitution in 20 characters.
    assert json.loads(out.read_text())["pages"]["p2"]["typo"]["d_text"] == pytest.approx(1 / 20)


def test_bad_truth_is_reported_per_page_and_nothing_else_is_lost(
    folders: tuple[Path, Path], tmp_path: Path
) -> None:
    truth_dir, pred_dir = folders
    bad = truth([{"type": "text", "text": "secret words", "bbox": [0, 0, 5000, 10]}])
    write(truth_dir / "p3.json", bad)
    (truth_dir / "p4.json").write_text("{not json")
    out = tmp_path / "scores.json"
    with pytest.raises(CommandError, match=r"^2 of 4 truth pages could not be read"):
        run("--truth", str(truth_dir), "--pred", str(pred_dir), "--json", str(out), "--workers", "1")
    report = json.loads(out.read_text())
    assert report["errors"] == {
        "p3": "p3.json: blocks[0].bbox: outside the page 0..1000 x 0..1000",
        "p4": "p4.json: not JSON (line 1, column 2)",
    }
    assert "secret" not in json.dumps(report["errors"])
    assert set(report["pages"]) == {"p1", "p2"} and report["systems"]["exact"]["n_pages"] == 2


def test_one_line_errors_for_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"^--truth .*: no such folder$"):
        run("--truth", str(tmp_path / "none"), "--pred", str(tmp_path), "--json", str(tmp_path / "o.json"))
    (tmp_path / "t").mkdir()
    (tmp_path / "p").mkdir()
    with pytest.raises(CommandError, match=r"^--truth .*: no pages"):
        run("--truth", str(tmp_path / "t"), "--pred", str(tmp_path / "p"), "--json", str(tmp_path / "o.json"))
    write(tmp_path / "t" / "a.json", P2)
    with pytest.raises(CommandError, match=r"^--pred .*: no system folders"):
        run("--truth", str(tmp_path / "t"), "--pred", str(tmp_path / "p"), "--json", str(tmp_path / "o.json"))
    (tmp_path / "p" / "s").mkdir()
    (tmp_path / "p" / "s" / "a.json").symlink_to("/etc/passwd")
    with pytest.raises(CommandError, match=r"a link; pages and their files are never read through a link"):
        run("--truth", str(tmp_path / "t"), "--pred", str(tmp_path / "p"), "--json", str(tmp_path / "o.json"))


@pytest.mark.browser
@pytest.mark.slow
def test_html_truth_and_predictions_are_rendered_and_scored(tmp_path: Path) -> None:
    browser_available()
    html = (
        "<body style='margin:0;font:16px sans-serif'><h1>Quarterly figures</h1>"
        "<p>Sales rose by a tenth over the quarter.</p>" + TABLE + "</body>"
    )
    (tmp_path / "truth").mkdir()
    (tmp_path / "truth" / "q.html").write_text(html)
    (tmp_path / "pred" / "same").mkdir(parents=True)
    (tmp_path / "pred" / "same" / "q.html").write_text(html)
    out = tmp_path / "scores.json"
    run(
        "--truth",
        str(tmp_path / "truth"),
        "--pred",
        str(tmp_path / "pred"),
        "--json",
        str(out),
        "--viewport",
        "800x600",
        "--workers",
        "1",
    )
    page = json.loads(out.read_text())["pages"]["q"]["same"]
    assert (page["teds"], page["d_text"], page["s_layout"]) == (1.0, 0.0, 1.0)
    assert (tmp_path / "scores.json.cache" / "renders" / "truth" / "q.json").is_file()


def test_a_report_written_into_the_truth_folder_is_no_page(folders: tuple[Path, Path]) -> None:
    truth_dir, pred_dir = folders
    out = truth_dir / "scores.json"
    run("--truth", str(truth_dir), "--pred", str(pred_dir), "--json", str(out), "--workers", "1")
    stdout, _ = run("--truth", str(truth_dir), "--pred", str(pred_dir), "--json", str(out), "--workers", "1")
    assert stdout.startswith("2 pages x 2 systems")
    assert json.loads(out.read_text())["errors"] == {}
