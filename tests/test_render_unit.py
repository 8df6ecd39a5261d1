"""The translation unit's file order is said once, in allocator/hc/hc_all.c: render reads it,
and every file of allocator/hc/ is in it once."""

from hctune import paths, render


def test_every_allocator_file_is_in_the_unit_once():
    hc = paths.ALLOCATOR / "hc"
    files = {p.name for p in hc.iterdir() if p.suffix in (".c", ".h")} - {render.UNIT}
    assert len(render.SOURCES) == len(set(render.SOURCES))
    assert set(render.SOURCES) == files, (
        f"allocator/hc/hc_all.c misses {sorted(files - set(render.SOURCES))} or lists "
        f"{sorted(set(render.SOURCES) - files)}: add the file's #include line there")
    # headers first, as the rendered malloc.c needs them before any code
    kinds = [s.endswith(".h") for s in render.SOURCES]
    assert kinds == sorted(kinds, reverse=True)


def test_the_rendered_source_follows_the_unit():
    text = render.render_malloc({})
    at = [text.index(f" {s} ====") for s in render.SOURCES]
    assert at == sorted(at)
