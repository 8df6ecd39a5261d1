# allocator/replay/ — the replay harness (build/hcreplay), the Kingsley power-of-two baseline
# (build/libkingsley.so, the paper's CK) and the bump allocator that measures the harness's own
# overhead (build/libhcbump.so).  Every allocator runs in the same hcreplay, via LD_PRELOAD.
RPL_DIR  := allocator/replay
RPL_SRCS := $(RPL_DIR)/hcreplay_main.c $(RPL_DIR)/hcreplay_load.c $(RPL_DIR)/hcreplay_loop.c \
            $(RPL_DIR)/hcreplay_mem.c $(RPL_DIR)/hcreplay_hc.c $(RPL_DIR)/hcreplay_threads.c \
            $(RPL_DIR)/hcreplay_explain.c $(RPL_DIR)/hcreplay_out.c
RPL_HDRS := $(RPL_DIR)/hcreplay.h $(RPL_DIR)/hcreplay_op.h $(RPL_DIR)/hcreplay_hc.h $(wildcard allocator/hc/hc_stats.h) \
            tracer/hctrace.h

# -fno-builtin-malloc etc.: the loop must really call the allocator, never have a
# malloc/free pair folded away by the compiler.
$(BUILD)/hcreplay: $(RPL_SRCS) $(RPL_HDRS) $(BUILD)/libhctrace_read.a | $(BUILD)
	$(CC) $(CFLAGS_COMMON) -fno-builtin -I$(RPL_DIR) -Itracer -Iallocator/hc \
	  -o $@ $(RPL_SRCS) $(BUILD)/libhctrace_read.a -ldl -lpthread

# -fno-builtin: gcc would turn malloc+memset inside calloc into a call to calloc itself.
$(BUILD)/libkingsley.so: $(RPL_DIR)/kingsley.c $(RPL_DIR)/api_derived.h | $(BUILD)
	$(CC) $(CFLAGS_COMMON) -fno-builtin -shared -o $@ $< -lpthread

$(BUILD)/libhcbump.so: $(RPL_DIR)/bump.c $(RPL_DIR)/api_derived.h | $(BUILD)
	$(CC) $(CFLAGS_COMMON) -fno-builtin -shared -o $@ $<

ALL += $(BUILD)/hcreplay $(BUILD)/libkingsley.so $(BUILD)/libhcbump.so

# C test programs: the malloc API of the Kingsley baseline, run under LD_PRELOAD by pytest.
$(BUILD)/tests/replay_malloc_api: tests/c/replay_malloc_api.c | $(BUILD)
	mkdir -p $(BUILD)/tests
	$(CC) $(CFLAGS_COMMON) -fno-builtin -o $@ $< -lpthread

TEST_BINS += $(BUILD)/tests/replay_malloc_api
