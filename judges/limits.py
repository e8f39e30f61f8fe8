"""Per-judge rate and concurrency limits that hold across workers (docs/protocol.md "Judges and calibration"
judge limits).

Two implementations of one small interface, chosen by :func:`limiter_for`:

- :class:`RedisLimiter` when the Celery broker is Redis: a semaphore kept as a sorted set of
  holders scored by their expiry (a crashed worker's slot frees itself when its expiry passes) and
  a token bucket (rate r/s, burst max(1, r)); both are single Lua scripts timed by the Redis clock,
  so every worker on every host sees the same limits.
- :class:`LocalLimiter` otherwise (eager tasks, the benchmark): a semaphore and a token bucket in
  this process, shared by its threads.

``slot(key, ...)`` is a context manager: it waits for a rate token, then for a free slot, calling
``heartbeat`` at least every few seconds while it waits (the caller renews its lease there).

Two more shared signals, in the same store (the broker's Redis, or this process):
- ``pause(limits, seconds)`` after a 429: every worker holds its next call of that judge until
  the provider's reset time (``paused_for`` says how long is left);
- ``stop(limits, reason)`` after an auth failure or exhausted quota: no worker calls that judge
  until ``run_judges`` starts it again (``clear_stop``); ``stopped`` returns the reason.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from django.conf import settings

HEARTBEAT_SECONDS = 5.0


@dataclass(frozen=True)
class Limits:
    key: str  # unique per judge (its id and creation time)
    concurrency: int
    rate_per_second: float | None
    hold_seconds: float  # a slot held longer than this is presumed dead and freed


STOP_SECONDS = 24 * 3600.0


class Limiter(Protocol):
    def slot(self, limits: Limits, heartbeat: Callable[[], None] | None = None) -> contextlib.AbstractContextManager[None]:
        ...

    def pause(self, limits: Limits, seconds: float) -> None: ...

    def paused_for(self, limits: Limits) -> float: ...

    def stop(self, limits: Limits, reason: str) -> None: ...

    def stopped(self, limits: Limits) -> str | None: ...

    def clear_stop(self, limits: Limits) -> None: ...


def _pause(seconds: float) -> float:
    return min(max(seconds, 0.005), 0.25) * random.uniform(0.8, 1.2)


class LocalLimiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._semaphores: dict[str, tuple[int, threading.BoundedSemaphore]] = {}
        self._buckets: dict[str, list[float]] = {}  # key -> [tokens, last refill (monotonic)]
        self._paused: dict[str, float] = {}  # key -> until (monotonic)
        self._stopped: dict[str, str] = {}

    def pause(self, limits: Limits, seconds: float) -> None:
        with self._lock:
            until = time.monotonic() + max(seconds, 0.0)
            self._paused[limits.key] = max(until, self._paused.get(limits.key, 0.0))

    def paused_for(self, limits: Limits) -> float:
        with self._lock:
            return max(0.0, self._paused.get(limits.key, 0.0) - time.monotonic())

    def stop(self, limits: Limits, reason: str) -> None:
        with self._lock:
            self._stopped[limits.key] = reason

    def stopped(self, limits: Limits) -> str | None:
        with self._lock:
            return self._stopped.get(limits.key)

    def clear_stop(self, limits: Limits) -> None:
        with self._lock:
            self._stopped.pop(limits.key, None)
            self._paused.pop(limits.key, None)

    def _semaphore(self, limits: Limits) -> threading.BoundedSemaphore:
        with self._lock:
            held = self._semaphores.get(limits.key)
            if held is None or held[0] != limits.concurrency:
                held = (limits.concurrency, threading.BoundedSemaphore(max(limits.concurrency, 1)))
                self._semaphores[limits.key] = held
            return held[1]

    def _take_token(self, limits: Limits) -> float:
        """0 when a token was taken, else the seconds until one is due."""
        rate = limits.rate_per_second
        if not rate:
            return 0.0
        capacity = max(1.0, rate)
        now = time.monotonic()
        with self._lock:
            bucket = self._buckets.setdefault(limits.key, [capacity, now])
            bucket[0] = min(capacity, bucket[0] + (now - bucket[1]) * rate)
            bucket[1] = now
            if bucket[0] >= 1.0:
                bucket[0] -= 1.0
                return 0.0
            return (1.0 - bucket[0]) / rate

    @contextlib.contextmanager
    def slot(self, limits: Limits, heartbeat: Callable[[], None] | None = None) -> Iterator[None]:
        last = time.monotonic()
        semaphore = self._semaphore(limits)
        while not semaphore.acquire(timeout=0.5):
            if heartbeat and time.monotonic() - last > HEARTBEAT_SECONDS:
                heartbeat()
                last = time.monotonic()
        try:
            while (wait := self._take_token(limits)) > 0:
                time.sleep(min(wait, 0.5))
                if heartbeat and time.monotonic() - last > HEARTBEAT_SECONDS:
                    heartbeat()
                    last = time.monotonic()
            yield
        finally:
            semaphore.release()


# KEYS[1] semaphore zset; ARGV: limit, hold ms, token. Returns 1 when acquired.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 60000)
  return 1
end
return 0
"""

# KEYS[1] bucket hash; ARGV: rate per second, capacity. Returns 0 when a token was taken, else ms to wait.
_TOKEN = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate = tonumber(ARGV[1]) / 1000
local capacity = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate) + 60000)
return wait
"""


# KEYS[1] pause key; ARGV: ms. Extends the pause, never shortens it.
_PAUSE = """
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', tonumber(ARGV[1]))
end
return 1
"""


class RedisLimiter:
    def __init__(self, url: str) -> None:
        import redis

        self._redis = redis.Redis.from_url(url)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._token = self._redis.register_script(_TOKEN)
        self._pause = self._redis.register_script(_PAUSE)

    @staticmethod
    def _key(limits: Limits, what: str) -> str:
        return f"arbiter:judge-limits:{limits.key}:{what}"

    def pause(self, limits: Limits, seconds: float) -> None:
        self._pause(keys=[self._key(limits, "paused")], args=[max(int(seconds * 1000), 1)])

    def paused_for(self, limits: Limits) -> float:
        ms = self._redis.pttl(self._key(limits, "paused"))
        return max(0.0, ms / 1000) if ms and ms > 0 else 0.0

    def stop(self, limits: Limits, reason: str) -> None:
        self._redis.set(self._key(limits, "stopped"), reason.encode(), ex=int(STOP_SECONDS))

    def stopped(self, limits: Limits) -> str | None:
        value = self._redis.get(self._key(limits, "stopped"))
        if not value:
            return None
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)

    def clear_stop(self, limits: Limits) -> None:
        self._redis.delete(self._key(limits, "stopped"), self._key(limits, "paused"))

    @contextlib.contextmanager
    def slot(self, limits: Limits, heartbeat: Callable[[], None] | None = None) -> Iterator[None]:
        sem_key = f"arbiter:judge-limits:{limits.key}:slots"
        bucket_key = f"arbiter:judge-limits:{limits.key}:bucket"
        hold_ms = int(limits.hold_seconds * 1000)
        token = uuid.uuid4().hex
        last = time.monotonic()
        while not self._acquire(keys=[sem_key], args=[max(limits.concurrency, 1), hold_ms, token]):
            time.sleep(_pause(0.05))
            if heartbeat and time.monotonic() - last > HEARTBEAT_SECONDS:
                heartbeat()
                last = time.monotonic()
        try:
            if limits.rate_per_second:
                capacity = max(1.0, limits.rate_per_second)
                while (wait_ms := int(self._token(keys=[bucket_key], args=[limits.rate_per_second, capacity]))) > 0:
                    time.sleep(min(wait_ms / 1000, 0.5))
                    if heartbeat and time.monotonic() - last > HEARTBEAT_SECONDS:
                        heartbeat()
                        last = time.monotonic()
            yield
        finally:
            self._redis.zrem(sem_key, token)


_local = LocalLimiter()
_redis_limiters: dict[str, RedisLimiter] = {}
_redis_lock = threading.Lock()


def limiter_for() -> Limiter:
    """Redis limits when the broker is Redis (shared by every worker), else in-process ones."""
    url = getattr(settings, "CELERY_BROKER_URL", None) or ""
    if not url.startswith(("redis://", "rediss://")):
        return _local
    with _redis_lock:
        limiter = _redis_limiters.get(url)
        if limiter is None:
            limiter = RedisLimiter(url)
            _redis_limiters[url] = limiter
        return limiter
