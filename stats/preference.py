"""The canonical vote encoding (SPEC §3): A = 1, TIE = 0.5, B = 0.

Pure: no Django, no pandas. Judge votes (SPEC §6, §7) and the human reference (SPEC §5) use this
one encoding; CANNOT_JUDGE and anything else have no value.
"""

from __future__ import annotations

from collections.abc import Mapping

VOTE_VALUE: Mapping[str, float] = {"A": 1.0, "TIE": 0.5, "B": 0.0}
