"""``add_judge NAME --family F --provider P --model M [--base-url URL] --api-key-env VAR [limits]``
(docs/protocol.md "Commands").

Providers: openai (Chat Completions, also OpenAI-compatible servers), openai-responses,
anthropic, gemini, azure-openai; ``--base-url`` defaults to the provider's public endpoint
(required for azure-openai and for compatible servers). Which parameters are sent can be set
here (``--token-param``, ``--no-temperature``, ``--seed``, ``--reasoning-effort``,
``--no-structured-output``, ``--api-version``), and so can prices (``--price-input``,
``--price-output`` in dollars per million tokens, ``--batch-discount``). ``--update`` changes the
given settings of an existing judge (the fix a "does not accept the parameter" error names).
``--adapt-parameters`` (the default for new judges) lets a run make that fix itself: the refused
parameter is dropped, the call retried once, and what was learned is stored on the judge.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from judges.services.judges import judge_create, judge_update

FIELDS = {
    "family": "family", "provider": "provider", "model": "model", "base_url": "base_url",
    "api_key_env": "api_key_env", "max_image_edge": "max_image_edge", "max_image_bytes": "max_image_bytes",
    "max_request_bytes": "max_request_bytes", "rate": "rate_per_second", "concurrency": "concurrency",
    "timeout": "timeout_seconds", "max_invalid_retries": "max_invalid_retries",
    "max_transport_retries": "max_transport_retries", "temperature": "temperature", "max_tokens": "max_tokens",
    "api_version": "api_version", "token_param": "token_param", "send_temperature": "send_temperature",
    "seed": "seed", "reasoning_effort": "reasoning_effort", "structured_output": "structured_output",
    "price_input": "price_input_per_mtok", "price_output": "price_output_per_mtok",
    "batch_discount": "batch_discount", "adapt_parameters": "adapt_parameters",
}


class Command(ArbiterCommand):
    help = "Register an automatic judge. The API key is read from --api-key-env at call time, never stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--update", action="store_true", help="change the given settings of an existing judge")
        parser.add_argument("--family", default=None, help="vendor family (committee eligibility)")
        parser.add_argument("--provider", default=None,
                            help="openai (default), openai-responses, anthropic, gemini or azure-openai")
        parser.add_argument("--model", default=None)
        parser.add_argument("--base-url", default=None, help="default: the provider's public endpoint")
        parser.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the key")
        parser.add_argument("--max-image-edge", type=int)
        parser.add_argument("--max-image-bytes", type=int)
        parser.add_argument("--max-request-bytes", type=int)
        parser.add_argument("--rate", help="calls per second across all workers, e.g. 2/s or 30/m")
        parser.add_argument("--concurrency", type=int, help="calls in flight across all workers (default 4)")
        parser.add_argument("--timeout", type=float, help="seconds for the whole HTTP exchange (default 120)")
        parser.add_argument("--max-invalid-retries", type=int)
        parser.add_argument("--max-transport-retries", type=int)
        parser.add_argument("--temperature", type=float, help="default: 0 where the model allows it")
        parser.add_argument("--no-temperature", dest="send_temperature", action="store_const", const=False,
                            default=None, help="never send temperature")
        parser.add_argument("--send-temperature", dest="send_temperature", action="store_const", const=True)
        parser.add_argument("--seed", default=None, help="an integer sent where the provider takes one, or none")
        parser.add_argument("--max-tokens", type=int, help="output token cap (default 4096)")
        parser.add_argument("--token-param", default=None, help="auto (default), max_tokens or max_completion_tokens")
        parser.add_argument("--reasoning-effort", default=None, help="none, minimal, low, medium or high")
        parser.add_argument("--no-structured-output", dest="structured_output", action="store_const", const=False,
                            default=None, help="do not send the JSON schema (the validator still decides)")
        parser.add_argument("--structured-output", dest="structured_output", action="store_const", const=True)
        parser.add_argument("--adapt-parameters", dest="adapt_parameters", action="store_const", const=True,
                            default=None,
                            help="on by default for new judges (stored on the judge): when the provider refuses a "
                                 "parameter for the model (HTTP 400, e.g. temperature), drop it, retry that call once "
                                 "and, if the retry succeeds, remember it on the judge; structured output and the "
                                 "images are never dropped")
        parser.add_argument("--no-adapt-parameters", dest="adapt_parameters", action="store_const", const=False,
                            help="stop the run at the first refused parameter instead")
        parser.add_argument("--api-version", default=None, help="anthropic-version, or Azure api-version")
        parser.add_argument("--price-input", default=None, help="dollars per million input tokens")
        parser.add_argument("--price-output", default=None, help="dollars per million output tokens")
        parser.add_argument("--batch-discount", default=None, help="fraction off for batch calls (default 0.5)")

    def run(self, *args: Any, **o: Any) -> None:
        fields = {model_field: o[option] for option, model_field in FIELDS.items()}
        if o["update"]:
            judge = judge_update(name=o["name"], **fields)
        else:
            if fields["model"] is None:
                from annotation.errors import ValidationFailed

                raise ValidationFailed("a model id is required (--model)", field="model")
            fields["family"] = fields["family"] or ""
            fields["api_key_env"] = fields["api_key_env"] or ""
            judge = judge_create(name=o["name"], **fields)
        self.stdout.write(judge.name)
