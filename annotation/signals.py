"""Signals the ground-floor app sends so that apps built on it can react without being imported.

``candidates_replacing`` is sent inside the update's transaction *before* any row changes, with
``study``, ``comparison_ids`` (the comparisons that touch a replaced candidate) and
``candidate_ids`` (the replaced candidates themselves); a receiver
refuses the update by raising an :class:`~annotation.errors.ArbiterError` (e.g. judge calls
still running on them). ``candidates_replaced`` is sent after the candidates changed, in the same
transaction; each receiver returns ``{name: count}`` of what it did (e.g. outputs superseded).
"""

from __future__ import annotations

from django.dispatch import Signal

candidates_replacing = Signal()
candidates_replaced = Signal()
