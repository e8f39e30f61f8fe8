"""annotation.views.links.url: the same URL as Django's reverse, from a pattern reversed once."""

from __future__ import annotations

import pytest
from django.urls import clear_script_prefix, reverse, set_script_prefix

from annotation.views.links import url

NAMES = [  # (name, arguments): every link a trial page and the rater API build
    ("rater:vote", ["tok_EN-1"]), ("rater:revise", ["tok_EN-1"]), ("rater:problem", ["abcDEF123"]),
    ("rater:undo", ["abcDEF123"]), ("rater:instructions", ["LinkToken_-9"]), ("rater:pause", ["LinkToken_-9"]),
    ("rater:link", ["LinkToken_-9"]), ("rater:image", ["tok_EN-1", "ref"]), ("rater:image", ["x", "item"]),
    ("rater:api-vote", ["tok_EN-1"]),
]


@pytest.mark.parametrize(("name", "args"), NAMES)
def test_url_is_reverse(name: str, args: list[str]) -> None:
    assert url(name, *args) == reverse(name, args=args)
    assert url(name, *args[::-1]) == reverse(name, args=args[::-1])  # arguments land in their own places


def test_arguments_reverse_would_quote_and_a_script_prefix() -> None:
    for odd in ["a b", "ü", "a%2Fb", "x?y"]:
        assert url("rater:problem", odd) == reverse("rater:problem", args=[odd])
    set_script_prefix("/arbiter/")
    try:
        assert url("rater:vote", "tok") == reverse("rater:vote", args=["tok"]) == "/arbiter/t/tok/vote/"
    finally:
        clear_script_prefix()
    assert url("rater:vote", "tok") == "/t/tok/vote/"
