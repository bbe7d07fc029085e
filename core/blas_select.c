/* blas_select.c - the CPU's name and features, the choice of OpenBLAS core for this
 * CPU, and the start-up check that puts OpenBLAS on it (see blas_select.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "core/blas_select.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CT_X86 1
#else
#define CT_X86 0
#endif

char *openblas_get_corename(void);   /* OpenBLAS's own, not in every cblas.h */

/* ---- what the CPU can run ---- */
#if CT_X86
static unsigned long long xgetbv0(void)
{
    unsigned lo, hi;
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));   /* xgetbv: the register state the OS saves */
    return ((unsigned long long)hi << 32) | lo;
}
#endif

void ct_cpu_detect(ct_cpu_features *f)
{
    memset(f, 0, sizeof *f);
#if CT_X86
    unsigned a = 0, b = 0, c = 0, d = 0, max = 0;
    if (!__get_cpuid(0, &max, &b, &c, &d)) return;
    char vendor[13];
    memcpy(vendor, &b, 4); memcpy(vendor + 4, &d, 4); memcpy(vendor + 8, &c, 4);
    vendor[12] = '\0';
    f->vendor = !strcmp(vendor, "GenuineIntel") ? CT_CPU_VENDOR_INTEL
              : !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine") ? CT_CPU_VENDOR_AMD : CT_CPU_VENDOR_OTHER;
    __get_cpuid(1, &a, &b, &c, &d);
    int fam = (a >> 8) & 0xf, mod = (a >> 4) & 0xf;
    if (fam == 0xf) fam += (a >> 20) & 0xff;
    if (fam == 6 || fam >= 0xf) mod += ((a >> 16) & 0xf) << 4;
    f->family = fam;
    f->model = mod;
    if (c & (1u << 0)) f->flags |= CT_CPU_SSE3;
    if (c & (1u << 9)) f->flags |= CT_CPU_SSSE3;
    if (c & (1u << 19)) f->flags |= CT_CPU_SSE41;
    if (c & (1u << 20)) f->flags |= CT_CPU_SSE42;
    /* AVX and up also need the OS to save the wider registers (XCR0) */
    unsigned long long xcr0 = (c & (1u << 27)) ? xgetbv0() : 0;
    const int ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe0) == 0xe0, tiles = (xcr0 & 0x60000) == 0x60000;
    if (!ymm) return;
    if (c & (1u << 28)) f->flags |= CT_CPU_AVX;
    if (c & (1u << 12)) f->flags |= CT_CPU_FMA;
    if (max < 7) return;
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    if (b & (1u << 5)) f->flags |= CT_CPU_AVX2;
    if (zmm) {
        if (b & (1u << 16)) f->flags |= CT_CPU_AVX512F;
        if (b & (1u << 17)) f->flags |= CT_CPU_AVX512DQ;
        if (b & (1u << 28)) f->flags |= CT_CPU_AVX512CD;
        if (b & (1u << 30)) f->flags |= CT_CPU_AVX512BW;
        if (b & (1u << 31)) f->flags |= CT_CPU_AVX512VL;
        if (c & (1u << 11)) f->flags |= CT_CPU_AVX512_VNNI;
        if (d & (1u << 23)) f->flags |= CT_CPU_AVX512_FP16;
        if (tiles && (d & (1u << 22)) && (d & (1u << 24))) f->flags |= CT_CPU_AMX_BF16;
        unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
        __get_cpuid_count(7, 1, &a1, &b1, &c1, &d1);
        if (a1 & (1u << 5)) f->flags |= CT_CPU_AVX512_BF16;
    }
#endif
}

void ct_cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ') p++;
                p[strcspn(p, "\n")] = '\0';
                snprintf(buf, n, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

void ct_cpu_describe(const ct_cpu_features *f, char *buf, size_t n)
{
    static const struct { unsigned bit; const char *name; } sub[] = {
        { CT_CPU_AVX512F, "F" }, { CT_CPU_AVX512CD, "CD" }, { CT_CPU_AVX512BW, "BW" }, { CT_CPU_AVX512DQ, "DQ" },
        { CT_CPU_AVX512VL, "VL" }, { CT_CPU_AVX512_VNNI, "VNNI" }, { CT_CPU_AVX512_BF16, "BF16" }, { CT_CPU_AVX512_FP16, "FP16" },
    };
    const char *v = f->vendor == CT_CPU_VENDOR_INTEL ? "Intel" : f->vendor == CT_CPU_VENDOR_AMD ? "AMD" : "x86";
    size_t k = (size_t)snprintf(buf, n, "%s family %d model %d:", v, f->family, f->model);
    const char *sep = " ";
#define ADD(...) do { if (k < n) k += (size_t)snprintf(buf + k, n - k, __VA_ARGS__); } while (0)
    if (f->flags & CT_CPU_AVX512F) {
        ADD("%sAVX-512 (", sep);
        for (size_t i = 0, first = 1; i < sizeof sub / sizeof sub[0]; i++)
            if (f->flags & sub[i].bit) { ADD("%s%s", first ? "" : " ", sub[i].name); first = 0; }
        ADD(")");
        sep = ", ";
    }
    if (f->flags & CT_CPU_AMX_BF16) { ADD("%sAMX-BF16", sep); sep = ", "; }
    if (f->flags & CT_CPU_AVX2) { ADD("%sAVX2", sep); sep = ", "; }
    if (f->flags & CT_CPU_FMA) { ADD("%sFMA", sep); sep = ", "; }
    if ((f->flags & CT_CPU_AVX) && !(f->flags & CT_CPU_AVX2)) { ADD("%sAVX", sep); sep = ", "; }
    if (!(f->flags & CT_CPU_AVX)) {
        if (f->flags & CT_CPU_SSE42) ADD("%sSSE4.2", sep);
        else if (f->flags & CT_CPU_SSSE3) ADD("%sSSSE3", sep);
        else if (f->flags & CT_CPU_SSE3) ADD("%sSSE3", sep);
        else ADD("%sSSE2 only", sep);
    }
#undef ADD
}

/* ---- the OpenBLAS cores and the policy ---- */
/* Level of each core DYNAMIC_ARCH OpenBLAS (0.3.21) accepts in OPENBLAS_CORETYPE, by the
 * widest arithmetic its sgemm kernels use: 0 SSE3, 1 SSSE3/SSE4, 2 AVX (no FMA), 3 AVX2+FMA,
 * 4 AVX-512, 5 AVX-512 with BF16, 6 AMX (OpenBLAS 0.3.22 and later). */
static const struct { const char *core; int level; } CORE_LEVELS[] = {
    { "Prescott", 0 }, { "Katmai", 0 }, { "Coppermine", 0 }, { "Northwood", 0 }, { "Banias", 0 }, { "Athlon", 0 },
    { "Opteron", 0 }, { "Opteron_SSE3", 0 },
    { "Core2", 1 }, { "Penryn", 1 }, { "Dunnington", 1 }, { "Nehalem", 1 }, { "Atom", 1 }, { "Nano", 1 },
    { "Barcelona", 1 }, { "Bobcat", 1 },
    { "Sandybridge", 2 }, { "Bulldozer", 2 }, { "Piledriver", 2 }, { "Steamroller", 2 }, { "Excavator", 2 },
    { "Haswell", 3 }, { "Zen", 3 },
    { "SkylakeX", 4 }, { "Cooperlake", 5 }, { "SapphireRapids", 6 },
};

int ct_blas_core_level(const char *core)
{
    for (size_t i = 0; core && i < sizeof CORE_LEVELS / sizeof CORE_LEVELS[0]; i++)
        if (!strcasecmp(core, CORE_LEVELS[i].core)) return CORE_LEVELS[i].level;
    return -1;
}

/* FP32 FLOPs per cycle per core a level's kernels can reach at most (two vector
 * pipes; mul and add separately below FMA): the ratio of two of them is the cost
 * of running the older kernels. */
static int level_flops_per_cycle(int level) { return level >= 4 ? 64 : level == 3 ? 32 : level == 2 ? 16 : 8; }

typedef struct {
    ct_cpu_vendor vendor;   /* CT_CPU_VENDOR_OTHER: any vendor */
    int min_family;         /* 0: any family */
    unsigned needs;         /* CT_CPU_* the core's kernels execute */
    const char *core;
    const char *why;
} blas_rule;

/* The policy: the first row whose vendor, family and instructions match, and
 * that the build has (ct_blas_choose's `skip`), wins.
 *
 * AMD Zen 4 (family 25) and Zen 5 (family 26) with AVX-512: Debian's OpenBLAS
 * 0.3.21 reaches Cooperlake on Zen 5 only through its fallback on the CPU's
 * features, and picks by family and model where it knows them. Measured on a
 * shared 2-core AMD EPYC Zen 5 (family 26 model 2), OpenBLAS 0.3.21, each core
 * forced with OPENBLAS_CORETYPE, 4 interleaved rounds, medians (bench/bench_sgemm
 * with 1 thread, GFLOP/s; `ctrain time MODEL --protocol bench --threads 2`,
 * training samples/s):
 *
 *                                  Haswell   SkylakeX   Cooperlake
 *   sgemm 2048^3                     109       186        207
 *   25600x512x40 (LSTM input)         60        98        151
 *   256x512x128 (LSTM recurrence)    111       192        205
 *   512x128x25600 (LSTM dW_hh)        93       163        173
 *   siamese-lstm, pairs/s            748      1178       1191
 *   cnn (mnist_cnn), images/s       1076      1430       1401
 *
 * Four earlier rounds on the machine under heavy load agree in order. So
 * Zen 4/5 take Cooperlake (the two AVX-512 cores are level on the models, and
 * Cooperlake is ahead on the thin products), as newer OpenBLAS releases do by
 * themselves on Zen 4. Intel CPUs with AVX-512 take the core OpenBLAS itself gives their
 * family (SkylakeX; Cooperlake with BF16). SapphireRapids is not chosen: its
 * additions (AMX) serve bf16 products, not sgemm, and 0.3.21 lacks it. */
static const blas_rule CT_BLAS_POLICY[] = {
    { CT_CPU_VENDOR_AMD, 0x19, CT_CPU_AVX512_SKX | CT_CPU_AVX512_BF16, "Cooperlake",
      "AMD Zen 4/5 with AVX-512: Cooperlake's kernels measured best (sgemm 1.9x Haswell's, ahead of SkylakeX's on thin products)" },
    { CT_CPU_VENDOR_OTHER, 0, CT_CPU_AVX512_SKX | CT_CPU_AVX512_BF16, "Cooperlake", "AVX-512 with BF16" },
    { CT_CPU_VENDOR_OTHER, 0, CT_CPU_AVX512_SKX, "SkylakeX", "AVX-512 (F CD BW DQ VL)" },
    { CT_CPU_VENDOR_AMD, 0x17, CT_CPU_AVX2 | CT_CPU_FMA, "Zen", "AMD with AVX2 and FMA" },
    { CT_CPU_VENDOR_OTHER, 0, CT_CPU_AVX2 | CT_CPU_FMA, "Haswell", "AVX2 and FMA" },
    { CT_CPU_VENDOR_OTHER, 0, CT_CPU_AVX, "Sandybridge", "AVX without FMA" },
    { CT_CPU_VENDOR_OTHER, 0, CT_CPU_SSE42, "Nehalem", "SSE4.2" },
    { CT_CPU_VENDOR_OTHER, 0, CT_CPU_SSSE3, "Core2", "SSSE3" },
    { CT_CPU_VENDOR_OTHER, 0, 0, "Prescott", "SSE3: OpenBLAS's generic x86-64 kernels" },
};

/* Is `core` one of the comma-separated names in list? */
static int in_list(const char *list, const char *core)
{
    size_t n = strlen(core);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !strncasecmp(p, core, n)) return 1;
        p += len + (p[len] == ',');
    }
    return 0;
}

const char *ct_blas_choose(const ct_cpu_features *f, const char *skip, int floor_level, const char **why)
{
    for (size_t i = 0; i < sizeof CT_BLAS_POLICY / sizeof CT_BLAS_POLICY[0]; i++) {
        const blas_rule *r = &CT_BLAS_POLICY[i];
        if (r->vendor != CT_CPU_VENDOR_OTHER && r->vendor != f->vendor) continue;
        if (f->family < r->min_family || (f->flags & r->needs) != r->needs) continue;
        if (ct_blas_core_level(r->core) <= floor_level) break;   /* the rest are no better */
        if (in_list(skip, r->core)) continue;
        if (why) *why = r->why;
        return r->core;
    }
    return NULL;
}

/* ---- the start-up check ---- */
#define MARKER "CTRAIN_BLAS_SELECT"   /* "picked=CORE;tried=CORE,CORE[;final]", set only across our own restart */
#define MAX_TRIES 8

static char note[640];

const char *ct_blas_core(void)
{
    const char *c = openblas_get_corename();
    return c ? c : "unknown";
}

const char *ct_blas_select_note(void)
{
    if (!note[0]) snprintf(note, sizeof note, "%s (OpenBLAS's choice)", ct_blas_core());
    return note;
}

/* Sets OPENBLAS_CORETYPE and the marker, and executes this program again: returns only on failure. */
static void restart(char **argv, const char *picked, const char *tried, const char *next, int final)
{
    char mark[512];
    snprintf(mark, sizeof mark, "picked=%s;tried=%s%s%s%s", picked, tried, *tried ? "," : "", next, final ? ";final" : "");
    setenv("OPENBLAS_CORETYPE", next, 1);
    setenv(MARKER, mark, 1);
    fflush(stdout);
    fflush(stderr);
    execv("/proc/self/exe", argv);
    int e = errno;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(MARKER);
    fprintf(stderr, "ctrain: warning: could not restart itself to run OpenBLAS's %s kernels (execv /proc/self/exe: %s); "
            "set OPENBLAS_CORETYPE=%s to use them\n", next, strerror(e), next);
}

/* The best level this CPU can use, for the cost in a warning. */
static int cpu_level(const ct_cpu_features *f)
{
    const char *best = ct_blas_choose(f, NULL, -1, NULL);
    return best ? ct_blas_core_level(best) : 0;
}

static void warn_cost(const ct_cpu_features *f, const char *cur, const char *tried)
{
    char cpu[256];
    ct_cpu_describe(f, cpu, sizeof cpu);
    int ratio = level_flops_per_cycle(cpu_level(f)) / level_flops_per_cycle(ct_blas_core_level(cur) < 0 ? 0 : ct_blas_core_level(cur));
    fprintf(stderr, "ctrain: warning: this OpenBLAS has no kernels for this CPU (%s) better than %s (tried: %s); "
            "sgemm can reach at most about 1/%d of the CPU's FMA peak; an OpenBLAS built with kernels for this "
            "CPU removes the cost\n", cpu, cur, tried, ratio > 1 ? ratio : 1);
}

void ct_blas_select(char **argv)
{
#if CT_X86
    ct_cpu_features f;
    ct_cpu_detect(&f);
    const char *cur = ct_blas_core();
    const char *user = getenv("OPENBLAS_CORETYPE"), *mark = getenv(MARKER);
    char picked[64] = "", tried[256] = "";
    int final = 0, n_tried = 0;
    if (mark) {   /* ours only when OPENBLAS_CORETYPE is the last core the marker tried */
        const char *t = strstr(mark, ";tried=");
        if (!strncmp(mark, "picked=", 7) && t) {
            snprintf(picked, sizeof picked, "%.*s", (int)(t - mark - 7) < 63 ? (int)(t - mark - 7) : 63, mark + 7);
            snprintf(tried, sizeof tried, "%.*s", (int)strcspn(t + 7, ";"), t + 7);
            final = strstr(t, ";final") != NULL;
            const char *last = strrchr(tried, ',');
            last = last ? last + 1 : tried;
            if (!user || strcasecmp(user, final ? picked : last)) mark = NULL;
            for (const char *p = tried; *p; p++) n_tried += *p == ',';
            n_tried += tried[0] != '\0';
        } else {
            mark = NULL;
        }
        unsetenv(MARKER);
    }
    const char *best = ct_blas_choose(&f, NULL, -1, NULL);
    if (!mark) {
        if (user) {   /* the user's choice always wins */
            int lc = ct_blas_core_level(cur), lb = ct_blas_core_level(best);
            if (lc >= 0 && lc < lb)
                snprintf(note, sizeof note, "%s (OPENBLAS_CORETYPE=%s from the environment; ctrain would pick %s on this "
                         "CPU, with up to %dx the FP32 throughput)", cur, user, best,
                         level_flops_per_cycle(lb) / level_flops_per_cycle(lc));
            else snprintf(note, sizeof note, "%s (OPENBLAS_CORETYPE=%s from the environment)", cur, user);
            return;
        }
        /* as good as the policy's, or a core this file does not know (a newer OpenBLAS knows better) */
        if (ct_blas_core_level(cur) >= ct_blas_core_level(best) || ct_blas_core_level(cur) < 0) {
            snprintf(note, sizeof note, "%s (OpenBLAS's choice)", cur);
            return;
        }
        restart(argv, cur, "", best, 0);
        snprintf(note, sizeof note, "%s (OpenBLAS's choice; ctrain's, %s, could not be set: see the warning)", cur, best);
        return;
    }
    /* restarted by ct_blas_select itself */
    unsetenv("OPENBLAS_CORETYPE");
    const char *asked = strrchr(tried, ',');
    asked = asked ? asked + 1 : tried;
    const int lp = ct_blas_core_level(picked), lc = ct_blas_core_level(cur);
    if (!final && (!strcasecmp(cur, asked) || lc > lp)) {
        if (!strcasecmp(cur, asked) && n_tried == 1)
            snprintf(note, sizeof note, "%s (chosen by ctrain: OpenBLAS picked %s on this CPU)", cur, picked);
        else
            snprintf(note, sizeof note, "%s (chosen by ctrain: OpenBLAS picked %s on this CPU; tried %s)", cur, picked, tried);
        return;
    }
    if (!final) {
        const char *next = n_tried < MAX_TRIES ? ct_blas_choose(&f, tried, lp, NULL) : NULL;
        if (next) restart(argv, picked, tried, next, 0);
        else if (lc < lp) restart(argv, picked, tried, picked, 1);   /* back to OpenBLAS's own */
    }
    snprintf(note, sizeof note, "%s (OpenBLAS's choice; this OpenBLAS has nothing better for this CPU: tried %s)", cur, tried);
    warn_cost(&f, cur, tried);
#else
    (void)argv;
#endif
}
