"""Judge URLs: every IPv6 form of a metadata address is refused, and a call connects to the very
address that was checked, then verifies the peer (SECURITY.md row 20)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpcore
import httpx
import pytest

from annotation.errors import ValidationFailed
from judges import egress, pinned
from judges.providers import check_base_url
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider
from tests.judges.test_calls import call


@pytest.mark.parametrize(
    "host",
    [
        "[64:ff9b::a9fe:a9fe]",  # NAT64 (RFC 6052 well-known prefix) of 169.254.169.254
        "[64:ff9b::169.254.169.254]",
        "[64:ff9b::6464:64c8]",  # NAT64 of Alibaba's 100.100.100.200
        "[64:ff9b:1::a9fe:a9fe]",  # local-use NAT64 prefix (RFC 8215)
        "[::ffff:169.254.169.254]",  # IPv4-mapped
        "[::ffff:a9fe:a9fe]",
        "[::ffff:0:a9fe:a9fe]",  # IPv4-translated (SIIT)
        "[::169.254.169.254]",  # IPv4-compatible
        "[2002:a9fe:a9fe::1]",  # 6to4
        "[2001:0:4136:e378:8000:63bf:5601:5601]",  # Teredo, client 169.254.169.254
        "[fe80::1]",
        "[fd00:ec2::254]",
    ],
)
def test_every_ipv6_form_of_a_metadata_address_is_refused(host: str) -> None:
    with pytest.raises(ValidationFailed, match="link-local or cloud-metadata"):
        check_base_url(f"http://{host}/v1")


@pytest.mark.parametrize("host", ["[64:ff9b::808:808]", "[::ffff:127.0.0.1]", "[::1]", "127.0.0.1", "[2002:808:808::1]"])
def test_mapped_forms_of_other_addresses_pass(host: str) -> None:
    assert check_base_url(f"http://{host}/v1") == f"http://{host}/v1"


def test_a_numeric_host_that_resolves_to_metadata_is_refused_at_call_time() -> None:
    check_base_url("http://2852039166/v1")  # not an address literal Python parses
    with pytest.raises(ValidationFailed, match="link-local"):
        check_base_url("http://2852039166/v1", resolve=True)  # the resolver reads it as 169.254.169.254


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    provider = FakeProvider(inspect=False).start()
    yield provider
    provider.stop()


@pytest.fixture
def answer(request: pytest.FixtureRequest) -> Iterator[None]:
    """A resolver answer for ``rebind.invalid`` (a name no real DNS has) while the test runs."""
    yield
    egress._resolved.pop(("rebind.invalid", request.getfixturevalue("port")), None)


@pytest.fixture
def port(server: FakeProvider) -> int:
    return int(server.root_url.rsplit(":", 1)[1])


def _seed(port: int, addresses: list[str]) -> None:
    with egress._resolved_lock:
        egress._resolved[("rebind.invalid", port)] = (time.monotonic(), addresses)


def _client() -> httpx.Client:
    return httpx.Client(transport=pinned.pinned_transport(limits=httpx.Limits()), trust_env=False)


def test_the_call_connects_to_the_checked_address_and_keeps_the_host_name(server: FakeProvider, port: int, answer: None) -> None:
    # The name resolves (once) to loopback; the connection goes to that address — no second
    # lookup could send it elsewhere — while the URL and Host still name the endpoint.
    _seed(port, ["127.0.0.1"])
    with _client() as client:
        response = client.post(f"http://rebind.invalid:{port}/v1/chat/completions", content=b"{}")
        assert response.status_code < 500
    assert server.requests[-1].headers["host"] == f"rebind.invalid:{port}"


def test_an_answer_with_a_metadata_address_is_refused_before_connecting(server: FakeProvider, port: int, answer: None) -> None:
    _seed(port, ["127.0.0.1", "64:ff9b::a9fe:a9fe"])
    with _client() as client, pytest.raises(ValidationFailed, match="link-local"):
        client.post(f"http://rebind.invalid:{port}/v1/chat/completions", content=b"{}")
    assert server.requests == []


def test_a_peer_other_than_the_checked_address_is_refused(server: FakeProvider, port: int) -> None:
    sockets = httpcore.SyncBackend()
    stream = sockets.connect_tcp("127.0.0.1", port)
    pinned.check_peer(stream, "127.0.0.1", "127.0.0.1")  # the address it reached: fine
    stream.close()
    stream = sockets.connect_tcp("127.0.0.1", port)
    with pytest.raises(ValidationFailed, match=r"reached 127\.0\.0\.1, not the checked address 127\.0\.0\.2"):
        pinned.check_peer(stream, "127.0.0.2", "judge.example")


@pytest.mark.django_db
def test_a_judge_call_through_a_host_name_still_works(server: FakeProvider, port: int) -> None:
    output = call(make_example_study(), make_judge(base_url=f"http://localhost:{port}/v1"))
    assert output.status == "valid", output.error
    assert server.requests[-1].headers["host"] == f"localhost:{port}"


@pytest.mark.django_db
def test_a_judge_at_a_nat64_metadata_address_fails_without_a_request(server: FakeProvider) -> None:
    output = call(make_example_study(), make_judge(base_url="http://[64:ff9b::a9fe:a9fe]/v1"))
    assert output.status == "failed" and "link-local" in output.error


@pytest.mark.django_db
def test_a_proxy_at_a_metadata_address_is_refused(server: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    # Through ARBITER_JUDGE_PROXY the client connects to the proxy: the pinned transport checks it.
    settings.ARBITER_JUDGE_PROXY = "http://[64:ff9b::a9fe:a9fe]:3128"
    output = call(make_example_study(), make_judge(base_url=server.url))
    assert output.status == "failed" and "link-local" in output.error
    assert server.requests == []


@pytest.mark.django_db
def test_a_proxy_named_by_host_name_is_reached_through_the_checked_address(server: FakeProvider, port: int, settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_JUDGE_PROXY = f"http://localhost:{port}"  # the emulator doubles as a forward proxy
    output = call(make_example_study(), make_judge(base_url="http://127.0.0.1:9/v1"))  # nothing listens on 9
    assert output.status == "valid", output.error
    assert server.requests[-1].path == "http://127.0.0.1:9/v1/chat/completions"  # absolute form: via the proxy
