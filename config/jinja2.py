"""The Jinja2 environment of the rater's trial templates (``jinja2/``, the engine ``"jinja2"``).

The trial page's state (the question of each kind, the end page, the problem report) is what every
answer renders: an htmx answer returns it alone. Jinja2 compiles it to Python and renders it in a
fraction of what Django's engine takes (docs/benchmarks-history.md, "sixth pass"); every other page stays
with Django's templates. Undefined variables render as nothing, as in Django's templates
(``ChainableUndefined``: ``posted.verdict`` is empty when nothing was posted), and the output is
autoescaped. The two Django filters the templates use are registered under their Django names.
"""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import linebreaksbr, pluralize

from jinja2 import ChainableUndefined, Environment


def environment(**options: Any) -> Environment:
    options["undefined"] = ChainableUndefined
    env = Environment(**options)
    env.filters.update(pluralize=pluralize, linebreaksbr=linebreaksbr)
    return env
