# Set-up and everyday commands. `make demo` and `make test` work on a fresh Debian machine:
# they install missing packages (scripts/install_deps.sh), configure, build into build/, and run.
JOBS ?= $(shell nproc)
BUILD ?= build

.PHONY: all deps configure build demo test bench asan tsan isa-emulation format tidy clean

all: build

deps:
	@./scripts/install_deps.sh

configure: deps
	@cmake --preset release >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: LongCat-Flash decode in the three execution modes, side by side (superkernel bench).
demo: build
	@./scripts/demo.sh $(BUILD)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 600

# Micro-benchmarks: per-node dispatch cost of the three modes, then the built-in kernels.
bench: build
	@$(BUILD)/bench/sk_bench_dispatch --json $(BUILD)/bench_dispatch.json
	@$(BUILD)/bench/sk_bench_kernels --quick --json $(BUILD)/bench_kernels.json

asan: deps
	@cmake --preset asan >/dev/null && cmake --build build-asan -j $(JOBS) && ctest --preset asan -j $(JOBS)

tsan: deps
	@cmake --preset tsan >/dev/null && cmake --build build-tsan -j $(JOBS) && ctest --preset tsan -j $(JOBS)

# The AVX-512 kernel paths under a CPU emulator, for machines without AVX-512 (needs Python 3,
# python3-venv and PyPI access): tools/isa_emulation/README.md.
isa-emulation: build
	@./tools/isa_emulation/run.sh $(BUILD)

format:
	@git ls-files '*.cc' '*.h' '*.c' | xargs clang-format -i

tidy: configure
	@git ls-files 'src/*.cc' | xargs clang-tidy -p $(BUILD) --quiet

clean:
	@rm -rf build build-debug build-asan build-tsan
