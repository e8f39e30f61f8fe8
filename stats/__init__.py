"""The statistics of docs/protocol.md "Human reference and agreement" to "Deployment leaderboard" and
docs/study-kinds.md "The kind report", Django-free: arrays and frames in, frozen dataclasses out.

Every protocol formula lives in one function here. No module imports Django, DRF or a project app
(tests/test_architecture.py checks it); every app may use this package. Bad input raises a
``stats.errors.StatisticsError`` (a ``ValueError``) whose message names the column and row.
"""
