"""Report and export files are written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import overload


def write_text_atomic(path: Path, text: str) -> None:
    """Write beside the target and move it into place: a failure leaves no partial file."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@overload
def output_path_check(path: Path | str, *, option: str = "") -> Path: ...
@overload
def output_path_check(path: None, *, option: str = "") -> None: ...
@overload
def output_path_check(path: Path | str | None, *, option: str = "") -> Path | None: ...
def output_path_check(path: Path | str | None, *, option: str = "") -> Path | None:
    """Refuse, before any work, an output file whose folder does not exist (one line, nothing written).

    Every command that writes a file (``--json``, ``--html``, ``--csv``, an export ``PATH``) checks its
    paths here first; ``option`` names the flag in the message. Returns the path as a ``Path``.
    """
    from annotation.errors import ValidationFailed

    if path is None:
        return None
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise ValidationFailed("the folder does not exist", where=str(folder), field=option)
    return path


def write_texts_atomic(files: list[tuple[Path, str]]) -> None:
    """Write several report files all or none: every folder is checked, then each is written whole."""
    for path, _text in files:
        output_path_check(path)
    for path, text in files:
        write_text_atomic(Path(path), text)
