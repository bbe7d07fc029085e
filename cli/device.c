/* device.c - `--device cpu|gpu[:N]` for every command, and the GPU part of the
 * hardware header.
 *
 * A CPU-only build answers --device gpu with "built without CUDA". A CUDA build
 * opens the GPU (cuda/device.c), which on a machine without one says "no NVIDIA
 * GPU found". The GPU layers and the GPU siamese model exist in cuda/, but the
 * training commands are not connected to them yet, so a CUDA build that does
 * find a GPU says exactly that instead of silently training on the CPU. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "cuda/device.h"

ct_status cli_select_device(const char *spec)
{
    int index = -1;
    CT_TRY(ct_gpu_parse_device(spec, &index));
    if (index < 0) return CT_OK;                                  /* cpu */
    CT_TRY(ct_gpu_open(index, NULL));                             /* no CUDA / no GPU: its clear error */
    char line[512];
    ct_gpu_describe(line, sizeof line);
    ct_gpu_close();
    return ct_fail(CT_ENODEV, "--device %s: found %s, but the training and evaluation commands do not run on "
                   "the GPU backend yet; use --device cpu", spec, line);
}

void cli_print_gpu_line(FILE *out)
{
    if (ct_gpu_compiled()) fprintf(out, "GPU: CUDA backend compiled in, not used (--device cpu)\n");
    else fprintf(out, "GPU: not compiled in (CPU-only build)\n");
}
