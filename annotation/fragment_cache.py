"""The trial page's fragment cache: a dict in each process, values kept as they are (``CACHES["fragments"]``).

The trial page renders its unchanging fragments (answer choices, shortcut list) once per process
through Django's ``{% cache %}`` tag. Django's ``LocMemCache`` pickles every value, validates
every key for memcached and takes a lock per call: 2.6 % of an answer's CPU for a few dictionary
reads. The fragments are immutable strings whose keys the tag computes itself (an MD5 digest),
so this backend stores them as they are, in insertion order, and forgets the oldest half when
it holds more than ``MAX_ENTRIES``. Expiry is honoured as in ``LocMemCache``. Never shared
between processes, never for anything a request can change.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache

_MISSING = object()


class ProcessMemoryCache(BaseCache):
    def __init__(self, location: str, params: dict[str, Any]) -> None:
        super().__init__(params)
        self._data: dict[str, tuple[Any, float | None]] = {}

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        found = self._data.get(self.make_key(key, version))
        if found is None:
            return default
        value, expires = found
        if expires is not None and expires <= time.monotonic():
            self._data.pop(self.make_key(key, version), None)
            return default
        return value

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        seconds = self._seconds(timeout)
        if seconds is not None and seconds <= 0:
            self._data.pop(self.make_key(key, version), None)
            return
        if len(self._data) >= self._max_entries:
            for old in list(self._data)[: max(1, len(self._data) // 2)]:
                self._data.pop(old, None)
        self._data[self.make_key(key, version)] = (value, None if seconds is None else time.monotonic() + seconds)

    def _seconds(self, timeout: Any) -> float | None:
        if timeout is DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        return None if timeout is None else float(timeout)

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        if self.has_key(key, version):
            return False
        self.set(key, value, timeout, version)
        return True

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        value = self.get(key, _MISSING, version)
        if value is _MISSING:
            return False
        self.set(key, value, timeout, version)
        return True

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._data.pop(self.make_key(key, version), _MISSING) is not _MISSING

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self.get(key, _MISSING, version) is not _MISSING

    def clear(self) -> None:
        self._data.clear()
