# Build the Pin tool with the Pin kit's own build rules:
#   make -C tracer -f pin.mk PIN_ROOT=/path/to/pin-kit     (or, from the top: make pintool PIN_ROOT=...)
# Output: tracer/obj-intel64/hctrace_pin.so (copied to build/hctrace_pin.so by `make pintool`).
ifeq ($(PIN_ROOT),)
$(error PIN_ROOT is not set: point it at an Intel Pin kit (pin-*-gcc-linux))
endif
CONFIG_ROOT := $(PIN_ROOT)/source/tools/Config
include $(CONFIG_ROOT)/makefile.config
TOOL_ROOTS := hctrace_pin
TOOL_CXXFLAGS += -I.
include $(TOOLS_ROOT)/Config/makefile.default.rules
