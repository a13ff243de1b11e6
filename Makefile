# Makefile -- the short commands of evtc: `make demo`, `make test`.
# The build itself is CMake (CMakeLists.txt); this file installs what is
# missing, configures, builds, trains the digits demo and runs the tests.
SHELL := /bin/bash
# Build: compiler, CMake, protobuf-c and onnx.proto (ONNX frontend).
# Tests: NumPy, ONNX's Python package and its conformance data; bench/cpu.sh: OpenBLAS, PyTorch.
PACKAGES := cmake gcc g++ make pkg-config libprotobuf-c-dev protobuf-c-compiler libonnx-dev \
            python3-numpy python3-onnx libonnx-testdata coinor-libcbc-dev graphviz python3-torch python3-torchvision \
            libopenblas-dev
BUILD := build
ASAN_BUILD := build-asan
JOBS ?= 2
# Idle OpenMP threads sleep instead of spinning: the interpreter's parallel
# loops are short, and spinning teams of concurrent tests or builds (two at
# a time on a small machine) slowed training 3-5x in our measurements.
export OMP_WAIT_POLICY ?= passive

.PHONY: deps build demo test clean fuzz-onnx fuzz-evt

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

# libFuzzer on the ONNX reader (tests/fuzz/onnx_fuzz.c) with clang, ASan and
# UBSan, for FUZZ_SECONDS (default 60), seeded from tests/fuzz/corpus/; new
# inputs collect in $(FUZZ_BUILD)/corpus, crashes in $(FUZZ_BUILD)/crash-*.
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
fuzz-onnx:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link"
	cmake --build $(FUZZ_BUILD) --target evtc -j$(JOBS)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer -fopenmp -Iinclude -Isrc tests/fuzz/onnx_fuzz.c \
	  $(FUZZ_BUILD)/libevtc.a -lprotobuf-c -lm -o $(FUZZ_BUILD)/onnx_fuzz
	mkdir -p $(FUZZ_BUILD)/corpus
	cd $(FUZZ_BUILD) && ./onnx_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -max_len=4096 corpus ../tests/fuzz/corpus

# libFuzzer on the text IR reader and autodiff (tests/fuzz/evt_fuzz.c), the same way, for FUZZ_SECONDS, seeded
# from examples/ and bench/epilogue/ (the .evt files); new inputs collect in $(FUZZ_BUILD)/corpus-evt.
fuzz-evt:
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_FLAGS="$(FUZZ_FLAGS) -fsanitize=fuzzer-no-link"
	cmake --build $(FUZZ_BUILD) --target evtc -j$(JOBS)
	clang $(FUZZ_FLAGS) -fsanitize=fuzzer -fopenmp -Iinclude -Isrc tests/fuzz/evt_fuzz.c \
	  $(FUZZ_BUILD)/libevtc.a -lprotobuf-c $$(pkg-config --libs cbc) -lm -o $(FUZZ_BUILD)/evt_fuzz
	mkdir -p $(FUZZ_BUILD)/corpus-evt
	cd $(FUZZ_BUILD) && ./evt_fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -max_len=8192 corpus-evt ../examples ../bench/epilogue

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
