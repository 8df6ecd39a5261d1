"""The one Jinja2 environment: templates/ for pages and malloc.c, allocator/ for the C it inlines
(both from hctune.paths.data_dir(): the checkout or the installed package data)."""

import functools

import jinja2

from hctune import paths


@functools.lru_cache(maxsize=None)
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(paths.data_dir() / "templates"),
                                         str(paths.data_dir() / "allocator")]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        # HTML pages are named *.html.j2: escape what they show (a trace's command line comes
        # from whoever uploaded it); the emitted malloc.c has its own overlay (render.py).
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
    )


def render(name: str, **context) -> str:
    return environment().get_template(name).render(**context)
