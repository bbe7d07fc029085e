# Makefile - builds ctrain: the static library build/libctrain.a, the CLI bin/ctrain,
# the test runner and the benchmarks.
#
#   make            install missing Debian packages, then build everything (with
#                   build/libctrain.so, the shared library, beside build/libctrain.a);
#                   MPI (data-parallel training) when found, MPI=0 without, MPI=1 insists
#   make test       build and run the whole test suite (ends with "N passed, N failed")
#   make test SAN=1 the same suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   make check-deps the includes follow the layers (core <- layers <- models <- train <- catalog <- cli), only
#                   their owners include CUDA, NCCL, HDF5 and MPI, and include/ctrain.h reaches no
#                   private header; make test runs it
#   make fuzz       every reader under libFuzzer with ASan+UBSan (clang, build-fuzz/), FUZZ_SECONDS each
#                   (default 60); tests/fuzz/targets.h lists the targets, tests/fuzz/run.sh prints the table
#   make demo       train the siamese LSTM on a generated corpus, printing per-epoch seconds
#   make bench      FMA and sgemm peaks, the three models' training: ctrain vs Debian's and the newest PyTorch (bench/)
#   make bench-scale a store of 1.5x this machine's memory trained from (bench/scale.sh): pairs/s,
#                   resident memory and read amplification, streamed against in memory
#   make bench-avx2 the same with this CPU playing one without AVX-512 (AVX2 and FMA) on both sides
#   make golden     regenerate the PyTorch parity files in tests/golden/ (needs python3-torch)
#   make dist       the relocatable tarball dist/ctrain-VERSION-linux-x86_64.tar.gz: portable
#                   x86-64 builds (CUDA and CPU-only) with every library they load but glibc's
#                   and CUDA's (scripts/dist.sh); make dist-check extracts and tests it
#   make gpu-check  the whole check for a GPU machine with this build (scripts/gpu-check.sh),
#                   into gpu-check-out/ or OUT=DIR
#   make install    bin/ctrain, libctrain.a and .so, the headers, ctrain.pc and the man page
#                   under PREFIX (/usr/local), staged under DESTDIR when given; make uninstall
#                   removes them (docs/library.md, "Installing the library")
#   make clean
#
# Every user-facing target first runs scripts/deps.sh, which does nothing when the
# packages are already there. The real build lives in the `build` target, run by a
# second make so that pkg-config sees the packages deps.sh just installed.
#
# The build uses every core (JOBS, default: nproc) unless the command line says how many
# (make -j4); JOBS=1 builds one file at a time.

JOBS ?= $(shell nproc 2>/dev/null || echo 1)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter -j%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(JOBS)
endif
endif

SAN      ?= 0
CC       ?= cc
OPT      ?= -O3 -march=native
BUILD    := build$(if $(filter 1,$(SAN)),-san,)
PKGS     := openblas hdf5 sndfile samplerate fftw3f jansson yaml-0.1
# FFmpeg's libraries read AAC .m4a files (io/audio_m4a.c): found by pkg-config, `make
# FFMPEG=0` leaves them out (.m4a is then refused in one line; `make dist` does this, so the
# tarball does not carry FFmpeg and the codec libraries it loads), FFMPEG=1 insists.
FFMPEG_PKGS  := libavformat libavcodec libswresample libavutil
FFMPEG_FOUND := $(shell pkg-config --exists $(FFMPEG_PKGS) 2>/dev/null && echo 1 || echo 0)
FFMPEG ?= $(FFMPEG_FOUND)
ifeq ($(FFMPEG),1)
ifneq ($(FFMPEG_FOUND),1)
$(error FFMPEG=1 but FFmpeg's libraries were not found by pkg-config ($(FFMPEG_PKGS)): run scripts/deps.sh build, or build with FFMPEG=0)
endif
PKGS     += $(FFMPEG_PKGS)
endif
CUDA_HOME ?= /usr/local/cuda
# The version, defined once (CTRAIN_VERSION in cli/cli.h): the tarball's name, the shared
# library's file name and soname (libctrain.so.MAJOR), ctrain.pc and the man page.
VERSION  := $(shell sed -n 's/^\#define CTRAIN_VERSION "\(.*\)".*/\1/p' cli/cli.h)

# Every object is position-independent, so the same objects make libctrain.a, bin/ctrain
# and libctrain.so. Measured cost: none (ctrain time --protocol smoke, medians of 10 to 19
# alternating runs: siamese-lstm 1320 pairs/s without, 1322 with; cnn 1061 and 1070 images/s).
PIC      := -fPIC
WARN     := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wvla
CFLAGS   += -std=c11 -D_POSIX_C_SOURCE=200809L $(OPT) $(PIC) -fno-math-errno -g $(WARN) -I. $(shell pkg-config --cflags $(PKGS) 2>/dev/null) \
            $(if $(filter 1,$(FFMPEG)),-DCT_HAVE_FFMPEG)
SYS_LIBS := -lz -lpthread -lm
LDLIBS   += $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(SYS_LIBS)
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=address,undefined
endif
# SAN=fuzz: the fuzz build (make fuzz runs it with clang into build-fuzz/): every object
# instrumented for libFuzzer's coverage and under ASan+UBSan; the fuzzers link -fsanitize=fuzzer.
ifeq ($(SAN),fuzz)
CFLAGS   += -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDFLAGS  += -fsanitize=address,undefined
endif

LIB_SRC   := $(wildcard core/*.c layers/*.c io/*.c comm/*.c models/*.c train/*.c catalog/*.c)
CLI_SRC   := $(wildcard cli/*.c)
# cli/args.c: the options suite (tests/test_options.c) parses argv as the command line does, and
# walks `ctrain time`'s table (cli/time_opts.c) with the others
TEST_SRC  := $(wildcard tests/*.c) tests/fuzz/targets.c cli/args.c cli/time_opts.c
BENCH_SRC := $(wildcard bench/*.c)
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ  := $(TEST_SRC:%.c=$(BUILD)/%.o)
# tests/cuda_emu.cpp runs ctrain's own GPU kernels' CUDA source on the CPU (C++: the kernels are
# templates; it uses no C++ library, so the test program still links with $(CC)). No contraction
# into fused multiply-adds, as in C (-std=c11): the test compares it with C bit for bit
TEST_CXX_SRC := $(wildcard tests/*.cpp)
TEST_OBJ  += $(TEST_CXX_SRC:%.cpp=$(BUILD)/%.o)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
CTRAIN    := $(if $(filter 1,$(SAN)),$(BUILD)/ctrain,bin/ctrain)

# ---- the GPU backend (cuda/): CUDA runtime, cuBLAS, cuDNN 9 ----
# Detected when $(CUDA_HOME)/bin/nvcc, cudnn.h and the libraries are there; `make CUDA=0`
# builds CPU only, `make CUDA=1` insists. A machine with CUDA but no GPU still compiles and
# links every .cu file (the GPU tests then report SKIP). CUDA_ARCH: SASS for sm_90 plus PTX
# for compute_80, which the driver JIT-compiles for any newer GPU.
comma      := ,
NVCC       ?= $(CUDA_HOME)/bin/nvcc
CUDNN_HOME ?= $(CUDA_HOME)
CUDA_ARCH  ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80
CUDA_INC     := $(firstword $(foreach d,$(CUDA_HOME)/include,$(if $(wildcard $(d)/cuda_runtime_api.h),$(d))))
CUDNN_INC    := $(firstword $(foreach d,$(CUDNN_HOME)/include /usr/include /usr/include/x86_64-linux-gnu,$(if $(wildcard $(d)/cudnn.h),$(d))))
CUDA_LIBDIR  := $(firstword $(foreach d,$(CUDA_HOME)/lib64 $(CUDA_HOME)/lib,$(if $(wildcard $(d)/libcudart.so),$(d))))
CUDNN_LIBDIR := $(firstword $(foreach d,$(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib /usr/lib/x86_64-linux-gnu,$(if $(wildcard $(d)/libcudnn.so),$(d))))
CUDA_FOUND   := $(if $(and $(wildcard $(NVCC)),$(CUDA_INC),$(CUDNN_INC),$(CUDA_LIBDIR),$(CUDNN_LIBDIR)),1,0)
CUDA_MISSING := $(if $(wildcard $(NVCC)),,nvcc at $(NVCC) )$(if $(CUDA_INC),,cuda_runtime_api.h )$(if $(CUDNN_INC),,cudnn.h )$(if $(CUDA_LIBDIR),,libcudart.so )$(if $(CUDNN_LIBDIR),,libcudnn.so)
CUDA ?= $(CUDA_FOUND)
ifeq ($(CUDA),1)
ifneq ($(CUDA_FOUND),1)
$(error CUDA=1 but the CUDA toolkit or cuDNN is incomplete (missing: $(strip $(CUDA_MISSING))); set CUDA_HOME / CUDNN_HOME, or build with CUDA=0)
endif
CUDA_CU_SRC := $(wildcard cuda/*.cu)
CFLAGS   += -DCT_HAVE_CUDA
NVCCFLAGS ?= -std=c++17 -O3 -lineinfo $(CUDA_ARCH) -I. $(addprefix -I,$(sort $(CUDA_INC) $(CUDNN_INC))) -DCT_HAVE_CUDA \
             -Xcompiler -Wall,-Wextra,-Wshadow,-Wno-unused-parameter
CUDA_LIBS := $(addprefix -L,$(sort $(CUDA_LIBDIR) $(CUDNN_LIBDIR))) $(addprefix -Wl$(comma)-rpath$(comma),$(sort $(CUDA_LIBDIR) $(CUDNN_LIBDIR))) \
             -lcudnn -lcublas -lcudart -lstdc++
LDLIBS   += $(CUDA_LIBS)
$(BUILD)/cuda/%.o: CFLAGS += $(addprefix -I,$(sort $(CUDA_INC) $(CUDNN_INC)))
endif

# ---- data-parallel training (train/dist.c on comm/comm.h): MPI, and NCCL for the GPUs ----
# MPI is detected by pkg-config's ompi-c (Debian's libopenmpi-dev) or, failing that,
# an Open MPI `mpicc` on the PATH; `make MPI=0` builds without it (one rank: a plain
# process, and a clear error when mpirun starts more), `make MPI=1` insists. Only
# comm/mpi.c includes mpi.h; the programs link MPI's library. NCCL is used with the
# GPU backend and MPI when nccl.h is under NCCL_HOME (= CUDA_HOME); `make NCCL=0` leaves
# it out. Only cuda/nccl.c includes nccl.h. libnccl is not linked: cuda/nccl.c loads it
# when a GPU job first needs it (dlopen), trying the folder it is found in here
# (NCCL_LIBDIR) after the loader's search.
MPICC     ?= mpicc
MPI_PC    := $(shell pkg-config --exists ompi-c 2>/dev/null && echo ompi-c)
MPI_FOUND := $(if $(or $(MPI_PC),$(shell command -v $(MPICC) 2>/dev/null)),1,0)
MPI ?= $(MPI_FOUND)
ifeq ($(MPI),1)
ifneq ($(MPI_FOUND),1)
$(error MPI=1 but MPI was not found (neither pkg-config ompi-c nor $(MPICC)): apt-get install libopenmpi-dev openmpi-bin, or build with MPI=0)
endif
MPI_CFLAGS := $(if $(MPI_PC),$(shell pkg-config --cflags ompi-c),$(shell $(MPICC) --showme:compile))
MPI_LIBS   := $(if $(MPI_PC),$(shell pkg-config --libs ompi-c),$(shell $(MPICC) --showme:link))
$(BUILD)/comm/mpi.o: CFLAGS += -DCT_HAVE_MPI $(MPI_CFLAGS)
LDLIBS += $(MPI_LIBS)
endif
NCCL_HOME   ?= $(CUDA_HOME)
NCCL_INC    := $(firstword $(foreach d,$(NCCL_HOME)/include /usr/include,$(if $(wildcard $(d)/nccl.h),$(d))))
NCCL_LIBDIR := $(firstword $(foreach d,$(NCCL_HOME)/lib64 $(NCCL_HOME)/lib /usr/lib/x86_64-linux-gnu,$(if $(wildcard $(d)/libnccl.so),$(d))))
NCCL_FOUND  := $(if $(and $(filter 1,$(CUDA)),$(filter 1,$(MPI)),$(NCCL_INC)),1,0)
NCCL ?= $(NCCL_FOUND)
ifeq ($(NCCL),1)
ifneq ($(NCCL_FOUND),1)
$(error NCCL=1 needs the GPU backend (CUDA=1), MPI (MPI=1), and nccl.h under NCCL_HOME ($(NCCL_HOME)))
endif
$(BUILD)/cuda/nccl.o: CFLAGS += -DCT_HAVE_NCCL -I$(NCCL_INC) $(if $(NCCL_LIBDIR),-DCT_NCCL_LIBDIR='"$(NCCL_LIBDIR)"')
LDLIBS += -ldl
endif

CUDA_C_SRC := $(wildcard cuda/*.c)
LIB_OBJ    += $(CUDA_C_SRC:%.c=$(BUILD)/%.o) $(CUDA_CU_SRC:%.cu=$(BUILD)/%.o)
# Objects built with and without CT_HAVE_CUDA must not mix: a change of CUDA rebuilds
# (and so does a build folder from before every object was built with $(PIC)).
CUDA_STAMP  := $(BUILD)/.cuda-config
BUILD_STAMP := CUDA=$(CUDA) $(CUDA_HOME) $(CUDA_ARCH) $(PIC) FFMPEG=$(FFMPEG)
# MPI and NCCL change comm/mpi.o and cuda/nccl.o alone (and the links, through libctrain.a).
MPI_STAMP   := $(BUILD)/.mpi-config
MPI_CONFIG  := MPI=$(MPI) $(MPI_CFLAGS) NCCL=$(NCCL) $(NCCL_INC) $(NCCL_LIBDIR)
ifeq ($(filter clean uninstall,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && { echo "$(BUILD_STAMP)" | cmp -s - $(CUDA_STAMP) || echo "$(BUILD_STAMP)" > $(CUDA_STAMP); })
$(shell { echo "$(MPI_CONFIG)" | cmp -s - $(MPI_STAMP) || echo "$(MPI_CONFIG)" > $(MPI_STAMP); })
endif
$(BUILD)/comm/mpi.o $(BUILD)/cuda/nccl.o: $(MPI_STAMP)

# `make` alone is `make all`, whatever rule comes first below.
.DEFAULT_GOAL := all

# The git commit of the build, embedded in cli/version.c (ctrain --version, a run
# directory's version.txt): "-modified" when the checkout has uncommitted changes,
# "unknown" outside a git checkout. A stamp file rebuilds that object when it changes.
GIT_COMMIT   := $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && { git diff --quiet HEAD -- 2>/dev/null && echo $$c || echo $$c-modified; } || echo unknown)
COMMIT_STAMP := $(BUILD)/.commit
ifeq ($(filter clean uninstall,$(MAKECMDGOALS)),)
$(shell mkdir -p $(BUILD) && { echo "$(GIT_COMMIT)" | cmp -s - $(COMMIT_STAMP) || echo "$(GIT_COMMIT)" > $(COMMIT_STAMP); })
endif
$(BUILD)/cli/version.o: $(COMMIT_STAMP)
$(BUILD)/cli/version.o: CFLAGS += -DCTRAIN_COMMIT='"$(GIT_COMMIT)"'

# The shared library: build/libctrain.so.VERSION, soname libctrain.so.MAJOR, both links
# beside it in the build folder. Not in a SAN=1 build (make install takes the optimised one).
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libctrain.so.$(SOMAJOR)
SHLIB   := $(BUILD)/libctrain.so.$(VERSION)

.PHONY: all build deps test demo bench bench-scale bench-avx2 golden clean detect check-deps dist dist-check gpu-check install install-files uninstall fuzz fuzz-build

all: deps
	@$(MAKE) --no-print-directory build

deps:
	@sh scripts/deps.sh build

# tests/fuzz/json.o: the one fuzz target that calls cli/ is compiled in every build too, so that a
# change to the command's functions breaks `make test`, not only `make fuzz`.
build: detect $(CTRAIN) $(BUILD)/ctrain_tests $(BUILD)/tests/fuzz/json.o $(BENCH_BIN) $(if $(filter 1,$(SAN)),,$(SHLIB))

detect:
	@echo "ctrain build ($(BUILD)):"
	@echo "  BLAS : $$(pkg-config --modversion openblas 2>/dev/null | sed 's/^/OpenBLAS /' || echo 'NOT FOUND: run make deps')"
	@echo "  HDF5 : $$(pkg-config --modversion hdf5 2>/dev/null || echo 'NOT FOUND: run make deps')"
	@echo "  YAML : libyaml $$(pkg-config --modversion yaml-0.1 2>/dev/null || echo 'NOT FOUND: run make deps')"
	@echo "  audio: libsndfile $$(pkg-config --modversion sndfile 2>/dev/null || echo 'NOT FOUND'), libsamplerate $$(pkg-config --modversion samplerate 2>/dev/null || echo 'NOT FOUND'), FFTW $$(pkg-config --modversion fftw3f 2>/dev/null || echo 'NOT FOUND'), FFmpeg libavcodec $$(pkg-config --modversion libavcodec 2>/dev/null || echo 'NOT FOUND') (.m4a)"
	@echo "  JSON : jansson $$(pkg-config --modversion jansson 2>/dev/null || echo 'NOT FOUND: run make deps')"
	@if [ "$(CUDA)" = 1 ]; then \
	  echo "  CUDA : $$($(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p') at $(CUDA_HOME), cuDNN $$(sed -n 's/^#define CUDNN_\(MAJOR\|MINOR\|PATCHLEVEL\) *\([0-9]*\).*/\2/p' $(CUDNN_INC)/cudnn_version.h | paste -sd.) ($(CUDNN_LIBDIR)): GPU backend ON ($(strip $(CUDA_ARCH)))"; \
	elif [ "$(CUDA_FOUND)" = 1 ]; then echo "  CUDA : found at $(CUDA_HOME) but CUDA=0: CPU only"; \
	else echo "  CUDA : not found (missing: $(strip $(CUDA_MISSING))): CPU only; set CUDA_HOME / CUDNN_HOME to enable the GPU backend"; fi
	@if [ "$(MPI)" = 1 ]; then echo "  MPI  : $(if $(MPI_PC),Open MPI $$(pkg-config --modversion ompi-c),$(MPICC)): data-parallel training ON (mpirun -np N bin/ctrain train ...)$(if $(filter 1,$(NCCL)), + NCCL for GPUs (nccl.h $$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' $(NCCL_INC)/nccl.h | paste -sd.); libnccl.so.2 loaded at run time),)"; \
	elif [ "$(MPI_FOUND)" = 1 ]; then echo "  MPI  : found but MPI=0: one process"; \
	else echo "  MPI  : not found (apt-get install libopenmpi-dev openmpi-bin): one process"; fi
	@echo "  SAN  : $(if $(filter 1,$(SAN)),address+undefined,off)"

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(filter-out -std=c11 -Wstrict-prototypes,$(CFLAGS)) -std=c++17 -fno-exceptions -fno-rtti -fno-threadsafe-statics \
	  -ffp-contract=off -Wno-unknown-pragmas -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -Xcompiler $(PIC) -MMD -MP -c $< -o $@

$(LIB_OBJ) $(CLI_OBJ) $(TEST_OBJ) $(BENCH_BIN): $(CUDA_STAMP)

$(BUILD)/libctrain.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# --no-undefined: the .so names every library it needs, so a program links it with -lctrain alone.
$(SHLIB): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(LDFLAGS) -o $@ $(LIB_OBJ) $(LDLIBS)
	ln -sf $(notdir $@) $(BUILD)/$(SONAME) && ln -sf $(SONAME) $(BUILD)/libctrain.so

$(CTRAIN): $(CLI_OBJ) $(BUILD)/libctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/libctrain.a $(LDLIBS)

$(BUILD)/ctrain_tests: $(TEST_OBJ) $(BUILD)/libctrain.a
	$(CC) $(LDFLAGS) -o $@ $(TEST_OBJ) $(BUILD)/libctrain.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libctrain.a $(LDLIBS)

check-deps:
	@sh scripts/check-deps.sh

test:
	@sh scripts/deps.sh test
	@sh scripts/check-deps.sh
	@$(MAKE) --no-print-directory build
	@sh tests/run.sh $(BUILD) $(CTRAIN)

# ---- make fuzz: every reader under libFuzzer (tests/fuzz/targets.h) ----
# One fuzzer per target in build-fuzz/fuzz/, built by clang with the library at -O1; each
# runs FUZZ_SECONDS from the seeds in tests/fuzz/corpus/TARGET (tests/fuzz/run.sh).
FUZZ_BUILD   := build-fuzz
FUZZ_TARGETS := audio m4a featstore checkpoint weights keras torch idx trials json arch config
FUZZ_SECONDS ?= 60
FUZZ_CLI_OBJ := $(filter-out $(BUILD)/cli/ctrain.o,$(CLI_OBJ))
FUZZ_OBJ     := $(BUILD)/tests/fuzz/targets.o $(BUILD)/tests/fuzz/json.o $(FUZZ_CLI_OBJ)

fuzz:
	@sh scripts/deps.sh fuzz
	@$(MAKE) --no-print-directory fuzz-build SAN=fuzz BUILD=$(FUZZ_BUILD) CC=clang CUDA=0 OPT="-O1 -march=native"
	@sh tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/fuzz_%)

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_main.c $(FUZZ_OBJ) $(BUILD)/libctrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -DFUZZ_TARGET='"$*"' -o $@ $< $(FUZZ_OBJ) $(BUILD)/libctrain.a $(LDLIBS)

demo: deps
	@$(MAKE) --no-print-directory build
	@sh examples/demo.sh $(CTRAIN)

bench: deps
	@sh scripts/deps.sh bench
	@$(MAKE) --no-print-directory build
	@sh bench/run.sh $(BUILD)

# The same runs with this CPU playing one that has AVX2 and FMA but no AVX-512 (bench/run.sh):
# ctrain built for x86-64-v3 in build-avx2 (CPU only), both sides limited to AVX2.
# A store of 1.5x this machine's memory (in /var/tmp/ctrain-scale, or SCALE_DIR), trained
# from one seed-protocol epoch: pairs/s, resident memory, bytes read per byte used (bench/scale.sh).
bench-scale: deps
	@$(MAKE) --no-print-directory build
	@sh bench/scale.sh $(abspath $(CTRAIN)) $(abspath $(BUILD))/bench/scale_store $(or $(SCALE_DIR),/var/tmp/ctrain-scale) $(or $(SCALE_PAIRS),300000)

bench-avx2: deps
	@sh scripts/deps.sh bench
	@$(MAKE) --no-print-directory build SAN=0 CUDA=0 BUILD=build-avx2 CTRAIN=build-avx2/ctrain OPT="-O3 -march=x86-64-v3"
	@CTRAIN_BENCH_ISA=avx2 sh bench/run.sh build-avx2

golden:
	@sh scripts/deps.sh golden
	@for g in tests/golden_gen/gen_*.py; do echo "golden: $$g"; /usr/bin/python3 $$g tests/golden || exit 1; done

# ---- make dist: the relocatable tarball (docs/running-elsewhere.md) ----
# Two builds for a portable x86-64 level, not -march=native: the machine the tarball
# runs on may lack instructions this one has. core/hot.h's CT_HOT (on with
# CT_PORTABLE) compiles the hot loops for x86-64-v3 and v4 too and picks one at run
# time. build-dist has the GPU backend (when CUDA is found here), build-dist-cpu
# does not: the launchers fall back to it where no CUDA libraries are found. Both
# have MPI when it is found here, and the tarball then carries Open MPI's runtime
# (bin/mpirun; NCCL comes from the target machine, loaded at run time).
DIST_OPT    ?= -O3 -march=x86-64-v2 -mtune=generic -DCT_PORTABLE
DIST_CUDA   ?= $(CUDA_FOUND)
DIST_MPI    ?= $(MPI_FOUND)
DIST_TAR    := dist/ctrain-$(VERSION)-linux-x86_64.tar.gz
OUT         ?= gpu-check-out

dist:
	@sh scripts/deps.sh dist
	@$(MAKE) --no-print-directory build SAN=0 CUDA=0 MPI=$(DIST_MPI) FFMPEG=0 BUILD=build-dist-cpu CTRAIN=build-dist-cpu/ctrain OPT="$(DIST_OPT)"
	@if [ "$(DIST_CUDA)" = 1 ]; then $(MAKE) --no-print-directory build SAN=0 CUDA=1 MPI=$(DIST_MPI) FFMPEG=0 BUILD=build-dist CTRAIN=build-dist/ctrain OPT="$(DIST_OPT)"; \
	 else echo "dist: CUDA not found here (make detect): the tarball will be CPU only"; fi
	@sh scripts/dist.sh $(VERSION) $(DIST_TAR) build-dist-cpu $(if $(filter 1,$(DIST_CUDA)),build-dist)

dist-check: dist
	@sh scripts/dist-check.sh $(DIST_TAR)

gpu-check: deps
	@$(MAKE) --no-print-directory build SAN=0
	@sh scripts/gpu-check.sh $(OUT)

# ---- make install / make uninstall: the library for other programs (docs/library.md,
# "Installing the library"). Under DESTDIR$(PREFIX):
#   bin/ctrain
#   lib/libctrain.a, lib/libctrain.so.VERSION, its links libctrain.so.MAJOR (the soname)
#     and libctrain.so
#   include/ctrain/ctrain.h (include/ctrain.h: the public API) beside the headers it
#     reaches, as in the source (core/params.h, ...): scripts/public-headers.sh lists them
#     (the closure of its includes); the internals (scripts/private-headers.txt) stay out
#   lib/pkgconfig/ctrain.pc (from scripts/ctrain.pc.in): Cflags -I${includedir}/ctrain
#   share/man/man1/ctrain.1, made from ctrain's help (scripts/manpage.sh)
# With no DESTDIR, as root, ldconfig runs after both (LDCONFIG=true skips it).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
LDCONFIG   ?= ldconfig
INSTALL    ?= install
# ctrain.pc's private libraries: what libctrain.a needs beyond the pkg-config packages.
# FFmpeg's four are named here by their -l flags, not in Requires.private: `pkg-config
# --static` would then list every codec library Debian's FFmpeg was built with (x264,
# libvpx, ... some 40, most without their -dev package here), while libctrain.a needs
# only these four, which link against their shared libraries.
PC_LIBS_PRIVATE := $(strip $(if $(filter 1,$(FFMPEG)),$(shell pkg-config --libs $(FFMPEG_PKGS) 2>/dev/null)) $(SYS_LIBS) $(CUDA_LIBS) $(MPI_LIBS) $(if $(filter 1,$(NCCL)),-ldl))
PC_LIBDIR       := $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
PC_INCLUDEDIR   := $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))
LDCONFIG_RUN = if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then $(LDCONFIG); fi

ifeq ($(SAN),1)
ifneq ($(filter install install-files,$(MAKECMDGOALS)),)
$(error make install installs the optimised build: run it without SAN=1)
endif
endif

install: deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory install-files

$(BUILD)/ctrain.1: $(CTRAIN) scripts/manpage.sh
	sh scripts/manpage.sh $(CTRAIN) $(VERSION) > $@.tmp && mv $@.tmp $@

install-files: $(CTRAIN) $(BUILD)/libctrain.a $(SHLIB) $(BUILD)/ctrain.1 include/ctrain.h scripts/public-headers.sh scripts/ctrain.pc.in
	$(INSTALL) -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(LIBDIR)/pkgconfig" "$(DESTDIR)$(INCLUDEDIR)/ctrain" "$(DESTDIR)$(MANDIR)/man1"
	$(INSTALL) -m 755 $(CTRAIN) "$(DESTDIR)$(BINDIR)/ctrain"
	$(INSTALL) -m 644 $(BUILD)/libctrain.a "$(DESTDIR)$(LIBDIR)/libctrain.a"
	$(INSTALL) -m 755 $(SHLIB) "$(DESTDIR)$(LIBDIR)/$(notdir $(SHLIB))"
	ln -sf $(notdir $(SHLIB)) "$(DESTDIR)$(LIBDIR)/$(SONAME)"
	ln -sf $(SONAME) "$(DESTDIR)$(LIBDIR)/libctrain.so"
	$(INSTALL) -m 644 include/ctrain.h "$(DESTDIR)$(INCLUDEDIR)/ctrain/ctrain.h"
	hdrs=$$(sh scripts/public-headers.sh) || exit 1; \
	for h in $$hdrs; do $(INSTALL) -d "$(DESTDIR)$(INCLUDEDIR)/ctrain/$${h%/*}" && \
	  $(INSTALL) -m 644 $$h "$(DESTDIR)$(INCLUDEDIR)/ctrain/$$h" || exit 1; done
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(PC_LIBDIR)|' -e 's|@INCLUDEDIR@|$(PC_INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' -e 's|@LIBS_PRIVATE@|$(PC_LIBS_PRIVATE)|' scripts/ctrain.pc.in > "$(DESTDIR)$(LIBDIR)/pkgconfig/ctrain.pc"
	$(INSTALL) -m 644 $(BUILD)/ctrain.1 "$(DESTDIR)$(MANDIR)/man1/ctrain.1"
	@$(LDCONFIG_RUN)
	@echo "installed ctrain $(VERSION) under $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/ctrain" "$(DESTDIR)$(LIBDIR)/libctrain.a" "$(DESTDIR)$(LIBDIR)/libctrain.so.$(VERSION)" \
	      "$(DESTDIR)$(LIBDIR)/$(SONAME)" "$(DESTDIR)$(LIBDIR)/libctrain.so" "$(DESTDIR)$(LIBDIR)/pkgconfig/ctrain.pc" \
	      "$(DESTDIR)$(MANDIR)/man1/ctrain.1"
	rm -rf "$(DESTDIR)$(INCLUDEDIR)/ctrain"
	@$(LDCONFIG_RUN)

clean:
	rm -rf build build-san build-fuzz build-avx2 bin build-dist build-dist-cpu dist

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/tests/fuzz/json.d
