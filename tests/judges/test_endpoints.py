"""Judge endpoints: link-local / metadata base URLs are refused unless allow-listed; loopback is fine."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from annotation.errors import ValidationFailed
from judges.models import Judge
from judges.providers import check_base_url
from judges.services.judges import parse_rate


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://169.254.10.1/v1",
        "http://[fe80::1]/v1",
        "http://[fe80::1%25eth0]:8080/v1",
        "http://metadata.google.internal/computeMetadata/v1",
        "http://METADATA.google.internal./v1",
        "http://100.100.100.200/latest",
        "http://[fd00:ec2::254]/latest",
        "http://[::ffff:169.254.169.254]/v1",
    ],
)
def test_metadata_and_link_local_hosts_are_refused(url: str) -> None:
    with pytest.raises(ValidationFailed, match="link-local or cloud-metadata"):
        check_base_url(url)


@pytest.mark.parametrize("url", ["ftp://example.org/v1", "not a url", "http://user:pw@example.org/v1"])
def test_malformed_base_urls_are_refused(url: str) -> None:
    with pytest.raises(ValidationFailed):
        check_base_url(url)


def test_loopback_and_public_hosts_are_allowed() -> None:
    assert check_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert check_base_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert check_base_url("https://api.example.org/v1") == "https://api.example.org/v1"


def test_allowlist_admits_a_listed_host(settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_JUDGE_HOST_ALLOWLIST = ["169.254.1.2"]
    assert check_base_url("http://169.254.1.2/v1") == "http://169.254.1.2/v1"
    with pytest.raises(ValidationFailed):
        check_base_url("http://169.254.1.3/v1")


def test_rates() -> None:
    assert parse_rate("2/s") == 2.0
    assert parse_rate("30/m") == 0.5
    assert parse_rate("3") == 3.0
    assert parse_rate(None) is None
    with pytest.raises(ValidationFailed):
        parse_rate("fast")
    with pytest.raises(ValidationFailed):
        parse_rate("0/s")


@pytest.mark.django_db
def test_add_judge_registers_a_judge_without_storing_the_key(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("OPENAI_KEY_FOR_TEST", "sk-super-secret")
    call_command(
        "add_judge", "gpt-judge", "--family", "openai", "--provider", "openai", "--model", "gpt-x",
        "--base-url", "http://127.0.0.1:9/v1", "--api-key-env", "OPENAI_KEY_FOR_TEST", "--max-image-edge", "2000",
        "--max-request-bytes", "20000000", "--rate", "2/s", "--concurrency", "3", "--timeout", "30",
    )
    judge = Judge.objects.get(name="gpt-judge")
    assert (judge.family, judge.model, judge.rate_per_second, judge.concurrency, judge.timeout_seconds) == (
        "openai", "gpt-x", 2.0, 3, 30.0
    )
    assert judge.max_image_edge == 2000 and judge.max_request_bytes == 20_000_000
    assert judge.api_key_env == "OPENAI_KEY_FOR_TEST"
    stored = " ".join(str(v) for v in Judge.objects.values().get(name="gpt-judge").values())
    assert "sk-super-secret" not in stored


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base-url", "http://169.254.169.254/v1"], "link-local or cloud-metadata"),
        (["--base-url", "http://127.0.0.1/v1", "--api-key-env", "sk-abc def"], "NAME of an environment variable"),
        (["--base-url", "http://127.0.0.1/v1", "--rate", "lots"], "rate like 2/s"),
    ],
)
def test_add_judge_refuses_bad_input_in_one_line(args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as info:
        call_command("add_judge", "bad", "--model", "m", *args)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
    assert not Judge.objects.exists()


@pytest.mark.django_db
def test_add_judge_twice_is_refused() -> None:
    call_command("add_judge", "twice", "--model", "m", "--base-url", "http://127.0.0.1/v1")
    with pytest.raises(CommandError, match="already exists"):
        call_command("add_judge", "twice", "--model", "m", "--base-url", "http://127.0.0.1/v1")


def test_provider_error_text_never_carries_a_key() -> None:
    from judges.providers import _scrub

    text = "Incorrect API key provided: sk-proj-****abcd1234. You can find your API key at ..."
    assert "sk-proj" not in _scrub(text, "sk-proj-real-key-9876")
    assert _scrub("echo sk-proj-real-key-9876 back", "sk-proj-real-key-9876") == "echo [redacted] back"
