# Makefile - builds ctrain: the static library build/libctrain.a, the CLI bin/ctrain,
# the test runner and the benchmarks.
#
#   make            install missing Debian packages, then build everything
#   make test       build and run the whole test suite (ends with "N passed, N failed")
#   make test SAN=1 the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make demo       train the siamese LSTM on a generated corpus, printing per-epoch seconds
#   make bench      sgemm peak and the LSTM step benchmark, ctrain vs PyTorch (bench/)
#   make golden     regenerate the PyTorch parity files in tests/golden/ (needs python3-torch)
#   make clean
#
# Every user-facing target first runs scripts/deps.sh, which does nothing when the
# packages are already there. The real build lives in the `build` target, run by a
# second make so that pkg-config sees the packages deps.sh just installed.

SAN      ?= 0
CC       ?= cc
OPT      ?= -O3 -march=native
BUILD    := build$(if $(filter 1,$(SAN)),-san,)
PKGS     := openblas hdf5 sndfile samplerate fftw3f
CUDA_HOME ?= /usr/local/cuda

WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wvla
CFLAGS   += -std=c11 -D_POSIX_C_SOURCE=200809L $(OPT) -fno-math-errno -g $(WARN) -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lz -lpthread -lm
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=address,undefined
endif

LIB_SRC   := $(wildcard core/*.c layers/*.c io/*.c models/*.c)
CLI_SRC   := $(wildcard cli/*.c)
TEST_SRC  := $(wildcard tests/*.c)
BENCH_SRC := $(wildcard bench/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
CTRAIN    := $(if $(filter 1,$(SAN)),$(BUILD)/ctrain,bin/ctrain)

.PHONY: all build deps test demo bench golden clean detect

all: deps
	@$(MAKE) --no-print-directory build

deps:
	@sh scripts/deps.sh build

build: detect $(CTRAIN) $(BUILD)/ctrain_tests $(BENCH_BIN)

detect:
	@echo "ctrain build ($(BUILD)):"
	@echo "  BLAS : $$(pkg-config --modversion openblas 2>/dev/null | sed 's/^/OpenBLAS /' || echo 'NOT FOUND: run make deps')"
	@echo "  HDF5 : $$(pkg-config --modversion hdf5 2>/dev/null || echo 'NOT FOUND: run make deps')"
	@echo "  audio: libsndfile $$(pkg-config --modversion sndfile 2>/dev/null || echo 'NOT FOUND'), libsamplerate $$(pkg-config --modversion samplerate 2>/dev/null || echo 'NOT FOUND'), FFTW $$(pkg-config --modversion fftw3f 2>/dev/null || echo 'NOT FOUND')"
	@if [ -x $(CUDA_HOME)/bin/nvcc ]; then \
	  echo "  CUDA : $$($(CUDA_HOME)/bin/nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') at $(CUDA_HOME) (the GPU backend is not part of this version: CPU only)"; \
	else echo "  CUDA : not found (CPU only)"; fi
	@echo "  SAN  : $(if $(filter 1,$(SAN)),address+undefined,off)"

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libctrain.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(CTRAIN): $(CLI_OBJ) $(BUILD)/libctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libctrain.a $(LDLIBS)

$(BUILD)/ctrain_tests: $(TEST_OBJ) $(BUILD)/libctrain.a
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/libctrain.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libctrain.a $(LDLIBS)

test: deps
	@$(MAKE) --no-print-directory build
	@sh tests/run.sh $(BUILD) $(CTRAIN)

demo: deps
	@$(MAKE) --no-print-directory build
	@sh examples/demo.sh $(CTRAIN)

bench: deps
	@sh scripts/deps.sh golden
	@$(MAKE) --no-print-directory build
	@sh bench/run.sh $(BUILD)

golden:
	@sh scripts/deps.sh golden
	@for g in tests/golden_gen/gen_*.py; do echo "golden: $$g"; /usr/bin/python3 $$g tests/golden || exit 1; done

clean:
	rm -rf build build-san bin

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
