"""Judges and a refused parameter (issue 29 item 3), against the provider emulator on loopback.

The emulator (``tests.judges.fake_provider``) plays a model that refuses a parameter whenever it is
sent, in the provider's own words (HTTP 400 "temperature is deprecated for this model"). Without
``--adapt-parameters`` the run stops after the first refusal (nothing else is sent into it) and
exits non-zero with the fix; with it (the default for new judges) the parameter is dropped, the
call retried once, and what was learned is stored on the judge, shown on the judges page and in
the API, and printed in one line. A refusal of what the protocol needs (structured output, the
image input) stops the run with the message. ``run_judges`` exits non-zero when no call of the run
succeeded and when any failed for a reason other than its reply. The same with a real Celery
worker is marked ``broker``.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from judges.models import Judge, JudgeOutput
from tests.judges.factories import make_example_study
from tests.judges.fake_provider import FakeProvider

DEPRECATED = "temperature is deprecated for this model"


def add_judge(url: str, *extra: str) -> None:
    call_command("add_judge", "judge-x", "--family", "acme", "--provider", "openai", "--model", "vlm-1",
                 "--base-url", url, "--api-key-env", "ARBITER_TEST_JUDGE_KEY", "--timeout", "10", *extra,
                 stdout=StringIO())


def run_judges(*extra: str) -> tuple[str, str]:
    """(stdout, the one-line error or "" when it exited 0)."""
    out = StringIO()
    try:
        call_command("run_judges", "example", "--judge", "judge-x", "--set", "human", *extra, stdout=out)
    except CommandError as exc:
        return out.getvalue(), str(exc)
    return out.getvalue(), ""


def accounted(provider: FakeProvider) -> int:
    """Requests received; asserts they equal the outputs stored plus the retries recorded."""
    rows = list(JudgeOutput.objects.values_list("status", "transport_failures", "invalid_attempts", "calls"))
    stored = sum(1 for r in rows if r[0] in ("valid", "invalid", "failed"))
    retries = sum(t + i - (1 if s in ("invalid", "failed") else 0) for s, t, i, _ in rows)
    assert sum(r[3] for r in rows) == len(provider.requests) == stored + retries, rows
    return len(provider.requests)


def test_add_judge_help_says_adapting_is_on_by_default_for_new_judges(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit):
        call_command("add_judge", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert "--adapt-parameters" in text and "on by default for new judges" in text
    assert "--no-adapt-parameters" in text


@pytest.mark.django_db
def test_a_refused_parameter_is_dropped_retried_once_and_learned(provider: FakeProvider, admin_user) -> None:  # type: ignore[no-untyped-def]
    provider.refuse = {"temperature": DEPRECATED}
    make_example_study()
    add_judge(provider.url)
    judge = Judge.objects.get(name="judge-x")
    assert judge.adapt_parameters is True and judge.send_temperature is True  # new judges adapt
    out, error = run_judges("--concurrency", "1")
    assert error == ""
    learned = [line for line in out.splitlines() if "refused" in line]
    assert learned == ["judge-x: the model vlm-1 refused 'temperature', so temperature is no longer sent "
                       "(stored on the judge; undo: add_judge judge-x --update --send-temperature)"]
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}
    # One refusal, its retry without temperature, then the other three calls without it.
    assert ["temperature" in r.data for r in provider.requests] == [True, False, False, False, False]
    assert provider.requests[0].behaviour == "refuse:temperature"
    assert accounted(provider) == 5
    judge.refresh_from_db()
    assert judge.send_temperature is False
    entry = judge.learned_parameters["temperature"]
    assert entry["said"] == DEPRECATED and entry["changed"] == "temperature is no longer sent"
    # Visible in the API and on the judges page.
    client = Client()
    client.force_login(admin_user)
    api = client.get("/api/judges/").json()
    assert api[0]["adapt_parameters"] is True
    assert api[0]["learned_parameters"]["temperature"]["undo"] == "add_judge judge-x --update --send-temperature"
    page = client.get("/studies/example/judges/").content.decode()
    assert "Registered judges" in page and ">temperature</span> temperature is no longer sent" in page
    # Sending it again by hand replaces what was learned.
    call_command("add_judge", "judge-x", "--update", "--send-temperature", stdout=StringIO())
    judge.refresh_from_db()
    assert judge.send_temperature is True and judge.learned_parameters == {}


@pytest.mark.django_db
def test_without_adapting_the_run_stops_after_the_first_refusal(provider: FakeProvider) -> None:
    provider.refuse = {"temperature": DEPRECATED}
    make_example_study()
    add_judge(provider.url, "--no-adapt-parameters")
    out, error = run_judges("--concurrency", "1")
    assert error == (
        "judge-x: run stopped, 4 calls left pending: the model vlm-1 does not accept the parameter 'temperature' "
        f"(HTTP 400: {DEPRECATED}); fix: add_judge judge-x --update --no-temperature, or add_judge judge-x --update "
        "--adapt-parameters to let a run drop it"
    )
    assert len(provider.requests) == 1  # the other calls were not sent into the same refusal
    assert Judge.objects.get(name="judge-x").learned_parameters == {}
    # The fix the message names works; the next run sends every call, without temperature.
    call_command("add_judge", "judge-x", "--update", "--no-temperature", stdout=StringIO())
    out, error = run_judges("--concurrency", "1")
    assert error == "" and "valid 4, invalid 0, failed 0" in out
    assert len(provider.requests) == 5 and not any("temperature" in r.data for r in provider.requests[1:])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("refuse", "message"),
    [
        ({"response_format": "Unsupported parameter: 'response_format' is not supported with this model."},
         "the model vlm-1 refused 'response_format' (HTTP 400: Unsupported parameter: 'response_format' is not "
         "supported with this model.), which judge judge-x needs for structured output, so it is not dropped: use a "
         "model that takes a JSON schema, or add_judge judge-x --update --no-structured-output to rely on the "
         "validator alone"),
        ({"image": "Invalid content type. image_url is only supported by certain models."},
         "the model vlm-1 refused the image input (HTTP 400: Invalid content type. image_url is only supported by "
         "certain models.); a judge must see the three images, so this is not dropped: register a model that takes "
         "images"),
    ],
)
def test_a_refusal_of_what_the_protocol_needs_stops_the_run_with_the_message(  # type: ignore[no-untyped-def]
    provider: FakeProvider, refuse, message
) -> None:
    provider.refuse = refuse
    make_example_study()
    add_judge(provider.url)  # adapting on: still never dropped
    _out, error = run_judges("--concurrency", "1")
    assert error == f"judge-x: run stopped, 4 calls left pending: {message}"
    assert len(provider.requests) == 1
    judge = Judge.objects.get(name="judge-x")
    assert judge.structured_output is True and judge.learned_parameters == {}
    assert "response_format" in provider.requests[0].data


@pytest.mark.django_db
def test_exit_codes_no_success_and_a_failure_other_than_the_reply(provider: FakeProvider) -> None:
    make_example_study()
    add_judge(provider.url, "--max-invalid-retries", "0", "--max-transport-retries", "0")
    provider.default = "prose"  # every reply is invalid: nothing succeeded
    out, error = run_judges("--concurrency", "1")
    assert "valid 0, invalid 4, failed 0" in out
    assert error == "judge-x: no call of this run succeeded (4 invalid, 0 failed)"
    # Some invalid replies and valid ones: the reply's content is not the run's failure, exit 0.
    provider.default = "valid"
    provider.script.extend(["prose"])
    out, error = run_judges("--concurrency", "1", "--repeats", "2")
    assert error == "" and "valid 3, invalid 1, failed 0" in out
    # One call failed for a transport reason, the others succeeded: non-zero, naming the reason.
    provider.script.extend(["500"])
    out, error = run_judges("--concurrency", "1", "--repeats", "3")
    assert "valid 3, invalid 0, failed 1" in out
    assert error == ("judge-x: 1 of 4 calls failed for a reason other than the reply's content (first: transport "
                     "failure after 1 tries: HTTP 500); run_judges --retry-failed runs them again")
    # Nothing left to run: exit 0.
    assert run_judges("--repeats", "3")[1] == ""


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.serial
def test_with_a_real_worker_the_refusal_is_learned_and_accounted(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    try:
        provider.refuse = {"temperature": DEPRECATED}
        make_example_study()
        add_judge(provider.url, "--concurrency", "2")
        out, error = run_judges("--repeats", "2", "--wait", "--poll", "0.5", "--wait-timeout", "90")
        assert error == "", out
        assert "judge-x: the model vlm-1 refused 'temperature', so temperature is no longer sent" in out
        assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}
        refused = [r for r in provider.requests if r.behaviour == "refuse:temperature"]
        # Only the calls already in flight when the first refusal came (the worker runs 2 at a time).
        assert 1 <= len(refused) <= 2
        assert accounted(provider) == 8 + len(refused)
        assert Judge.objects.get(name="judge-x").send_temperature is False
    finally:
        provider.stop()


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.serial
def test_with_a_real_worker_a_refusal_stops_the_run_and_exits_non_zero(celery_worker_process) -> None:  # type: ignore[no-untyped-def]
    provider = FakeProvider().start()
    try:
        provider.refuse = {"temperature": DEPRECATED}
        make_example_study()
        add_judge(provider.url, "--concurrency", "2", "--no-adapt-parameters")
        out, error = run_judges("--repeats", "2", "--wait", "--poll", "0.5", "--wait-timeout", "90")
        assert error.startswith("judge-x: run stopped, 8 calls left pending: the model vlm-1 does not accept the "
                                "parameter 'temperature'"), (out, error)
        assert 1 <= len(provider.requests) <= 2  # the calls in flight at the first refusal, no more
        assert accounted(provider) == len(provider.requests)
    finally:
        provider.stop()
