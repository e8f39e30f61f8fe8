"""The one error family of the statistics package.

Every function of ``stats`` that refuses its input raises a ``StatisticsError``; it is a
``ValueError``, so callers that map a ``ValueError`` to HTTP 400 or exit status 1 keep doing so. The
message names the column and row (or the argument) of the first problem. The subclasses say which
input was refused, for callers that report one of them differently.
"""

from __future__ import annotations


class StatisticsError(ValueError):
    """A statistic cannot be computed from these inputs (the message says why)."""


class InvalidVotes(StatisticsError):
    """The votes frame does not follow docs/protocol.md "Human reference and agreement", "Files" (message
    names the column and row)."""


class InvalidKindData(StatisticsError):
    """An input frame of a docs/study-kinds.md "The kind report" analysis is malformed (the message names the
    column and row)."""


class AblationError(StatisticsError):
    """The inputs cannot support the nested judge ablation (message says why)."""
