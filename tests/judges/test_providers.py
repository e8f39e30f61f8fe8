"""The five wire formats, parameters sent, structured output, repair turns, usage, rate limits.

Against the loopback emulator (``fake_provider``), which speaks every format and checks the
images and the ACTIVE_AXES in each request.
"""

from __future__ import annotations

import json
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.models import Comparison
from judges.models import Judge, JudgeOutput
from judges.providers.base import rate_limit_reset, unsupported_parameter
from judges.services.calls import judge_output_execute
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db
KEY = "sk-test-secret-0123456789"


def call(study, judge, *, order: str = "primary") -> JudgeOutput:  # type: ignore[no-untyped-def]
    output = JudgeOutput.objects.create(judge=judge, comparison=Comparison.objects.get(study=study, external_id="c1"),
                                        order=order)
    judge_output_execute(output_id=output.pk)
    output.refresh_from_db()
    return output


def axes_of(study) -> list[str]:  # type: ignore[no-untyped-def]
    comparison = Comparison.objects.select_related("page").get(study=study, external_id="c1")
    from judges.request_building import study_axes

    return comparison.page.active_axis_ids(study_axes(study.pk))


def test_openai_chat_sends_schema_system_prompt_and_current_token_parameter(provider: FakeProvider) -> None:
    study = make_example_study()
    output = call(study, make_judge(base_url=provider.url))
    assert provider.problems == []
    request = provider.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.data
    assert body["messages"][0]["role"] == "system"
    assert body["max_completion_tokens"] == 4096 and "max_tokens" not in body
    assert body["temperature"] == 0.0 and "seed" not in body and "reasoning_effort" not in body
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    assert schema["schema"]["properties"]["axes"]["items"]["properties"]["id"]["enum"] == axes_of(study)
    assert schema["schema"]["properties"]["winner"]["enum"] == ["A", "B", "TIE"]
    # Usage, served model, request id and fingerprint are kept on the output.
    assert output.status == "valid"
    assert (output.input_tokens, output.output_tokens, output.cached_tokens) == (1200, 40, 0)
    assert output.served_model == "served-model-1" and output.fingerprint == "fp_fake"
    assert output.request_id == "req-1" and output.latency_ms is not None and output.calls == 1
    assert [a["outcome"] for a in output.attempt_log] == ["valid"]


def test_reasoning_model_gets_no_temperature_and_its_effort(provider: FakeProvider) -> None:
    call(make_example_study(), make_judge(base_url=provider.url, model="gpt-5-mini", reasoning_effort="low", seed=7))
    body = provider.requests[0].data
    assert "temperature" not in body
    assert body["reasoning_effort"] == "low" and body["seed"] == 7
    assert body["max_completion_tokens"] == 4096


def test_token_param_and_no_temperature_and_no_schema_flags(provider: FakeProvider) -> None:
    out = StringIO()
    call_command("add_judge", "old-server", "--model", "m", "--base-url", provider.url, "--token-param", "max_tokens",
                 "--no-temperature", "--no-structured-output", "--api-key-env", "ARBITER_TEST_JUDGE_KEY", stdout=out)
    call(make_example_study(), Judge.objects.get(name="old-server"))
    body = provider.requests[0].data
    assert body["max_tokens"] == 4096 and "max_completion_tokens" not in body
    assert "temperature" not in body and "response_format" not in body


def test_openai_responses_api(provider: FakeProvider) -> None:
    study = make_example_study()
    output = call(study, make_judge(base_url=provider.url, provider="openai-responses", model="gpt-5"), order="swapped")
    assert provider.problems == []
    request = provider.requests[0]
    assert request.path == "/v1/responses"
    body = request.data
    assert body["instructions"] and body["max_output_tokens"] == 4096
    assert body["text"]["format"]["type"] == "json_schema"
    assert request.images == ["reference", "beta", "alpha"]
    assert output.status == "valid" and output.winner == "B" and output.input_tokens == 1200


def test_anthropic_version_tool_schema_and_usage(provider: FakeProvider) -> None:
    study = make_example_study()
    output = call(study, make_judge(base_url=provider.root_url, provider="anthropic", model="claude-sonnet-4-5"))
    request = provider.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["anthropic-version"] == "2023-06-01" and request.headers["x-api-key"] == KEY
    body = request.data
    assert body["system"] and body["tool_choice"] == {"type": "tool", "name": "record_judgement"}
    assert body["tools"][0]["input_schema"]["properties"]["axes"]["items"]["properties"]["id"]["enum"] == axes_of(study)
    assert output.status == "valid" and output.output_tokens == 40 and output.served_model == "served-model-1"
    call(study, make_judge("claude-2", base_url=provider.root_url, provider="anthropic", model="claude-x",
                           api_version="2024-01-01"))
    assert provider.requests[1].headers["anthropic-version"] == "2024-01-01"


def test_gemini_native_generate_content(provider: FakeProvider) -> None:
    study = make_example_study()
    output = call(study, make_judge(base_url=provider.root_url, provider="gemini", model="gemini-2.5-flash", seed=3))
    assert provider.problems == []
    request = provider.requests[0]
    assert request.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert request.headers["x-goog-api-key"] == KEY and "authorization" not in request.headers
    config = request.data["generationConfig"]
    assert config["responseMimeType"] == "application/json" and config["seed"] == 3
    assert config["responseJsonSchema"]["properties"]["winner"]["enum"] == ["A", "B", "TIE"]
    assert request.data["systemInstruction"]["parts"][0]["text"]
    assert request.mimes == ["image/png"] * 3
    assert output.status == "valid" and output.request_id == "resp-fake"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/openai/v1", "/openai/v1/chat/completions"),
        ("/openai/deployments/judge-dep?api-version=2024-10-21", "/openai/deployments/judge-dep/chat/completions?api-version=2024-10-21"),
        ("", "/openai/deployments/vlm-1/chat/completions?api-version=2024-10-21"),
    ],
)
def test_azure_openai_urls_and_api_key_header(provider: FakeProvider, path: str, expected: str) -> None:
    output = call(make_example_study(), make_judge(base_url=provider.root_url + path, provider="azure-openai"))
    request = provider.requests[0]
    assert request.path == expected
    assert request.headers["api-key"] == KEY and "authorization" not in request.headers
    assert output.status == "valid"


def test_unsupported_parameter_is_one_line_naming_the_flag_and_the_flag_fixes_it(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url, model="o4-mini", temperature=0.2, adapt_parameters=False)
    provider.script.append("reject:temperature")
    output = call(study, judge)
    # The judge is stopped (no other call is sent into the same refusal); the call waits, pending.
    assert output.status == "pending"
    assert output.error == ("stopped: the model o4-mini does not accept the parameter 'temperature' (HTTP 400: "
                            "Unsupported parameter: 'temperature' is not supported with this model.); fix: add_judge "
                            "judge-x --update --no-temperature, or add_judge judge-x --update --adapt-parameters to let "
                            "a run drop it")
    call_command("add_judge", "judge-x", "--update", "--no-temperature", stdout=StringIO())
    from judges.limits import limiter_for
    from judges.services.calls import judge_limits

    limiter_for().clear_stop(judge_limits(judge))  # what run_judges does when it starts again
    again = call(study, judge, order="swapped")
    assert again.status == "valid" and "temperature" not in provider.requests[-1].data


def test_invalid_reply_is_repaired_with_the_validation_error(provider: FakeProvider) -> None:
    provider.script.extend(["wrong_order", "valid"])
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "valid" and output.calls == 2 and output.invalid_attempts == 1
    messages = provider.requests[1].data["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert json.loads(messages[2]["content"])["winner"] == "A"  # the rejected reply, sent back
    assert "Your answer was not accepted: $.axes are out of order" in messages[3]["content"]
    assert [a["outcome"] for a in output.attempt_log] == ["invalid", "valid"]
    assert output.input_tokens == 2400  # both attempts were billed


def test_reasoning_that_exhausts_max_tokens_is_named(provider: FakeProvider) -> None:
    provider.default = "length"
    output = call(make_example_study(), make_judge(base_url=provider.url, max_invalid_retries=0))
    assert output.status == "invalid"
    assert "used up max_tokens" in output.error and "--max-tokens" in output.error


def test_429_with_rate_limit_headers_pauses_the_judge_until_the_reset(provider: FakeProvider) -> None:
    provider.reset = "0.4s"
    provider.script.append("429h")
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "valid" and output.transport_failures == 1 and output.calls == 2
    first, second = provider.requests
    assert second.at - first.at >= 0.35
    assert output.attempt_log[0]["http_status"] == 429


def test_insufficient_quota_stops_the_run_in_one_line(provider: FakeProvider) -> None:
    make_example_study()
    make_judge(base_url=provider.url, concurrency=1)
    provider.default = "quota"
    with pytest.raises(CommandError) as info:
        call_command("run_judges", "example", "--judge", "judge-x", stdout=StringIO())
    message = str(info.value)
    assert "\n" not in message and "insufficient_quota" in message and "run stopped" in message
    assert len(provider.requests) == 1  # the other calls were not sent
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"pending"}
    provider.default = "valid"  # the account was topped up: running again resumes
    call_command("run_judges", "example", "--judge", "judge-x", stdout=StringIO())
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provider", "mistralish"], "unknown provider 'mistralish'"),
        (["--base-url", "http://169.254.169.254/v1"], "link-local or cloud-metadata"),
        (["--base-url", "http://127.0.0.1/v1", "--price-input", "cheap"], "expected a price in dollars per million tokens"),
        (["--base-url", "http://127.0.0.1/v1", "--token-param", "max_toks"], "expected one of auto, max_tokens"),
        (["--base-url", "http://127.0.0.1/v1", "--batch-discount", "2"], "expected a fraction"),
        (["--provider", "azure-openai"], "a base URL is required for azure-openai"),
    ],
)
def test_add_judge_bad_provider_settings_are_one_line(args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as info:
        call_command("add_judge", "bad", "--model", "m", *args)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not Judge.objects.exists()


def test_add_judge_defaults_the_base_url_and_keeps_prices() -> None:
    call_command("add_judge", "g", "--provider", "gemini", "--model", "gemini-2.5-pro", "--price-input", "1.25",
                 "--price-output", "10", stdout=StringIO())
    judge = Judge.objects.get(name="g")
    assert judge.base_url == "https://generativelanguage.googleapis.com"
    assert (judge.price_input_per_mtok, judge.price_output_per_mtok, judge.batch_discount) == (1.25, 10.0, 0.5)


def test_rate_limit_headers_of_every_provider() -> None:
    soon = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 30))
    assert rate_limit_reset({"retry-after": "2"}) == 2.0
    assert rate_limit_reset({"retry-after-ms": "1500"}) == 1.5
    assert rate_limit_reset({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s"}) == 360.0
    assert rate_limit_reset({"x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "250ms"}) == 0.25
    assert rate_limit_reset({"x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "9s"}) is None
    anthropic = rate_limit_reset({"anthropic-ratelimit-tokens-remaining": "0", "anthropic-ratelimit-tokens-reset": soon})
    assert anthropic is not None and 25 < anthropic <= 30
    assert rate_limit_reset({}) is None


def test_unsupported_parameter_in_each_providers_words() -> None:
    assert unsupported_parameter({"param": "max_tokens"}, "Unsupported parameter") == "max_tokens"
    assert unsupported_parameter({}, "temperature: not supported when thinking is enabled") == "temperature"
    assert unsupported_parameter({}, 'Invalid JSON payload received. Unknown name "seed" at generation_config') == "seed"
    assert unsupported_parameter({}, "model not found") is None


@pytest.mark.broker
def test_a_429_pause_and_a_stop_are_shared_by_every_worker_through_redis() -> None:
    from django.conf import settings

    from judges.limits import Limits, RedisLimiter

    limits = Limits(key=f"test-pause-{time.time_ns()}", concurrency=2, rate_per_second=None, hold_seconds=5)
    one, other = RedisLimiter(settings.CELERY_BROKER_URL), RedisLimiter(settings.CELERY_BROKER_URL)
    one.pause(limits, 2.0)
    one.pause(limits, 0.5)  # a shorter pause never shortens the one in force
    assert 1.5 < other.paused_for(limits) <= 2.0
    one.stop(limits, "no quota")
    assert other.stopped(limits) == "no quota"
    other.clear_stop(limits)
    assert one.stopped(limits) is None and one.paused_for(limits) == 0.0
