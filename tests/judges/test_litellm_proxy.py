"""One end-to-end judge run against a server nobody in this project wrote: the LiteLLM proxy.

The proxy (PyPI ``litellm[proxy]``, the ``litellm`` extra of pyproject.toml) runs on loopback in
mock mode (``mock_response``: no upstream is called) and serves both the OpenAI Chat Completions
and the Anthropic Messages wire formats; ``run_judges`` goes through the ``openai`` and
``anthropic`` adapters unpatched. The mock answers every call with the same reply, scoring two
axes: it is valid for the comparison whose page has those two active axes and invalid (the
validator stays the final word, after the repair turns) for the one that also has a TABLE axis.

The proxy is found as ``$ARBITER_LITELLM_BIN``, else ``litellm`` next to this Python or on PATH.
Without it the test is skipped, unless ``ARBITER_REQUIRE_LITELLM=1`` (then it fails).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command

from judges.models import JudgeOutput
from tests.judges.factories import make_example_study, make_judge

pytestmark = [pytest.mark.slow, pytest.mark.django_db]
MASTER_KEY = "sk-arbiter-litellm-test-0123456789"
REPLY = {"winner": "A", "confidence": 4, "reason": "mock",
         "axes": [{"id": "GLOBAL_LAYOUT_FIDELITY", "score": 1}, {"id": "TEXT_VISUAL_PRESENTATION", "score": 0}]}


def _binary() -> str | None:
    explicit = os.environ.get("ARBITER_LITELLM_BIN")
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "litellm"
    return str(beside) if beside.exists() else shutil.which("litellm")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def litellm_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _binary()
    if not binary:
        message = "the LiteLLM proxy is not installed (pip install -e '.[litellm]')"
        if os.environ.get("ARBITER_REQUIRE_LITELLM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "config.yaml"
    config.write_text(
        "model_list:\n"
        "  - model_name: judge-mock\n"
        "    litellm_params:\n"
        "      model: openai/gpt-4o-mini\n"
        "      api_key: sk-upstream-never-called\n"
        f"      mock_response: {json.dumps(json.dumps(REPLY))}\n"
    )
    port = _free_port()
    # Not ours to share: LiteLLM would take DATABASE_URL as its own database (and want prisma).
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL")}
    env.update(LITELLM_MASTER_KEY=MASTER_KEY, LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_TELEMETRY="False",
               NO_PROXY="*")
    log = (folder / "proxy.log").open("wb")
    proxy = subprocess.Popen([binary, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
                             cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proxy.poll() is not None:
                pytest.fail(f"the LiteLLM proxy exited: {(folder / 'proxy.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("the LiteLLM proxy did not start within 120 s")
        yield url
    finally:
        if proxy.poll() is None:
            os.killpg(proxy.pid, signal.SIGTERM)
            try:
                proxy.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proxy.pid, signal.SIGKILL)
        log.close()


@pytest.mark.parametrize(("provider", "suffix"), [("openai", "/v1"), ("anthropic", "")])
def test_a_judge_run_through_the_litellm_proxy(litellm_proxy: str, provider: str, suffix: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("ARBITER_TEST_JUDGE_KEY", MASTER_KEY)
    make_example_study()
    make_judge(base_url=litellm_proxy + suffix, provider=provider, model="judge-mock", max_invalid_retries=1,
               concurrency=1)
    out = StringIO()
    call_command("run_judges", "example", "--judge", "judge-x", "--set", "human", "--concurrency", "1", stdout=out)
    rows = {(o.comparison.external_id, o.order): o for o in JudgeOutput.objects.select_related("comparison")}
    assert len(rows) == 4 and not [o for o in rows.values() if o.status in ("pending", "running")]
    # c2's page has exactly the two axes the mock scores: valid, canonicalized per order.
    assert rows["c2", "primary"].status == "valid" and rows["c2", "primary"].winner == "A"
    assert rows["c2", "swapped"].status == "valid" and rows["c2", "swapped"].winner == "B"
    # c1's page also has a TABLE axis: invalid after a repair turn, with the validator's reason.
    c1 = rows["c1", "primary"]
    assert c1.status == "invalid" and "exactly the active axes" in c1.error and c1.calls == 2
    for output in rows.values():
        assert output.input_tokens and output.output_tokens and output.request_id
        assert output.served_model
    assert "recorded: 6 requests" in out.getvalue()
