"""Login throttling that holds under concurrency and behind a proxy (SECURITY.md row 18).

Attempts are counted atomically before the password is checked, per (account, client address)
and per account; the client address comes from a trusted proxy's ``X-Forwarded-For`` only when
the deployment names the proxy. A lockout of one address never refuses another account's right
password.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.cache import cache
from django.db import connections
from django.test import Client

from annotation.client_address import client_address_from

PASSWORD = "pw-arbiter-123"
PROXY = "10.0.0.2"
LOGIN = "/accounts/login/"
TOKEN = "/api/auth/token/"


@pytest.fixture(autouse=True)
def _fresh_counters() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def password_checks() -> Iterator[list[str]]:
    """Every completed password check (Django's own signals, sent by ``authenticate``/``login``)."""
    seen: list[str] = []
    lock = threading.Lock()

    def failed(sender: object, credentials: dict[str, str], **kw: object) -> None:
        with lock:
            seen.append("failed")

    def passed(sender: object, user: object, **kw: object) -> None:
        with lock:
            seen.append("passed")

    user_login_failed.connect(failed, dispatch_uid="throttle-test-failed")
    user_logged_in.connect(passed, dispatch_uid="throttle-test-passed")
    yield seen
    user_login_failed.disconnect(dispatch_uid="throttle-test-failed")
    user_logged_in.disconnect(dispatch_uid="throttle-test-passed")


def _post(
    url: str, username: str, password: str, client_ip: str | None = None, remote: str = "127.0.0.1"
) -> int:
    extra = {"REMOTE_ADDR": remote}
    if client_ip is not None:
        extra["HTTP_X_FORWARDED_FOR"] = f"{client_ip}, {remote}" if remote != PROXY else client_ip
    return Client().post(url, {"username": username, "password": password}, **extra).status_code


def _ok(url: str, status: int) -> bool:
    return status == (302 if url == LOGIN else 200)


def _at_once(n: int, call: Callable[[int], int]) -> list[int]:
    barrier = threading.Barrier(n)
    results: list[int] = [0] * n

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = call(i)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("url", [LOGIN, TOKEN])
def test_forty_concurrent_wrong_passwords_get_at_most_the_limit_of_checks(
    url: str, researcher: object, password_checks: list[str], settings: object
) -> None:
    statuses = _at_once(40, lambda i: _post(url, "rita-researcher", f"wrong-{i}"))
    assert password_checks.count("failed") <= 5
    assert statuses.count(429) >= 35
    # ... and the right password is refused too for the rest of the window, from this address.
    assert _post(url, "rita-researcher", PASSWORD) == 429
    assert "passed" not in password_checks


@pytest.mark.django_db
@pytest.mark.parametrize("url", [LOGIN, TOKEN])
def test_behind_a_trusted_proxy_one_attacker_does_not_lock_out_others(
    url: str, settings: object, researcher: object, admin_user: object
) -> None:
    settings.ARBITER_TRUSTED_PROXIES = [PROXY]  # type: ignore[attr-defined]
    attacker = "203.0.113.9"
    for account in ("rita-researcher", "ada-admin"):
        for _ in range(10):
            assert _post(url, account, "guess", attacker, remote=PROXY) in (400, 200, 429)
        assert _post(url, account, PASSWORD, attacker, remote=PROXY) == 429
    # Everyone else arrives through the same proxy (same REMOTE_ADDR) and logs in.
    assert _ok(url, _post(url, "rita-researcher", PASSWORD, "198.51.100.7", remote=PROXY))
    assert _ok(url, _post(url, "ada-admin", PASSWORD, "198.51.100.8", remote=PROXY))
    # A spoofed left-most X-Forwarded-For entry does not give the attacker a fresh address.
    spoofed = Client().post(
        url,
        {"username": "rita-researcher", "password": PASSWORD},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR=f"192.0.2.1, {attacker}",
    )
    assert spoofed.status_code == 429


@pytest.mark.django_db
@pytest.mark.parametrize("url", [LOGIN, TOKEN])
def test_one_shared_address_locked_out_of_one_account_keeps_every_other_account(
    url: str, researcher: object, admin_user: object
) -> None:
    """No proxy configured (or a NAT): everyone has one REMOTE_ADDR. Guessing at one account does
    not refuse another account's right password from that same address."""
    for _ in range(8):
        _post(url, "rita-researcher", "guess")
    assert _post(url, "rita-researcher", PASSWORD) == 429
    assert _ok(url, _post(url, "ada-admin", PASSWORD))
    assert _post(url, "rita-researcher", PASSWORD, remote="127.0.0.9") in (200, 302)  # another address


@pytest.mark.django_db
def test_without_a_trusted_proxy_x_forwarded_for_is_ignored(researcher: object) -> None:
    for i in range(6):
        Client().post(
            LOGIN, {"username": "rita-researcher", "password": "guess"}, HTTP_X_FORWARDED_FOR=f"192.0.2.{i}"
        )
    assert _post(LOGIN, "rita-researcher", PASSWORD, "192.0.2.77") == 429


@pytest.mark.django_db
def test_an_account_guessed_at_from_many_addresses_is_locked_at_its_own_limit(
    researcher: object, settings: object
) -> None:
    settings.ARBITER_TRUSTED_PROXIES = [PROXY]  # type: ignore[attr-defined]
    for address in range(4):  # 4 addresses × 5 = the account limit of 20
        for _ in range(5):
            _post(LOGIN, "rita-researcher", "guess", f"198.51.100.{address}", remote=PROXY)
    assert _post(LOGIN, "rita-researcher", PASSWORD, "198.51.100.200", remote=PROXY) == 429


@pytest.mark.django_db
def test_a_success_resets_its_address_and_logging_in_often_is_never_locked(researcher: object) -> None:
    for _ in range(12):
        assert _post(TOKEN, "rita-researcher", PASSWORD) == 200
    for _ in range(4):
        _post(LOGIN, "rita-researcher", "guess")
    assert _post(LOGIN, "rita-researcher", PASSWORD) == 302
    for _ in range(4):
        _post(LOGIN, "rita-researcher", "guess")
    assert _post(LOGIN, "rita-researcher", PASSWORD) == 302


@pytest.mark.parametrize(
    ("meta", "trusted", "hops", "expected"),
    [
        ({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}, (), 0, "10.0.0.2"),
        (
            {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "9.9.9.9, 1.2.3.4"},
            ("10.0.0.0/8",),
            0,
            "1.2.3.4",
        ),
        (
            {"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "9.9.9.9, 1.2.3.4, 10.0.0.7"},
            ("10.0.0.0/8",),
            0,
            "1.2.3.4",
        ),
        ({"REMOTE_ADDR": "8.8.8.8", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}, ("10.0.0.0/8",), 0, "8.8.8.8"),
        (
            {"REMOTE_ADDR": "::ffff:10.0.0.2", "HTTP_X_FORWARDED_FOR": "[2001:db8::1]:443"},
            ("10.0.0.2",),
            0,
            "2001:db8::1",
        ),
        ({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "9.9.9.9, 1.2.3.4, 10.1.1.1"}, (), 2, "1.2.3.4"),
        ({"REMOTE_ADDR": "10.0.0.2", "HTTP_X_FORWARDED_FOR": "1.2.3.4"}, (), 2, "10.0.0.2"),
    ],
)
def test_client_address_rules(
    meta: dict[str, str], trusted: tuple[str, ...], hops: int, expected: str
) -> None:
    assert client_address_from(meta, trusted_proxies=trusted, proxy_hops=hops) == expected


@pytest.mark.django_db
def test_a_logged_in_user_guessing_another_account_is_throttled(
    rater_user: object, researcher: object, password_checks: list[str]
) -> None:
    """A wrong password posted from a logged-in session left ``request.user`` authenticated (as the
    guesser), which counted as a success and reset the counters: unlimited guesses."""
    client = Client()
    client.force_login(rater_user)  # type: ignore[arg-type]
    statuses = [
        client.post(LOGIN, {"username": "rita-researcher", "password": f"wrong-{i}"}).status_code
        for i in range(8)
    ]
    assert statuses[:5] == [200] * 5 and statuses[5:] == [429] * 3, statuses
    assert password_checks.count("failed") == 5


@pytest.mark.django_db
def test_unicode_compatibility_variants_of_a_username_share_its_counters(
    researcher: object, password_checks: list[str]
) -> None:
    """The login form NFKC-normalizes the username before the password check, so 'ｒｉｔａ-researcher'
    (fullwidth) and '𝐫ita-researcher' test rita-researcher's password: they must count as her."""
    variants = [
        "rita-researcher",
        "ｒｉｔａ-researcher",
        "𝐫ita-researcher",
        "RITA-researcher",
        "rita-ｒesearcher",
        "ri𝘵a-researcher",
        "rit𝒂-researcher",
        "ⓡita-researcher",
    ]
    statuses = [_post(LOGIN, name, f"wrong-{i}") for i, name in enumerate(variants)]
    assert statuses.count(429) >= len(variants) - 5, statuses
    assert password_checks.count("failed") <= 5
