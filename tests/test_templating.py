"""The project's one Jinja2 environment escapes what HTML pages show (a trace's command line,
a study's name come from users of `hctune serve`) and leaves the emitted C alone."""

from hctune import templating


def test_html_pages_are_escaped_and_c_is_not():
    env = templating.environment()
    assert env.autoescape("serve_traces.html.j2") and env.autoescape("report.html.j2")
    assert not env.autoescape("malloc.c.j2")
    page = env.from_string("<code>{{ command }}</code>")
    assert page.render(command="<script>") == "<code>&lt;script&gt;</code>"
