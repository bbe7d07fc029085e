/* test_blas.c - tests of core/blas_select.c (the choice of OpenBLAS core on
 * synthetic CPUs, the core levels, the feature description, and the start-up
 * check through `ctrain info`) and of the FMA peak in core/peak.c (the
 * kernel's arithmetic at every width this CPU runs, and a peak that is
 * positive and finite). Correctness only: no timing is asserted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "core/blas_select.h"
#include "core/peak.h"

#define AVX2_FMA (CT_CPU_SSE3 | CT_CPU_SSSE3 | CT_CPU_SSE41 | CT_CPU_SSE42 | CT_CPU_AVX | CT_CPU_AVX2 | CT_CPU_FMA)

static void test_choice(void)
{
    struct {
        const char *cpu;
        ct_cpu_features f;
        const char *want;
    } cases[] = {
        { "AMD Zen 5 (EPYC 9005)", { CT_CPU_VENDOR_AMD, 26, 2, AVX2_FMA | CT_CPU_AVX512_SKX | CT_CPU_AVX512_VNNI | CT_CPU_AVX512_BF16 },
          "Cooperlake" },
        { "AMD Zen 4 (EPYC 9004)", { CT_CPU_VENDOR_AMD, 25, 17, AVX2_FMA | CT_CPU_AVX512_SKX | CT_CPU_AVX512_VNNI | CT_CPU_AVX512_BF16 },
          "Cooperlake" },
        { "AMD Zen 3", { CT_CPU_VENDOR_AMD, 25, 1, AVX2_FMA }, "Zen" },
        { "AMD Zen 2", { CT_CPU_VENDOR_AMD, 23, 49, AVX2_FMA }, "Zen" },
        { "Intel Xeon, family 6 model 207 (AVX-512 BF16 FP16, AMX)",
          { CT_CPU_VENDOR_INTEL, 6, 207, AVX2_FMA | CT_CPU_AVX512_SKX | CT_CPU_AVX512_VNNI | CT_CPU_AVX512_BF16
                                         | CT_CPU_AVX512_FP16 | CT_CPU_AMX_BF16 }, "Cooperlake" },
        { "Intel Skylake-SP", { CT_CPU_VENDOR_INTEL, 6, 85, AVX2_FMA | CT_CPU_AVX512_SKX }, "SkylakeX" },
        { "Intel Ice Lake-SP (no BF16)", { CT_CPU_VENDOR_INTEL, 6, 106, AVX2_FMA | CT_CPU_AVX512_SKX | CT_CPU_AVX512_VNNI }, "SkylakeX" },
        { "AVX-512F without BW/VL (Knights Landing)", { CT_CPU_VENDOR_INTEL, 6, 87, AVX2_FMA | CT_CPU_AVX512F | CT_CPU_AVX512CD },
          "Haswell" },
        { "Intel Haswell", { CT_CPU_VENDOR_INTEL, 6, 63, AVX2_FMA }, "Haswell" },
        { "an AVX-512 CPU whose OS does not save the zmm registers", { CT_CPU_VENDOR_INTEL, 6, 85, AVX2_FMA }, "Haswell" },
        { "Intel Sandy Bridge", { CT_CPU_VENDOR_INTEL, 6, 42, CT_CPU_SSE3 | CT_CPU_SSSE3 | CT_CPU_SSE41 | CT_CPU_SSE42 | CT_CPU_AVX },
          "Sandybridge" },
        { "Intel Nehalem", { CT_CPU_VENDOR_INTEL, 6, 26, CT_CPU_SSE3 | CT_CPU_SSSE3 | CT_CPU_SSE41 | CT_CPU_SSE42 }, "Nehalem" },
        { "Intel Core 2", { CT_CPU_VENDOR_INTEL, 6, 15, CT_CPU_SSE3 | CT_CPU_SSSE3 }, "Core2" },
        { "another vendor with SSE3 only", { CT_CPU_VENDOR_OTHER, 6, 15, CT_CPU_SSE3 }, "Prescott" },
        { "no extension at all", { CT_CPU_VENDOR_OTHER, 0, 0, 0 }, "Prescott" },
    };
    t_case("blas/the policy picks the expected core for each synthetic CPU");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *why = NULL;
        const char *got = ct_blas_choose(&cases[i].f, NULL, -1, &why);
        t_check(got && !strcmp(got, cases[i].want), "%s: got %s, want %s", cases[i].cpu, got ? got : "NULL", cases[i].want);
        t_check(why && *why, "%s: no reason given", cases[i].cpu);
    }

    t_case("blas/cores a build lacks are passed over, down to a floor");
    const ct_cpu_features zen5 = cases[0].f;
    const char *got = ct_blas_choose(&zen5, "cooperlake", -1, NULL);
    t_check(got && !strcmp(got, "SkylakeX"), "without Cooperlake: got %s, want SkylakeX", got ? got : "NULL");
    got = ct_blas_choose(&zen5, "Cooperlake,SkylakeX", 3, NULL);
    t_check(got == NULL, "nothing better than Haswell left: got %s", got ? got : "NULL");
    got = ct_blas_choose(&zen5, "Cooperlake,SkylakeX", -1, NULL);
    t_check(got && !strcmp(got, "Zen"), "below the AVX-512 cores (AMD): got %s, want Zen", got ? got : "NULL");
    got = ct_blas_choose(&zen5, NULL, 5, NULL);
    t_check(got == NULL, "nothing better than Cooperlake: got %s", got ? got : "NULL");

    t_case("blas/core levels order the kernels by what they execute");
    t_check(ct_blas_core_level("Prescott") == 0 && ct_blas_core_level("Nehalem") == 1 && ct_blas_core_level("Sandybridge") == 2,
            "SSE3 < SSE4.2 < AVX");
    t_check(ct_blas_core_level("haswell") == 3 && ct_blas_core_level("ZEN") == 3, "Haswell and Zen (any case): AVX2+FMA");
    t_check(ct_blas_core_level("SkylakeX") == 4 && ct_blas_core_level("Cooperlake") == 5 && ct_blas_core_level("SapphireRapids") == 6,
            "AVX-512 < AVX-512 BF16 < AMX");
    t_check(ct_blas_core_level("Bogus") == -1 && ct_blas_core_level(NULL) == -1, "unknown names");
    t_check(ct_blas_core_level(ct_blas_core()) >= 0, "the core OpenBLAS runs here (%s) is not in the table", ct_blas_core());

    t_case("blas/feature description names the vendor, family and vector extensions");
    char desc[256];
    ct_cpu_describe(&zen5, desc, sizeof desc);
    t_check(strstr(desc, "AMD family 26 model 2") && strstr(desc, "AVX-512 (F CD BW DQ VL VNNI BF16)") && strstr(desc, "AVX2")
            && strstr(desc, "FMA"), "Zen 5: %s", desc);
    ct_cpu_describe(&cases[12].f, desc, sizeof desc);
    t_check(strstr(desc, "SSSE3") && !strstr(desc, "AVX"), "Core 2: %s", desc);
    ct_cpu_features here;
    ct_cpu_detect(&here);
    ct_cpu_describe(&here, desc, sizeof desc);
    t_check(!(here.flags & CT_CPU_AVX2) || (here.flags & CT_CPU_AVX), "this CPU: AVX2 without AVX? %s", desc);
    t_check(!(here.flags & CT_CPU_AVX512BW) || (here.flags & CT_CPU_AVX512F), "this CPU: AVX-512BW without F? %s", desc);
#if defined(__x86_64__)
    t_check(here.family > 0 && (here.flags & CT_CPU_SSE3), "this x86-64 CPU has no family or no SSE3: %s", desc);
#endif
}

/* The command line: the core in the header, the user's OPENBLAS_CORETYPE kept, a restart checked. */
static void test_startup(void)
{
    static char out[16384];
    char *saved = getenv("OPENBLAS_CORETYPE") ? strdup(getenv("OPENBLAS_CORETYPE")) : NULL;

    t_case("blas/ctrain info names the CPU's features, the core and who chose it");
    unsetenv("OPENBLAS_CORETYPE");
    int rc = t_run_ctrain("info --no-peak", out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "CPU features: ") && strstr(out, "BLAS policy: ") && strstr(out, ", core "), "info lacks a line: %s", out);
    t_check(strstr(out, "(OpenBLAS's choice)") || strstr(out, "(chosen by ctrain: OpenBLAS picked "), "who chose the core: %s", out);

    t_case("blas/an OPENBLAS_CORETYPE from the environment wins and is named");
    setenv("OPENBLAS_CORETYPE", "Prescott", 1);
    rc = t_run_ctrain("info --no-peak", out, sizeof out);
    t_check(rc == 0 && strstr(out, "core Prescott (OPENBLAS_CORETYPE=Prescott from the environment"), "exit %d: %s", rc, out);

#if defined(__x86_64__)
    t_case("blas/a restart that did not get its core tries the next one and cleans up");
    /* As if ctrain had restarted OpenBLAS (which picked Haswell) on "Katmai": 0.3.21 gives Prescott for it,
     * which is no better, so the program must restart itself once more with the next candidate. */
    setenv("OPENBLAS_CORETYPE", "Katmai", 1);
    setenv("CTRAIN_BLAS_SELECT", "picked=Haswell;tried=Katmai", 1);
    rc = t_run_ctrain("info --no-peak", out, sizeof out);
    unsetenv("CTRAIN_BLAS_SELECT");
    ct_cpu_features here;
    ct_cpu_detect(&here);
    const char *best = ct_blas_choose(&here, "Katmai", 3, NULL);
    if (best) t_check(rc == 0 && strstr(out, "(chosen by ctrain: OpenBLAS picked Haswell on this CPU; tried Katmai,"), "exit %d: %s", rc, out);
    else t_check(rc == 0 && strstr(out, "nothing better"), "exit %d: %s", rc, out);
#endif
    if (saved) { setenv("OPENBLAS_CORETYPE", saved, 1); free(saved); }
    else unsetenv("OPENBLAS_CORETYPE");
}

static void test_fma(void)
{
    t_case("blas/fma kernel: every width this CPU runs computes acc = acc * m + a exactly");
    const float m = 0.999f, a = 1e-3f, x0 = 0.5f;
    const long iters = 1000;
    for (int isa = CT_FMA_SSE; isa <= (int)ct_fma_isa_best(); isa++) {
        float out[CT_FMA_MAX_OUT];
        const int n = ct_fma_isa_accs((ct_fma_isa)isa) * ct_fma_isa_lanes((ct_fma_isa)isa);
        t_check(n <= CT_FMA_MAX_OUT, "%s: %d accumulators", ct_fma_isa_name((ct_fma_isa)isa), n);
        ct_fma_kernel_run((ct_fma_isa)isa, iters, m, a, x0, out);
        int exact = 1;
        double worst = 0;
        for (int i = 0; i < n; i++) {
            float c = x0 + (float)i * 1e-3f;
            for (long k = 0; k < iters; k++) {
                if (isa == CT_FMA_SSE) { volatile float p = c * m; c = p + a; }   /* two roundings */
                else c = fmaf(c, m, a);                                            /* one */
            }
            exact &= out[i] == c;
            /* the closed form, in double: m^n x + a (1 - m^n) / (1 - m) */
            double mn = pow((double)m, (double)iters), x = (double)(x0 + (float)i * 1e-3f);
            double e = fabs(out[i] - (mn * x + a * (1 - mn) / (1 - (double)m)));
            if (e > worst) worst = e;
        }
        t_check(exact, "%s: differs from the scalar recurrence", ct_fma_isa_name((ct_fma_isa)isa));
        t_check(worst < 1e-3, "%s: %.3g from the closed form", ct_fma_isa_name((ct_fma_isa)isa), worst);
    }

    t_case("blas/fma peak with 1 and 2 threads is positive and finite");
    for (int threads = 1; threads <= 2; threads++) {
        ct_fma_rate r;
        ct_status st = ct_peak_fma_cpu(&r, threads);
        t_check(st == CT_OK, "%d threads: %s", threads, ct_last_error());
        t_check(isfinite(r.median) && r.median > 0 && r.best >= r.median && r.peak == r.best, "%d threads: median %g best %g peak %g",
                threads, r.median, r.best, r.peak);
        t_check(r.threads == threads && r.lanes == ct_fma_isa_lanes(r.isa) && r.isa == ct_fma_isa_best() && r.repeats == CT_FMA_REPEATS,
                "%d threads: threads %d lanes %d", threads, r.threads, r.lanes);
    }
}

void suite_blas(void)
{
    test_choice();
    test_fma();
    test_startup();
}
