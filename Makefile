# Set-up and everyday commands. `make demo` and `make test` work on a fresh Debian machine:
# they install missing packages (scripts/install_deps.sh), configure, build into build/, and run.
JOBS ?= $(shell nproc)
# Recipes use bash (the `time` keyword in `timed`).
SHELL := /bin/bash
BUILD ?= build
# The project's Python environment (PyTorch front-end, transformers oracle tests), made only when
# missing or when its requirements change; CMake learns its interpreter through SK_PYTHON.
VENV ?= $(BUILD)/venv
PY_REQUIREMENTS = python/requirements-dev.txt
CMAKE_PY = -DSK_PYTHON=$(abspath $(VENV))/bin/python

.PHONY: all deps venv configure build demo test test-release test-asan test-tsan test-fuzz bench asan tsan fuzz \
	isa-emulation format tidy clean

all: build

deps:
	@./scripts/install_deps.sh

venv: deps $(VENV)/.requirements-stamp

$(VENV)/.requirements-stamp: $(PY_REQUIREMENTS)
	@./scripts/make_venv.sh $(VENV) $(PY_REQUIREMENTS)

configure: deps venv
	@cmake --preset release $(CMAKE_PY) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: LongCat-Flash decode in the three execution modes, side by side (superkernel bench).
demo: build
	@./scripts/demo.sh $(BUILD)

# `make test` (what CI runs): four phases, one after the other, each timed into $(PHASE_LOG):
#   test-asan     the suite under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/, clang;
#                 the same tree holds the libFuzzer targets, so the library is compiled once for both)
#   test-tsan     the multi-threaded tests under ThreadSanitizer (build-tsan/, SK_THREAD_TESTS_ONLY)
#   test-release  the release build and the whole suite, Python tests included
#   test-fuzz     every libFuzzer target for FUZZ_SECONDS from its seeds (build-asan/)
# docs/RELIABILITY.md says what each phase covers and how to rerun one.
PHASE_LOG ?= $(BUILD)/test-phases.txt
FUZZ_SECONDS ?= 20
# $(call timed,<phase>,<command>): runs the command; on success appends its wall-clock and CPU
# times to PHASE_LOG (a build's CPU time tells what it costs even on a busy machine).
# A phase run on its own (`make test-asan`, ...) starts PHASE_LOG afresh, so that the file always
# holds one run: `make test` starts it once and passes PHASE_LOG_KEEP=1 to its phases.
fresh_log = $(if $(PHASE_LOG_KEEP),:,rm -f $(PHASE_LOG))
timed = mkdir -p $(dir $(PHASE_LOG)); exec 3>&1 4>&2; TIMEFORMAT='%0R %0U %0S'; t=$$( { time { ( $(2) ) 1>&3 2>&4; }; } 2>&1 ) || exit $$?; \
	set -- $$t; echo "make test: $(1): $$1 s wall, $$(( $$2 + $$3 )) s CPU" | tee -a $(PHASE_LOG)

# The Python environment is mostly downloading and unpacking torch (minutes on a fresh machine, little
# CPU), and only the release phase needs it: it installs in the background beside the sanitizer
# phases (its output in $(BUILD)/venv-install.log, shown if it fails), and the release phase waits
# for it.
test: deps
	@rm -f $(PHASE_LOG); mkdir -p $(BUILD)
	@( $(call timed,python environment (beside the sanitizer phases),$(MAKE) --no-print-directory $(VENV)/.requirements-stamp) ) \
	    > $(BUILD)/venv-install.log 2>&1 & venv=$$!; \
	  if ! { $(MAKE) --no-print-directory test-asan PHASE_LOG_KEEP=1 && \
	         $(MAKE) --no-print-directory test-tsan PHASE_LOG_KEEP=1; }; then \
	    wait $$venv; exit 1; fi; \
	  echo "make test: waiting for the python environment"; \
	  if ! wait $$venv; then cat $(BUILD)/venv-install.log; exit 1; fi
	@$(MAKE) --no-print-directory test-release PHASE_LOG_KEEP=1
	@$(MAKE) --no-print-directory test-fuzz PHASE_LOG_KEEP=1
	@echo "make test: all phases passed"; cat $(PHASE_LOG)

test-release: deps venv
	@$(fresh_log)
	@$(call timed,release build,cmake --preset release $(CMAKE_PY) >/dev/null && cmake --build $(BUILD) -j $(JOBS))
	@$(call timed,release tests,ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 600)

# The direct kernel cases (several thousand) run as four one-process shards, kernels.cases.<n>
# (tests/kernels/CMakeLists.txt). The TSan phase, where even one shard takes minutes, leaves them
# to the conformance tests, which run every kernel family on the runtime's threads in every mode
# and core count. TSan also skips the two sampling tests that draw millions of tokens on one
# thread. Both sanitizer test presets run the stress test with 10,000 launches
# (SK_STRESS_LAUNCHES) instead of 100,000.
# loader.example_package.run and install.find_package_and_cli link programs built without
# sanitizer flags (the out-of-tree example, the installed-package consumer) to the sanitized
# runtime, which a sanitizer cannot start in; the release phase runs both.
OUT_OF_TREE = ^loader\.example_package\.run$$|^install\.find_package_and_cli$$
ASAN_SKIP = $(OUT_OF_TREE)
TSAN_SKIP = ^kernels\.cases\.|^SamplingStatistics\.|^SamplingIdentity\.|$(OUT_OF_TREE)

test-asan: deps
	@$(fresh_log)
	@$(call timed,asan build,cmake --preset asan -DSK_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null && cmake --build build-asan -j $(JOBS))
	@$(call timed,asan tests,ctest --preset asan -j $(JOBS) --timeout 900 -E '$(ASAN_SKIP)' -LE fuzz-run)

test-tsan: deps
	@$(fresh_log)
	@$(call timed,tsan build,cmake --preset tsan >/dev/null && cmake --build build-tsan -j $(JOBS))
	@$(call timed,tsan tests,ctest --preset tsan -j $(JOBS) --timeout 900 -E '$(TSAN_SKIP)')

test-fuzz: deps
	@$(fresh_log)
	@$(call timed,fuzz build (nothing left after test-asan),cmake --preset asan -DSK_FUZZ_SECONDS=$(FUZZ_SECONDS) >/dev/null && \
	  cmake --build --preset fuzz -j $(JOBS))
	@$(call timed,fuzz runs,ctest --preset fuzz -L fuzz-run -j $(JOBS) -V > build-asan/fuzz-runs.log 2>&1 || \
	  { tail -n 150 build-asan/fuzz-runs.log; exit 1; })
	@awk '/Start +[0-9]+: fuzz/ { name[$$2 + 0] = $$3 } \
	  /stat::number_of_executed_units|stat::new_units_added|graph_fuzz:/ { print name[$$1 + 0] ": " substr($$0, index($$0, $$2)) }' \
	  build-asan/fuzz-runs.log

# Micro-benchmarks: per-node dispatch cost of the three modes, then the built-in kernels, then each
# super kernel optimisation alone and together.
bench: build
	@$(BUILD)/bench/sk_bench_dispatch --json $(BUILD)/bench_dispatch.json
	@$(BUILD)/bench/sk_bench_kernels --quick --json $(BUILD)/bench_kernels.json
	@$(BUILD)/bench/sk_bench_ablation --json $(BUILD)/bench_ablation.json

asan: deps
	@cmake --preset asan >/dev/null && cmake --build build-asan -j $(JOBS) && ctest --preset asan -j $(JOBS)

tsan: deps
	@cmake --preset tsan >/dev/null && cmake --build build-tsan -j $(JOBS) && ctest --preset tsan -j $(JOBS)

# Fuzz without a time limit (Ctrl-C to stop): make fuzz TARGET=program_parser
fuzz: deps
	@cmake --preset asan >/dev/null && cmake --build --preset fuzz -j $(JOBS)
	@build-asan/tests/fuzz/sk_fuzz_$(TARGET) -artifact_prefix=build-asan/ build-asan/tests/fuzz/work/$(TARGET)/corpus \
	  tests/fuzz/corpus/$(TARGET)

# The AVX-512 kernel paths under a CPU emulator, for machines without AVX-512 (needs Python 3,
# python3-venv and PyPI access): tools/isa_emulation/README.md.
isa-emulation: build
	@./tools/isa_emulation/run.sh $(BUILD)

format:
	@git ls-files '*.cc' '*.h' '*.c' | xargs clang-format -i

tidy: configure
	@git ls-files 'src/*.cc' | xargs clang-tidy -p $(BUILD) --quiet

clean:
	@rm -rf build build-debug build-asan build-tsan build-fuzz
