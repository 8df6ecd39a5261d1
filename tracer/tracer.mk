# tracer/ — the trace format's C side: the reader library, the LD_PRELOAD tracer, the stats
# tool, the C test programs of the tracer, and (only with PIN_ROOT=...) the Pin tool.
HCT_DIR     := tracer
HCT_HEADERS := $(HCT_DIR)/hctrace.h $(HCT_DIR)/hctrace_varint.h $(HCT_DIR)/hctrace_enc.h

$(BUILD)/hctrace_read.o: $(HCT_DIR)/hctrace_read.c $(HCT_HEADERS) | $(BUILD)
	$(CC) $(CFLAGS_COMMON) -I$(HCT_DIR) -c -o $@ $<

$(BUILD)/libhctrace_read.a: $(BUILD)/hctrace_read.o
	rm -f $@ && ar rcs $@ $^

ALL += $(BUILD)/libhctrace_read.a

# The LD_PRELOAD tracer: no libc beyond the syscalls wrappers in its hot path.
$(BUILD)/libhctrace.so: $(HCT_DIR)/hctrace_preload.c $(HCT_HEADERS) $(HCT_DIR)/hctrace_map.h | $(BUILD)
	$(CC) $(CFLAGS_COMMON) -fvisibility=hidden -ftls-model=initial-exec -shared -I$(HCT_DIR) \
	  -o $@ $< -ldl -lpthread

ALL += $(BUILD)/libhctrace.so

# Whole-trace statistics and dumps in C (hctune stats calls it for big traces).
$(BUILD)/hctrace-tool: $(HCT_DIR)/hctrace_tool.c $(HCT_DIR)/hctrace_map.h $(BUILD)/libhctrace_read.a
	$(CC) $(CFLAGS_COMMON) -I$(HCT_DIR) -o $@ $< $(BUILD)/libhctrace_read.a

ALL += $(BUILD)/hctrace-tool

# C test programs of the tracer (tests/test_trace_*.py).  trace_known logs pointer values
# after realloc/free on purpose, which gcc 12 warns about.
$(BUILD)/tests/trace_known: tests/c/trace_known.c | $(BUILD)
	mkdir -p $(BUILD)/tests
	$(CC) -O1 -g -Wall -Wextra -Wno-use-after-free -Wno-maybe-uninitialized -std=gnu11 -o $@ $< -lpthread

TEST_BINS += $(BUILD)/tests/trace_known

# The Pin tool: only with a Pin kit (PIN_ROOT); Pin cannot be installed on every machine, so
# without it this says so and succeeds, and the Pin tests skip.
.PHONY: pintool
pintool: | $(BUILD)
ifeq ($(PIN_ROOT),)
	@echo "pintool: PIN_ROOT is not set, skipping the Pin tool (make pintool PIN_ROOT=/path/to/pin-kit)"
else
	$(MAKE) -C $(HCT_DIR) -f pin.mk PIN_ROOT=$(PIN_ROOT) obj-intel64/hctrace_pin.so
	cp $(HCT_DIR)/obj-intel64/hctrace_pin.so $(BUILD)/hctrace_pin.so
endif
