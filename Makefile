# Makefile -- the short commands of evtc: `make demo`, `make test`.
# The build itself is CMake (CMakeLists.txt); this file installs what is
# missing, configures, builds, trains the digits demo and runs the tests.
SHELL := /bin/bash
# Build: compiler, CMake, protobuf-c and onnx.proto (ONNX frontend).
# Tests: NumPy, ONNX's Python package and its conformance data.
PACKAGES := cmake gcc make pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev \
            python3-numpy python3-onnx libonnx-testdata
BUILD := build
ASAN_BUILD := build-asan
JOBS ?= 2
# Idle OpenMP threads sleep instead of spinning: the interpreter's parallel
# loops are short, and spinning teams of concurrent tests or builds (two at
# a time on a small machine) slowed training 3-5x in our measurements.
export OMP_WAIT_POLICY ?= passive

.PHONY: deps build demo test clean

# Installs the Debian packages that are missing (apt-get runs only then).
deps:
	@missing=""; \
	for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update && apt-get install -y --no-install-recommends $$missing; \
	fi

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVTC_WERROR=ON
	cmake --build $(BUILD) -j$(JOBS)

demo: deps build
	./$(BUILD)/evtc train examples/mlp.evt --data data/digits

# Tests twice: the optimised build, then a Debug build with ASan + UBSan
# (without the tests labelled slow: whole exported models).
test: deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DEVTC_SANITIZE=ON -DEVTC_WERROR=ON
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) --label-exclude slow

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
