/* info.c - `ctrain info` and the hardware/software header printed before training. */
#include <stdio.h>
#include <string.h>
#include <cblas.h>
#include <hdf5.h>
#include "cli/cli.h"
#include "core/threads.h"
#include "cuda/device.h"

void cli_cpu_model(char *buf, size_t n)
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

void cli_print_header(FILE *out, int threads)
{
    char cpu[256];
    unsigned maj, min, rel;
    cli_cpu_model(cpu, sizeof cpu);
    H5get_libversion(&maj, &min, &rel);
    const ct_gpu *g = ct_gpu_current();
    if (g) fprintf(out, "ctrain %s | device: gpu:%d\n", CTRAIN_VERSION, g->index);
    else fprintf(out, "ctrain %s | device: cpu\n", CTRAIN_VERSION);
    fprintf(out, "CPU: %s, %d logical cores, %d thread%s used\n", cpu, ct_cpu_count(), threads, threads == 1 ? "" : "s");
    fprintf(out, "BLAS: %s\n", ct_blas_config());
    fprintf(out, "HDF5: %u.%u.%u\n", maj, min, rel);
    cli_print_gpu_line(out);
}

int cmd_info(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: ctrain info\n\nPrints the CPU, core count, BLAS library and build, and HDF5 version.\n");
        return 0;
    }
    if (argc > 0) { fprintf(stderr, "ctrain info: unexpected argument '%s'\n", argv[0]); return 2; }
    cli_print_header(stdout, ct_threads_get());
    return 0;
}
