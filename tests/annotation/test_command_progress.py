"""Issue 17: long commands show progress on a terminal and stay quiet otherwise."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.progress import progress_step, terminal_progress
from tests.annotation.rater_factories import make_rater_study


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_and_cleared() -> None:
    tty = FakeTerminal()
    with terminal_progress("export_study", tty) as shown:
        assert shown
        progress_step("writing images", 3, 4)
        progress_step("writing images", 4, 4)
    text = tty.getvalue()
    assert "export_study: writing images 4/4 (100%)" in text
    assert text.endswith("\r")  # the status line is wiped at the end


def test_progress_is_silent_without_a_terminal() -> None:
    plain = io.StringIO()
    with terminal_progress("export_study", plain) as shown:
        assert not shown
        progress_step("writing images", 1, 2)
    assert plain.getvalue() == ""
    progress_step("no reporter installed")  # a no-op outside any command


@pytest.mark.django_db
def test_export_and_import_commands_report_progress_only_on_a_terminal(tmp_path: Path) -> None:
    rs = make_rater_study(slug="progress", failed_render=False, deployment_extra=0)
    tty, plain, out = FakeTerminal(), io.StringIO(), io.StringIO()
    call_command("export_study", rs.study.slug, str(tmp_path / "a.zip"), stdout=out, stderr=tty)
    assert "export_study: writing images" in tty.getvalue() and "%)" in tty.getvalue()
    assert "\r" not in out.getvalue()  # stdout stays clean
    call_command("export_study", rs.study.slug, str(tmp_path / "b.zip"), stdout=io.StringIO(), stderr=plain)
    assert plain.getvalue() == ""
    rs.study.delete()
    tty = FakeTerminal()
    call_command("import_study", str(tmp_path / "a.zip"), stdout=io.StringIO(), stderr=tty)
    assert "import_study: cleaning images" in tty.getvalue() and "writing the study" in tty.getvalue()
