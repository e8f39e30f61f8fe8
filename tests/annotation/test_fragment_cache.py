"""The fragment cache backend (``CACHES["fragments"]``) keeps Django's cache semantics, and the
rater views' htmx check agrees with django-htmx."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.test import RequestFactory
from django_htmx.middleware import HtmxMiddleware

from annotation import fragment_cache
from annotation.fragment_cache import ProcessMemoryCache
from annotation.views.rater import is_htmx


def _cache(**options: int) -> ProcessMemoryCache:
    return ProcessMemoryCache("test", {"OPTIONS": options} if options else {})


def test_the_settings_use_it_for_fragments() -> None:
    assert isinstance(caches["fragments"], ProcessMemoryCache)


def test_values_come_back_as_stored_and_keys_are_versioned() -> None:
    cache = _cache()
    value = ["not", "copied"]
    cache.set("k", value, None)
    assert cache.get("k") is value  # kept as it is: no pickling round trip
    assert cache.get("k", version=2) is None and cache.get("other", "dflt") == "dflt"
    assert cache.add("k", "x") is False and cache.add("j", "x") is True and cache.get("j") == "x"
    assert cache.has_key("j") and cache.delete("j") and not cache.has_key("j") and not cache.delete("j")
    cache.set("none", None)
    assert cache.has_key("none") and cache.get("none", "dflt") is None
    cache.clear()
    assert cache.get("k") is None


def test_timeouts_expire_entries_as_django_caches_do(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]  # the backend's monotonic clock, moved by hand (no sleeping in tests)
    monkeypatch.setattr(fragment_cache.time, "monotonic", lambda: clock[0])
    cache = _cache()
    cache.set("gone", 1, 0)  # 0: not stored
    assert not cache.has_key("gone")
    cache.set("short", 1, 5)
    cache.set("forever", 2, None)
    clock[0] += 4.9
    assert cache.get("short") == 1
    clock[0] += 0.2
    assert cache.get("short") is None and cache.get("forever") == 2
    assert cache.touch("forever", 5) and not cache.touch("short")
    clock[0] += 5.1
    assert cache.get("forever") is None


def test_a_full_cache_forgets_its_oldest_half() -> None:
    cache = _cache(MAX_ENTRIES=10)
    for i in range(10):
        cache.set(f"k{i}", i, None)
    cache.set("new", "n", None)
    kept = [i for i in range(10) if cache.has_key(f"k{i}")]
    assert kept == list(range(5, 10)) and cache.get("new") == "n"


@pytest.mark.parametrize("header", [None, "true", "false", "True", ""])
def test_is_htmx_agrees_with_django_htmx(header: str | None) -> None:
    extra = {} if header is None else {"HTTP_HX_REQUEST": header}
    request = RequestFactory().get("/", **extra)
    HtmxMiddleware(lambda r: None)(request)  # type: ignore[arg-type,return-value]
    assert is_htmx(request) is bool(request.htmx) is (header == "true")  # type: ignore[attr-defined]
