# hctune — build everything, run the tests, run the demo.
#   make        the allocator builds, the tracer, the replay harness and baselines (build/)
#   make test   the Debian packages (scripts/setup-deps.sh), everything above, the C test programs, the pytest suite
#   make demo   the Debian packages, then: profile a real program, search HC and the installed allocators, validate, emit, compare (a few minutes)
# Each component adds its rules in its own fragment (allocator/, tracer/, allocator/replay/)
# and appends its products to ALL and its test programs to TEST_BINS.

CC      ?= cc
PYTHON  ?= python3
VENV    := .venv
PY      := $(VENV)/bin/python
BUILD   := build
# configs/build.toml says how each C part is compiled; tests/test_build_recipes.py checks the
# fragments' commands against it (`make -n`)
CFLAGS_COMMON := -O2 -g -fPIC -Wall -Wextra -std=gnu11
ALL       :=
TEST_BINS :=

.PHONY: all venv test demo clean
all: venv build-all

$(BUILD):
	mkdir -p $(BUILD)

# The Python package, pinned in pyproject.toml, in a virtualenv of the checkout.
venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $@

include allocator/allocator.mk
include tracer/tracer.mk
include allocator/replay/replay.mk

.PHONY: build-all
build-all: $(ALL)

# Both first install the missing Debian packages (configs/debian-packages.txt; as root) or
# print the one `sudo apt-get install` line that is needed.
.PHONY: deps
deps:
	@bash scripts/setup-deps.sh

# The suite in TEST_JOBS pytest-xdist processes, a test file to a process (its module fixtures
# built once); the tests mostly wait on programs, servers and compilers, so two overlap on 2 cores.
TEST_JOBS ?= 2
test:
	@bash scripts/setup-deps.sh
	$(MAKE) all $(TEST_BINS)
	$(VENV)/bin/pytest -q -rs --durations=40 -n $(TEST_JOBS) --dist loadfile tests

demo:
	@bash scripts/setup-deps.sh
	$(MAKE) all
	bash bench/demo.sh

clean:
	rm -rf $(BUILD)
