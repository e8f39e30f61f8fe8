"""``add_judge NAME --family F --provider openai --model M --base-url URL --api-key-env VAR [limits]`` (SPEC §9)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandParser

from annotation.management.base import ArbiterCommand
from judges.services.judges import judge_create


class Command(ArbiterCommand):
    help = "Register an automatic judge. The API key is read from --api-key-env at call time, never stored."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--family", default="", help="vendor family (committee eligibility)")
        parser.add_argument("--provider", choices=["openai", "anthropic"], default="openai")
        parser.add_argument("--model", required=True)
        parser.add_argument("--base-url", required=True)
        parser.add_argument("--api-key-env", default="", help="NAME of the environment variable holding the key")
        parser.add_argument("--max-image-edge", type=int)
        parser.add_argument("--max-image-bytes", type=int)
        parser.add_argument("--max-request-bytes", type=int)
        parser.add_argument("--rate", help="calls per second across all workers, e.g. 2/s or 30/m")
        parser.add_argument("--concurrency", type=int, help="calls in flight across all workers (default 4)")
        parser.add_argument("--timeout", type=float, help="seconds per HTTP request (default 120)")
        parser.add_argument("--max-invalid-retries", type=int)
        parser.add_argument("--max-transport-retries", type=int)
        parser.add_argument("--temperature", type=float)
        parser.add_argument("--max-tokens", type=int)

    def run(self, *args: Any, **o: Any) -> None:
        judge = judge_create(
            name=o["name"],
            family=o["family"],
            provider=o["provider"],
            model=o["model"],
            base_url=o["base_url"],
            api_key_env=o["api_key_env"],
            max_image_edge=o["max_image_edge"],
            max_image_bytes=o["max_image_bytes"],
            max_request_bytes=o["max_request_bytes"],
            rate_per_second=o["rate"],
            concurrency=o["concurrency"],
            timeout_seconds=o["timeout"],
            max_invalid_retries=o["max_invalid_retries"],
            max_transport_retries=o["max_transport_retries"],
            temperature=o["temperature"],
            max_tokens=o["max_tokens"],
        )
        self.stdout.write(judge.name)
