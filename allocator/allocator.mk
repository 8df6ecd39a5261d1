# allocator/ — the HC allocator (Hasan & Chang 2006, §3).  The C in allocator/hc/ is one
# translation unit, assembled with the knobs by templates/malloc.c.j2; everything is built from
# that rendered file so the Makefile, the tests and `hctune emit` compile the same source.
#   build/malloc-generic.c       the generic preset (Table 6), rendered
#   build/libhcmalloc.so         it, for LD_PRELOAD
#   build/libhcmalloc-debug.so   it with HC_DEBUG=1: what each call touches checked, the whole heap every N calls
HC_DIR    := allocator/hc
HC_INPUTS := $(wildcard $(HC_DIR)/*.c $(HC_DIR)/*.h) templates/malloc.c.j2 \
             configs/knobs.toml configs/presets.toml \
             tuner/hctune/render.py tuner/hctune/knobs.py tuner/hctune/templating.py
# configs/build.toml's [hc] cflags + make_extra (tests/test_build_recipes.py checks they agree)
HC_CFLAGS := -O2 -g -fPIC -shared -pthread -Wall -Wextra -std=gnu11

$(BUILD)/malloc-generic.c: $(HC_INPUTS) | $(BUILD) $(VENV)/.installed
	$(PY) -m hctune.render --preset generic -o $@

$(BUILD)/libhcmalloc.so: $(BUILD)/malloc-generic.c
	$(CC) $(HC_CFLAGS) -o $@.tmp $< && mv $@.tmp $@

$(BUILD)/libhcmalloc-debug.so: $(BUILD)/malloc-generic.c
	$(CC) $(HC_CFLAGS) -DHC_DEBUG=1 -o $@.tmp $< && mv $@.tmp $@

ALL += $(BUILD)/malloc-generic.c $(BUILD)/libhcmalloc.so $(BUILD)/libhcmalloc-debug.so
