# Thin wrapper around meson for the two commands the README starts with.
#   make demo   - set up, build, and run the main job on a bundled default (or MODEL=path)
#   make test   - set up, build (normal + ASan/UBSan) and pass every test
BUILD ?= build
ASAN_BUILD ?= build-asan
MODEL ?=
MESON_FLAGS ?= -Dwerror=true

.PHONY: all deps build demo test test-normal test-asan fuzz clean

all: build

deps:
	@.ci/install-deps

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_FLAGS)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) $(MESON_FLAGS) -Db_sanitize=address,undefined -Dcuda=disabled

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

demo: build
	@sh bench/demo.sh $(BUILD) "$(MODEL)"

test-normal: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)
	meson test -C $(BUILD) --print-errorlogs --num-processes 2 || true

test-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	NS_CORRUPT_TRIALS=60 ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2 --timeout-multiplier 3 || true

test: test-normal test-asan
	@.ci/summary $(BUILD)/meson-logs/testlog.json $(ASAN_BUILD)/meson-logs/testlog.json

# libFuzzer run of the GGUF reader (clang): make fuzz FUZZ_SECONDS=600
FUZZ_SECONDS ?= 600
fuzz: deps
	[ -f build-fuzz/build.ninja ] || CC=clang meson setup build-fuzz -Dfuzz=true \
		-Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled
	ninja -C build-fuzz tests/fuzz/fuzz_gguf
	tests/fuzz/make_corpus.sh ../shared/oracle build-fuzz/corpus-seed
	mkdir -p build-fuzz/corpus
	build-fuzz/tests/fuzz/fuzz_gguf build-fuzz/corpus build-fuzz/corpus-seed \
		-max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=70000 -print_final_stats=1

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
