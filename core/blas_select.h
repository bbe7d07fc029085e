/* blas_select.h - never run OpenBLAS's generic kernels without knowing it.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels ("core") from the CPU's family and
 * model when the library loads. A CPU newer than the OpenBLAS build is not in
 * its tables, and the library falls back to an older core: Debian's 0.3.21
 * runs its SSE3 Prescott kernels on a Xeon of family 6 model 207 (sgemm at a
 * fifth of what its SkylakeX kernels reach there) and its AVX2 Haswell kernels
 * on an AMD Zen 5 with full-width AVX-512 (half).
 *
 * ct_blas_select, called first thing in main(), compares the core OpenBLAS
 * chose with what the CPU can run (cpuid and the OS's saved register state):
 *   - OPENBLAS_CORETYPE set by the user: kept, whatever it says, and reported
 *     as the user's choice;
 *   - OpenBLAS's core at least as good as the policy's (CT_BLAS_POLICY in
 *     blas_select.c): nothing happens;
 *   - otherwise: OpenBLAS reads OPENBLAS_CORETYPE only while it loads (a
 *     constructor, before main), so the program sets it to the policy's core
 *     and executes itself again (/proc/self/exe, same arguments). A marker
 *     variable carries what OpenBLAS picked and which cores were tried, so
 *     this happens at most a few times; the restarted program checks that
 *     OpenBLAS took the core (a build without it silently gives another),
 *     tries the next candidate if not, and removes both variables again so
 *     that nothing it starts inherits them.
 * When no core better than OpenBLAS's own exists in this build, one warning
 * names the cost. ct_blas_select_note() says what happened, for the header
 * line of every command and `ctrain info`.
 *
 * The choice itself (ct_blas_choose) is a pure function of a feature set, so
 * it is unit-tested on synthetic CPUs.
 */
#ifndef CT_BLAS_SELECT_H
#define CT_BLAS_SELECT_H
#include <stddef.h>

/* Instruction sets the CPU has and the OS saves the registers of. */
enum {
    CT_CPU_SSE3 = 1u << 0,
    CT_CPU_SSSE3 = 1u << 1,
    CT_CPU_SSE41 = 1u << 2,
    CT_CPU_SSE42 = 1u << 3,
    CT_CPU_AVX = 1u << 4,
    CT_CPU_AVX2 = 1u << 5,
    CT_CPU_FMA = 1u << 6,
    CT_CPU_AVX512F = 1u << 7,
    CT_CPU_AVX512CD = 1u << 8,
    CT_CPU_AVX512BW = 1u << 9,
    CT_CPU_AVX512DQ = 1u << 10,
    CT_CPU_AVX512VL = 1u << 11,
    CT_CPU_AVX512_VNNI = 1u << 12,
    CT_CPU_AVX512_BF16 = 1u << 13,
    CT_CPU_AVX512_FP16 = 1u << 14,
    CT_CPU_AMX_BF16 = 1u << 15,
};
/* The AVX-512 subsets OpenBLAS's SkylakeX kernels are compiled for. */
#define CT_CPU_AVX512_SKX (CT_CPU_AVX512F | CT_CPU_AVX512CD | CT_CPU_AVX512BW | CT_CPU_AVX512DQ | CT_CPU_AVX512VL)

typedef enum { CT_CPU_VENDOR_OTHER = 0, CT_CPU_VENDOR_INTEL, CT_CPU_VENDOR_AMD } ct_cpu_vendor;

typedef struct {
    ct_cpu_vendor vendor;
    int family, model;        /* as Linux prints them (family + extended family, model + extended model) */
    unsigned flags;           /* CT_CPU_* */
} ct_cpu_features;

/* This CPU (all zero flags on a non-x86 build). */
void ct_cpu_detect(ct_cpu_features *f);
/* The CPU's name, /proc/cpuinfo's first "model name" ("unknown CPU" when there is none), into buf. */
void ct_cpu_name(char *buf, size_t n);
/* "AMD family 26 model 2: AVX-512 (F CD BW DQ VL VNNI BF16), AVX2, FMA" into buf. */
void ct_cpu_describe(const ct_cpu_features *f, char *buf, size_t n);

/* How capable an OpenBLAS core's kernels are: 0 generic (SSE3) ... 6 (AMX);
 * -1 for a name ctrain does not know. Case-insensitive, as OpenBLAS compares. */
int ct_blas_core_level(const char *core);

/* The policy's core for this CPU, and why (a sentence naming the measurement
 * the row rests on). Never NULL: every x86-64 has at least Prescott's SSE3;
 * without SSE3 the answer is "Prescott" anyway (OpenBLAS's floor). Cores listed
 * in `skip` (comma-separated, case-insensitive; may be NULL) are passed over:
 * the ones a build turned out not to have. Returns NULL when every candidate
 * better than `floor_level` is skipped. */
const char *ct_blas_choose(const ct_cpu_features *f, const char *skip, int floor_level, const char **why);

/* The start-up check (see the top of this file). argv must be main's argv. May
 * not return: it executes the program again with OPENBLAS_CORETYPE set. */
void ct_blas_select(char **argv);

/* After ct_blas_select: what the BLAS core is and who chose it, e.g.
 * "Cooperlake (chosen by ctrain: OpenBLAS picked Haswell on this CPU)",
 * "Haswell (OPENBLAS_CORETYPE=Haswell from the environment; ctrain would pick Cooperlake)",
 * "Haswell (OpenBLAS's choice)". */
const char *ct_blas_select_note(void);
/* The core OpenBLAS runs (openblas_get_corename()). */
const char *ct_blas_core(void);

#endif
