/* device.c - `--device cpu|gpu|gpu:N` for every command, and the GPU part of the
 * hardware header.
 *
 * A CPU-only build answers --device gpu with "built without CUDA"; a CUDA build
 * opens the GPU (cuda/device.c), which on a machine without one says "no NVIDIA
 * GPU found". An open GPU is the process's one GPU context until exit. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cuda/device.h"
#include "cuda/ops_gpu.h"
#include "layers/ops.h"

ct_status cli_open_device(const char *spec, int tf32, int deterministic, const ct_ops **ops)
{
    int index = -1;
    *ops = NULL;
    CT_TRY(ct_gpu_parse_device(spec, &index));
    if (index < 0) {
        if (tf32 || deterministic)
            return ct_fail(CT_EINVAL, "%s applies to the GPU; with --device cpu leave it out (the CPU always computes in FP32, "
                           "deterministically for a given --threads)", tf32 ? "--tf32" : "--deterministic");
        *ops = &ct_ops_cpu;
        return CT_OK;
    }
    ct_gpu_options opt = { .tf32 = tf32, .deterministic = deterministic };
    CT_TRY(ct_gpu_open(index, &opt));   /* no CUDA, no GPU, no such index: its one-line message */
    *ops = ct_ops_gpu();
    return CT_OK;
}

void cli_print_gpu_line(FILE *out)
{
    char line[512];
    if (ct_gpu_current()) {
        ct_gpu_describe(line, sizeof line);
        fprintf(out, "%s\n", line);
    } else if (ct_gpu_compiled()) {
        fprintf(out, "GPU: CUDA backend compiled in, not used (--device cpu)\n");
    } else {
        fprintf(out, "GPU: not compiled in (CPU-only build)\n");
    }
}
