"""Live judge calls against a real loopback server speaking the OpenAI-compatible protocol
(docs/protocol.md "Judges and calibration")."""

from __future__ import annotations

import json
import time

import pytest

from annotation.models import Comparison, System
from judges.models import JudgeOutput
from judges.services.calls import judge_output_execute
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db

KEY = "sk-test-secret-0123456789"


def call(study, judge, *, comparison: str = "c1", order: str = "primary", repeat: int = 0) -> JudgeOutput:  # type: ignore[no-untyped-def]
    output = JudgeOutput.objects.create(
        judge=judge, comparison=Comparison.objects.get(study=study, external_id=comparison), order=order, repeat=repeat
    )
    judge_output_execute(output_id=output.pk)
    output.refresh_from_db()
    return output


def test_valid_primary_call_sends_three_images_and_the_active_axes(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = call(study, judge)
    assert provider.problems == []
    assert output.status == "valid", output.error
    assert (output.winner, output.confidence, output.attempts) == ("A", 4, 1)
    assert output.axis_scores == [
        {"id": "GLOBAL_LAYOUT_FIDELITY", "score": 1},
        {"id": "TEXT_VISUAL_PRESENTATION", "score": 1},
        {"id": "TABLE", "score": 1},
    ]
    [request] = provider.requests
    assert request.path == "/v1/chat/completions"
    assert request.images == ["reference", "alpha", "beta"]
    assert request.neutralized == [True, True, True]
    assert request.active_axes == [
        {"id": "GLOBAL_LAYOUT_FIDELITY", "scope": "fixed", "description": "Regions, columns, spacing, reading order.", "targets": []},
        {"id": "TEXT_VISUAL_PRESENTATION", "scope": "fixed", "description": "Wrapping, typography, emphasis.", "targets": []},
        {"id": "TABLE", "scope": "conditional", "description": "Rows, columns, cell alignment.",
         "targets": [{"role": "table", "bbox_1000": [66, 450, 934, 650]}]},
    ]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(request.body)["model"] == "vlm-1"


def test_swapped_order_sends_b_as_candidate_a_and_maps_the_answer_back(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = call(study, judge, order="swapped")
    assert provider.problems == []
    assert provider.requests[0].images == ["reference", "beta", "alpha"]
    assert output.winner == "B"  # the judge said "A" about canonical B
    assert [a["score"] for a in output.axis_scores] == [-1, -1, -1]


def test_conditional_axis_is_inactive_without_a_target(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = call(study, judge, comparison="c2")
    assert [a["id"] for a in provider.requests[0].active_axes] == ["GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION"]
    assert provider.requests[0].images == ["reference", "gamma", "alpha"]
    assert output.status == "valid"


def test_original_images_without_neutralization(provider: FakeProvider) -> None:
    study = make_example_study(neutralize=False)
    call(study, make_judge(base_url=provider.url))
    assert provider.requests[0].neutralized == [False, False, False]


def test_no_system_name_or_id_reaches_the_judge(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    call(study, judge)
    call(study, judge, comparison="c2", order="swapped")
    for request in provider.requests:
        body = request.body.decode()
        for system in System.objects.filter(study=study):
            assert system.name not in body
            assert f'"{system.external_id}"' not in body and f" {system.external_id} " not in body
        assert KEY not in body


def test_fenced_reply_is_unwrapped(provider: FakeProvider) -> None:
    provider.default = "fenced"
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "valid"
    assert output.raw.startswith("```json")


@pytest.mark.parametrize("behaviour", ["wrong_order", "bad_confidence", "prose"])
def test_an_invalid_reply_is_retried_then_the_valid_one_is_kept(provider: FakeProvider, behaviour: str) -> None:
    provider.script.append(behaviour)
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "valid"
    assert output.invalid_attempts == 1
    assert output.transport_failures == 0
    assert len(provider.requests) == 2


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [("wrong_order", "out of order"), ("bad_confidence", "$.confidence"), ("prose", "not strict JSON")],
)
def test_persistently_invalid_replies_are_stored_invalid_with_the_reason(
    provider: FakeProvider, behaviour: str, reason: str
) -> None:
    provider.default = behaviour
    output = call(make_example_study(), make_judge(base_url=provider.url, max_invalid_retries=2))
    assert output.status == "invalid"
    assert reason in output.error
    assert output.invalid_attempts == 3
    assert len(provider.requests) == 3
    assert output.raw == provider.reply_text(behaviour, ["GLOBAL_LAYOUT_FIDELITY", "TEXT_VISUAL_PRESENTATION", "TABLE"])
    assert output.winner == "" and output.confidence is None


def test_429_retry_after_is_honoured_and_counted_as_transport(provider: FakeProvider) -> None:
    provider.script.append("429")
    started = time.monotonic()
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert time.monotonic() - started >= 1.0  # Retry-After: 1, though the backoff base is 10 ms
    assert output.status == "valid"
    assert (output.transport_failures, output.invalid_attempts) == (1, 0)


def test_5xx_then_success(provider: FakeProvider) -> None:
    provider.script.extend(["500", "503"])
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "valid"
    assert output.transport_failures == 2


def test_persistent_5xx_is_stored_failed_apart_from_invalid(provider: FakeProvider) -> None:
    provider.default = "500"
    output = call(make_example_study(), make_judge(base_url=provider.url, max_transport_retries=3))
    assert output.status == "failed"
    assert "HTTP 500" in output.error
    assert (output.transport_failures, output.invalid_attempts) == (4, 0)
    assert len(provider.requests) == 4


def test_timeouts_are_transport_failures(provider: FakeProvider) -> None:
    provider.script.append("timeout")
    provider.timeout_sleep = 1.5
    output = call(make_example_study(), make_judge(base_url=provider.url, timeout_seconds=0.5))
    assert output.status == "valid"
    assert output.transport_failures == 1
    assert output.error == ""


def test_timeout_every_time_fails(provider: FakeProvider) -> None:
    provider.default = "timeout"
    provider.timeout_sleep = 1.0
    output = call(make_example_study(), make_judge(base_url=provider.url, timeout_seconds=0.3, max_transport_retries=1))
    assert output.status == "failed"
    assert "no reply within the 0.3 s deadline" in output.error


def test_413_shrinks_the_images_for_the_next_attempt(provider: FakeProvider) -> None:
    provider.script.append("413")
    study = make_example_study(noise=True)
    output = call(study, make_judge(base_url=provider.url, max_image_bytes=200_000))
    assert output.status == "valid"
    assert output.transport_failures == 1
    first, second = provider.requests
    assert len(second.body) < len(first.body)
    assert output.image_repairs and all(r["sent"]["format"] == "jpeg" for r in output.image_repairs)


def test_images_over_the_judge_limits_are_repaired_and_recorded(provider: FakeProvider) -> None:
    study = make_example_study(image_size=(400, 520))
    output = call(study, make_judge(base_url=provider.url, max_image_edge=260))
    assert provider.problems == []
    # Downscaled, each image goes as whichever of PNG and JPEG came out smaller (flat renderings: PNG).
    assert provider.requests[0].mimes == [f"image/{r['sent']['format']}" for r in output.image_repairs]
    assert all(max(size) == 260 for size in provider.requests[0].sizes)
    assert [r["image"] for r in output.image_repairs] == ["REFERENCE", "CANDIDATE A", "CANDIDATE B"]
    assert output.image_repairs[0]["original"]["width"] == 400
    assert output.image_repairs[0]["sent"] == {**output.image_repairs[0]["sent"], "width": 200, "height": 260}


def test_request_size_limit_is_met_by_re_encoding(provider: FakeProvider) -> None:
    study = make_example_study(noise=True)
    limit = 400_000
    output = call(study, make_judge(base_url=provider.url, max_request_bytes=limit))
    assert output.status == "valid"
    assert len(provider.requests[0].body) <= limit
    assert output.image_repairs


def test_missing_api_key_fails_without_calling(provider: FakeProvider, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ARBITER_TEST_JUDGE_KEY")
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "failed"
    assert "ARBITER_TEST_JUDGE_KEY" in output.error
    assert provider.requests == []


def test_auth_error_is_not_retried_and_stops_the_judge(provider: FakeProvider) -> None:
    provider.default = "401"
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = call(study, judge)
    # Not retried, not failed for good: the call waits (pending) with the reason, and the judge is
    # stopped for every worker, so the next call of it sends nothing.
    assert output.status == "pending"
    assert len(provider.requests) == 1
    assert KEY not in output.error
    assert "ARBITER_TEST_JUDGE_KEY" in output.error and "HTTP 401" in output.error
    assert output.calls == 1 and len(output.attempt_log) == 1
    second = call(study, judge, order="swapped")
    assert second.status == "pending" and second.calls == 0
    assert len(provider.requests) == 1


def test_metadata_endpoint_in_the_database_is_refused_at_call_time(provider: FakeProvider) -> None:
    output = call(make_example_study(), make_judge(base_url="http://169.254.169.254/v1"))
    assert output.status == "failed"
    assert "link-local" in output.error


def test_anthropic_messages_protocol(provider: FakeProvider) -> None:
    judge = make_judge("claude-judge", base_url=provider.root_url, provider="anthropic", model="claude-x")
    output = call(make_example_study(), judge, order="swapped")
    assert provider.problems == []
    request = provider.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert "anthropic-version" in request.headers
    assert request.images == ["reference", "beta", "alpha"]
    assert output.status == "valid" and output.winner == "B"


def test_study_prompt_template_is_used(provider: FakeProvider) -> None:
    study = make_example_study(judge_prompt='Custom instructions. ACTIVE_AXES: {{ACTIVE_AXES}} please. {"keep": "braces"}')
    call(study, make_judge(base_url=provider.url))
    assert provider.problems == []
    prompt = provider.requests[0].prompt
    assert prompt.startswith("Custom instructions. ACTIVE_AXES: [")
    assert '{"keep": "braces"}' in prompt


def test_a_template_without_the_marker_gets_the_axes_appended(provider: FakeProvider) -> None:
    study = make_example_study(judge_prompt="Which candidate is more faithful?")
    call(study, make_judge(base_url=provider.url))
    assert provider.problems == []
    assert provider.requests[0].prompt.startswith("Which candidate is more faithful?\n\nACTIVE_AXES:\n[")


def test_a_finished_output_is_not_called_again(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    output = call(study, judge)
    assert judge_output_execute(output_id=output.pk) == "skipped"
    assert len(provider.requests) == 1


def test_matrix_row_14_rate_limit_then_timeout_then_prose_then_valid(provider: FakeProvider) -> None:
    """SECURITY.md row 14: 429 with Retry-After, a timeout, prose, then a valid reply → one output."""
    provider.script.extend(["429", "timeout", "prose"])
    provider.timeout_sleep = 1.5
    study, judge = make_example_study(), make_judge(base_url=provider.url, timeout_seconds=0.5)
    started = time.monotonic()
    output = call(study, judge)
    assert time.monotonic() - started >= 1.0  # the Retry-After of the 429 was honoured
    assert output.status == "valid" and output.winner in {"A", "B", "TIE"}
    assert (output.transport_failures, output.invalid_attempts) == (2, 1)
    assert [r.behaviour for r in provider.requests] == ["429", "timeout", "prose", provider.default]
    assert JudgeOutput.objects.filter(judge=judge).count() == 1


def test_matrix_row_14_prose_past_the_cap_is_stored_as_a_failure(provider: FakeProvider) -> None:
    provider.script.extend(["429", "timeout"])
    provider.default = "prose"
    provider.timeout_sleep = 1.5
    output = call(
        make_example_study(), make_judge(base_url=provider.url, timeout_seconds=0.5, max_invalid_retries=1)
    )
    assert output.status == "invalid" and "not strict JSON" in output.error
    assert (output.transport_failures, output.invalid_attempts) == (2, 2)


def test_each_reply_records_the_prompt_template_it_answered(provider: FakeProvider) -> None:
    import hashlib

    from judges.prompts import DEFAULT_JUDGE_PROMPT

    study = make_example_study()
    judge = make_judge(base_url=provider.url)
    default = call(study, judge)
    assert default.status == "valid"
    assert study.judge_prompt == ""  # the project's default template
    assert default.prompt_sha256 == hashlib.sha256(DEFAULT_JUDGE_PROMPT.encode()).hexdigest()
    assert provider.requests[0].prompt.startswith(DEFAULT_JUDGE_PROMPT.strip()[:200])

    edited = "Compare the two candidates with the reference. Answer in JSON."
    study.judge_prompt = edited
    study.save(update_fields=["judge_prompt"])
    after = call(study, judge, repeat=1)
    assert after.status == "valid"
    assert after.prompt_sha256 == hashlib.sha256(edited.encode()).hexdigest() != default.prompt_sha256
    assert provider.requests[1].prompt.startswith("Compare the two candidates with the reference.")
    # A reply that is never valid still names the prompt it answered; a call with no reply does not.
    provider.script.extend(["prose"] * 10)
    invalid = call(study, judge, repeat=2)
    assert invalid.status == "invalid" and invalid.prompt_sha256 == after.prompt_sha256


def test_a_provider_400_for_image_size_is_repaired_and_retried(provider: FakeProvider) -> None:
    provider.script.append("image_too_large")
    judge = make_judge("claude-img", base_url=provider.root_url, provider="anthropic", model="claude-x")
    output = call(make_example_study(), judge)
    assert output.status == "valid" and output.transport_failures == 1 and output.calls == 2
    first, second = provider.requests
    assert len(second.body) < len(first.body)
    assert output.image_repairs and all(r["sent"]["bytes"] < r["original"]["bytes"] for r in output.image_repairs)
    assert "image too large" in output.attempt_log[0]["error"]


def test_calls_go_through_the_deployment_proxy_and_the_allow_list_still_applies(provider: FakeProvider, settings) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_JUDGE_PROXY = provider.root_url  # the emulator doubles as a forward proxy
    study = make_example_study()
    output = call(study, make_judge(base_url="http://127.0.0.1:9/v1"))  # nothing listens on port 9
    assert output.status == "valid"
    assert provider.requests[0].path == "http://127.0.0.1:9/v1/chat/completions"  # absolute form: via the proxy
    refused = call(study, make_judge("meta", base_url="http://169.254.169.254/v1"), order="swapped")
    assert refused.status == "failed" and "link-local" in refused.error
    assert len(provider.requests) == 1


def test_an_unreadable_ca_bundle_is_one_line(provider: FakeProvider, settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings.ARBITER_JUDGE_CA_BUNDLE = str(tmp_path / "missing.pem")
    output = call(make_example_study(), make_judge(base_url=provider.url))
    assert output.status == "failed"
    assert output.error.startswith("provider refused: the CA bundle ARBITER_JUDGE_CA_BUNDLE=") and "\n" not in output.error


@pytest.mark.parametrize("behaviour", ["nul_reason", "nul_raw"])
def test_a_reply_with_a_nul_character_is_invalid_and_stored_without_it(provider: FakeProvider, behaviour: str) -> None:
    """PostgreSQL text cannot hold NUL: a reply carrying one (raw or in its reason) was a DataError
    that left the call running; it is an invalid reply, kept with the NUL escaped (SECURITY.md row 19)."""
    provider.default = behaviour
    output = call(make_example_study(), make_judge(base_url=provider.url, max_invalid_retries=1))
    assert output.status == "invalid", (output.status, output.error)
    assert "NUL" in output.error
    assert "\x00" not in output.raw and "\x00" not in output.reason and "\\u0000" in output.raw


def test_one_image_over_the_byte_limit_repairs_all_three_alike(provider: FakeProvider) -> None:
    """Blinding (SECURITY.md row 16) on the judge path: a system whose renders compress badly must
    not be the one sent as JPEG, or at another width, beside PNGs of the others."""
    from annotation.models import Candidate
    from tests.judges.factories import MEDIA, SYSTEM_COLOURS, image_bytes, store

    study = make_example_study()
    heavy, heavy_neutral = store(image_bytes(SYSTEM_COLOURS["beta"], (400, 520), True), media=MEDIA)
    Candidate.objects.filter(page__study=study, system__external_id="beta").update(
        image=heavy, neutralized_image=heavy_neutral
    )
    limit = 100_000
    assert (heavy_neutral or heavy).size_bytes > limit
    output = call(study, make_judge(base_url=provider.url, max_image_bytes=limit))
    assert output.status == "valid", output.error
    [request] = provider.requests
    assert request.mimes == ["image/jpeg"] * 3
    assert len(set(request.sizes)) == 1, request.sizes
    assert [r["image"] for r in output.image_repairs] == ["REFERENCE", "CANDIDATE A", "CANDIDATE B"]


def test_a_repair_alike_is_made_once_for_both_orders_and_is_the_same_as_made_afresh() -> None:
    """The calls of one comparison share one alike repair (cached in hash order, handed back in
    the order asked): the swapped order gets the primary's candidate images in swapped slots, and
    both equal what :func:`prepare_images_alike` makes with nothing cached."""
    import judges.request_building as rb
    from judges.images import prepare_image, prepare_images_alike
    from judges.models import Order

    study = make_example_study()
    judge = make_judge(base_url="http://127.0.0.1:9/v1", max_image_edge=120)
    comparison = rb.load_comparison(Comparison.objects.filter(study=study).order_by("pk").first().pk)
    axes = rb.study_axes(study.pk)
    rb._cache.clear()
    primary = rb.build_judge_request(judge=judge, comparison=comparison, order=Order.PRIMARY, axes=axes)
    alike_keys = [key for key in rb._cache._items if key[0] == "alike"]
    assert len(alike_keys) == 1
    swapped = rb.build_judge_request(judge=judge, comparison=comparison, order=Order.SWAPPED, axes=axes)
    assert [key for key in rb._cache._items if key[0] == "alike"] == alike_keys  # no second repair
    p, s = [i.data for i in primary.request.images], [i.data for i in swapped.request.images]
    assert s == [p[0], p[2], p[1]]
    stored = [comparison.page.image, comparison.candidate_a.image, comparison.candidate_b.image]
    if study.neutralize_media:
        stored = [comparison.page.neutralized_image or stored[0], comparison.candidate_a.neutralized_image or stored[1],
                  comparison.candidate_b.neutralized_image or stored[2]]
    rb._cache.clear()
    each = [prepare_image(rb._stored_png(x), x.width, x.height, max_edge=120, max_bytes=None) for x in stored]
    fresh = prepare_images_alike([(rb._stored_png(x), x.width, x.height) for x in stored], each, max_edge=120, max_bytes=None)
    assert [f.data for f in fresh] == p
    assert all(f.repair for f in fresh)
