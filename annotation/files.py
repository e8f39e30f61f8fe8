"""Report and export files are written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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


def output_folders_check(*paths: Path | None) -> None:
    """Refuse, before any work, an output file whose folder does not exist (one line, nothing written)."""
    from annotation.errors import ValidationFailed

    for path in paths:
        if path is None:
            continue
        folder = Path(path).parent if str(Path(path).parent) else Path(".")
        if not folder.is_dir():
            raise ValidationFailed("the folder does not exist", where=str(folder))


def write_texts_atomic(files: list[tuple[Path, str]]) -> None:
    """Write several report files all or none: every folder is checked, then each is written whole."""
    output_folders_check(*(path for path, _text in files))
    for path, text in files:
        write_text_atomic(Path(path), text)
