"""Batch mode (issue 14 item 5) against loopback emulators of the OpenAI (and Azure), Anthropic and Gemini batch APIs."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Sum

from judges.models import JudgeBatch, JudgeOutput
from judges.services.batches import judge_batch_submit, judge_batches_poll
from tests.judges.factories import make_example_study, make_judge
from tests.judges.fake_provider import FakeProvider

pytestmark = pytest.mark.django_db
ARGS = ("example", "--judge", "judge-x", "--set", "human")


def run(*extra: str) -> str:
    out = StringIO()
    call_command("run_judges", *ARGS, *extra, stdout=out)
    return out.getvalue()


def batch_judge(provider: FakeProvider, kind: str, **fields: object):  # type: ignore[no-untyped-def]
    url = provider.url if kind == "openai" else provider.root_url
    model = {"openai": "gpt-5-mini", "anthropic": "claude-sonnet-4-5", "gemini": "gemini-2.5-flash"}[kind]
    return make_judge(base_url=url, provider=kind, model=model, **fields)


@pytest.mark.parametrize("kind", ["openai", "anthropic", "gemini"])
def test_batch_run_stores_the_same_rows_as_live_calls(provider: FakeProvider, kind: str) -> None:
    make_example_study()
    batch_judge(provider, kind, price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    out = run("--batch", "--wait", "--poll", "0.01")
    batch = JudgeBatch.objects.get()
    assert f"batch {batch.pk} submitted as {batch.provider_batch_id}, 4 calls" in out
    assert "valid 4, invalid 0, failed 0, pending 0" in out
    assert provider.problems == []  # every batch line carried the three images and the ACTIVE_AXES
    rows = JudgeOutput.objects.all()
    assert {r.status for r in rows} == {"valid"} and {r.batch_id for r in rows} == {str(batch.pk)}
    assert {r.calls for r in rows} == {1} and len(provider.requests) == 4
    assert {r.input_tokens for r in rows} == {1200}
    # custom_id is the output id: every output got its own answer back.
    swapped = rows.filter(order="swapped").first()
    assert swapped is not None and swapped.winner == "B"
    batch.refresh_from_db()
    assert batch.status == "stored" and batch.stored == 4
    # Batch calls are billed at the batch discount: 4 × (1,200 × $2 + 40 × $8) / 1M × 0.5.
    assert "cost $0.0054" in out


def test_polling_is_idempotent_and_resumes_after_a_crash_between_submit_and_store(provider: FakeProvider) -> None:
    study = make_example_study()
    judge = batch_judge(provider, "openai")
    batch = judge_batch_submit(study=study, judge=judge, set="human")
    assert batch is not None and batch.status == "submitted"
    # ... the process dies here. The outputs are held by the batch, so a live run does not call them:
    live = run()
    assert "4 calls, 0 new, 0 already done, 0 to run" in live
    assert len(provider.requests) == 4  # only the batch lines
    # A new process polls: first "in progress", then the results are stored, once.
    assert judge_batches_poll() == {"submitted": 1}
    assert judge_batches_poll() == {"stored": 1}
    assert judge_batches_poll() == {}
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}
    assert JudgeOutput.objects.aggregate(n=Sum("calls"))["n"] == len(provider.requests) == 4


def test_cancel_stores_what_was_done_and_releases_the_rest(provider: FakeProvider) -> None:
    make_example_study()
    batch_judge(provider, "anthropic")
    run("--batch")
    out = run("--cancel")
    assert "cancelled, 1 results stored" in out
    statuses = sorted(JudgeOutput.objects.values_list("status", flat=True))
    assert statuses == ["pending", "pending", "pending", "valid"]
    assert not JudgeOutput.objects.filter(status="running").exists()
    run("--concurrency", "1")  # a live run takes the released calls
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}


def test_a_batch_id_that_does_not_exist_is_one_line(provider: FakeProvider) -> None:
    make_example_study()
    batch_judge(provider, "openai")
    with pytest.raises(CommandError) as info:
        run("--cancel", "batch_nope")
    assert str(info.value) == "no open batch 'batch_nope' of judge judge-x in study example"
    # A batch the provider no longer knows: failed with the reason, its outputs go back to pending.
    run("--batch")
    JudgeBatch.objects.update(provider_batch_id="batch_gone")
    assert judge_batches_poll() == {"failed": 1}
    batch = JudgeBatch.objects.get()
    assert "HTTP 404" in batch.error
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"pending"}


def test_dry_run_of_a_batch_shows_the_discounted_cost(provider: FakeProvider) -> None:
    make_example_study()
    batch_judge(provider, "openai", price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    live = run("--dry-run")
    batch = run("--dry-run", "--batch")
    assert "batch discount 50%" in batch
    live_cost = float(live.split("cost $")[1].split()[0])
    batch_cost = float(batch.split("cost $")[1].split()[0])
    assert batch_cost == pytest.approx(live_cost / 2, abs=0.0001)
    assert not JudgeOutput.objects.exists()


def test_a_run_larger_than_one_batch_file_is_split(provider: FakeProvider, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr("judges.services.batches.MAX_BATCH_BYTES", 1)  # one call per batch
    make_example_study()
    batch_judge(provider, "openai")
    out = run("--batch", "--wait", "--poll", "0.01")
    assert out.count("submitted as") == 4
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"valid"}
    batches = sorted(str(pk) for pk in JudgeBatch.objects.values_list("pk", flat=True))
    assert len(batches) == 4 and sorted(JudgeOutput.objects.values_list("batch_id", flat=True)) == batches
    assert JudgeOutput.objects.aggregate(n=Sum("calls"))["n"] == len(provider.requests) == 4


KEY = "sk-test-secret-0123456789"  # the conftest's ARBITER_TEST_JUDGE_KEY


@pytest.mark.parametrize(
    ("path", "version", "calls"),
    [
        # v1: the files and batches API under the base URL, no api-version.
        ("/openai/v1", None, ["POST /openai/v1/files", "POST /openai/v1/batches", "GET /openai/v1/batches/batch_1",
                              "GET /openai/v1/batches/batch_1", "GET /openai/v1/files/file-out-batch_1/content"]),
        # deployment form: the resource's /openai/ root, the version as a query after the path.
        ("/openai/deployments/judge-dep?api-version=2025-03-01-preview", "2025-03-01-preview",
         ["POST /openai/files?api-version=2025-03-01-preview", "POST /openai/batches?api-version=2025-03-01-preview",
          "GET /openai/batches/batch_1?api-version=2025-03-01-preview",
          "GET /openai/batches/batch_1?api-version=2025-03-01-preview",
          "GET /openai/files/file-out-batch_1/content?api-version=2025-03-01-preview"]),
    ],
)
def test_azure_openai_batch_for_both_url_forms(provider: FakeProvider, path: str, version: str | None,
                                               calls: list[str]) -> None:
    make_example_study()
    make_judge(base_url=provider.root_url + path, provider="azure-openai", model="judge-dep",
               price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    provider.batch_api_key = KEY
    provider.batch_api_version = version
    out = run("--batch", "--wait", "--poll", "0.01")
    assert provider.problems == []  # the api-key header (alone) and the api-version on every call
    assert provider.batch_calls == calls
    assert "valid 4, invalid 0, failed 0, pending 0" in out and "cost $0.0054" in out
    assert {line["url"] for line in provider.batch_lines} == {"/chat/completions"}
    assert {line["body"]["model"] for line in provider.batch_lines} == {"judge-dep"}
    batch = JudgeBatch.objects.get()
    assert batch.status == "stored" and batch.stored == 4 and batch.provider_batch_id == "batch_1"
    rows = JudgeOutput.objects.all()
    assert {r.status for r in rows} == {"valid"} and {r.calls for r in rows} == {1} and len(provider.requests) == 4


def test_azure_openai_batch_deployment_name_comes_from_the_url_and_cancel_uses_the_version(provider: FakeProvider) -> None:
    make_example_study()
    make_judge(base_url=provider.root_url + "/openai/deployments/vision-dep", provider="azure-openai",
               model="gpt-4o", api_version="2024-10-21")
    provider.batch_api_key = KEY
    provider.batch_api_version = "2024-10-21"
    run("--batch")
    out = run("--cancel")
    assert "cancelled, 1 results stored" in out
    assert provider.problems == []
    assert "POST /openai/batches/batch_1/cancel?api-version=2024-10-21" in provider.batch_calls
    assert {line["body"]["model"] for line in provider.batch_lines} == {"vision-dep"}
    assert sorted(JudgeOutput.objects.values_list("status", flat=True)) == ["pending", "pending", "pending", "valid"]
    assert not JudgeOutput.objects.filter(status="running").exists()


def test_azure_openai_batch_with_a_wrong_key_is_refused_in_one_line(provider: FakeProvider) -> None:
    make_example_study()
    make_judge(base_url=provider.root_url + "/openai/v1", provider="azure-openai", model="judge-dep")
    provider.batch_api_key = "another-key"
    with pytest.raises(CommandError) as info:
        run("--batch")
    assert "the batch could not be submitted" in str(info.value) and "HTTP 401" in str(info.value)
    provider.problems.clear()
    assert set(JudgeOutput.objects.values_list("status", flat=True)) == {"pending"}
