/* nvml.h - a GPU's power, energy, temperature, utilisation and clocks through NVML, the
 * driver's management library (libnvidia-ml.so.1). It is loaded at run time (dlopen), so
 * nothing is linked and every build runs where the driver is missing: opening then fails
 * with one line saying why, and the caller reports the GPU's counters as n/a.
 *
 * The GPU is found by its UUID (CUDA's device properties, so CUDA_VISIBLE_DEVICES and
 * CUDA's device order are respected); a build without CUDA opens NVML's device `index`.
 * Every reading is NaN where the GPU has no such counter (the energy counter needs Volta
 * or later; some boards report no power). */
#ifndef CT_CUDA_NVML_H
#define CT_CUDA_NVML_H
#include <stddef.h>
#include "core/error.h"

typedef struct ct_nvml ct_nvml;

typedef struct {
    double power_w;        /* board power draw, watts (nvmlDeviceGetPowerUsage, mW) */
    double energy_mj;      /* energy since the driver loaded, millijoules (nvmlDeviceGetTotalEnergyConsumption) */
    double temp_c;         /* core temperature, degrees C */
    double busy, mem_busy; /* percent of the last sample period with a kernel running / memory busy */
    double sm_mhz, mem_mhz;
} ct_nvml_reading;

/* Opens CUDA device `index`'s counters; on failure *out is NULL and the error says why
 * ("libnvidia-ml.so.1 not found: no NVIDIA driver"). name: the GPU's name as NVML says it. */
ct_status ct_nvml_open(ct_nvml **out, int index, char *name, size_t cap);
void      ct_nvml_read(ct_nvml *g, ct_nvml_reading *r);
void      ct_nvml_close(ct_nvml *g);   /* NULL is ignored */

#endif
