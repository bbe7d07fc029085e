/* nvml.c - a GPU's counters through NVML, loaded at run time (cuda/nvml.h).
 *
 * libnvidia-ml.so.1 comes with the NVIDIA driver, not with the CUDA toolkit, so the build
 * neither includes nvml.h nor links the library: the few functions used are declared
 * below with the signatures of NVIDIA's NVML reference and found with dlsym. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/nvml.h"
#ifdef CT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

/* ---- NVML's types and functions, as its reference documents them ---- */
typedef int nvmlReturn_t;                  /* enum nvmlReturn_enum; NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;   /* percent */
enum { NVML_SUCCESS = 0 };
enum { NVML_TEMPERATURE_GPU = 0 };                                 /* nvmlTemperatureSensors_t */
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };   /* nvmlClockType_t */

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*shutdown_fn)(void);
typedef const char *(*error_string_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*by_index_fn)(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t (*by_uuid_fn)(const char *uuid, nvmlDevice_t *device);
typedef nvmlReturn_t (*name_fn)(nvmlDevice_t device, char *name, unsigned int length);
typedef nvmlReturn_t (*power_fn)(nvmlDevice_t device, unsigned int *milliwatts);
typedef nvmlReturn_t (*energy_fn)(nvmlDevice_t device, unsigned long long *millijoules);
typedef nvmlReturn_t (*temp_fn)(nvmlDevice_t device, int sensor, unsigned int *celsius);
typedef nvmlReturn_t (*util_fn)(nvmlDevice_t device, nvmlUtilization_t *utilization);
typedef nvmlReturn_t (*clock_fn)(nvmlDevice_t device, int type, unsigned int *mhz);

struct ct_nvml {
    void *lib;
    nvmlDevice_t dev;
    shutdown_fn Shutdown;
    power_fn GetPowerUsage;
    energy_fn GetTotalEnergyConsumption;
    temp_fn GetTemperature;
    util_fn GetUtilizationRates;
    clock_fn GetClockInfo;
};

/* dlsym's answer, or NULL with *missing naming the first function not found. */
static void *sym(void *lib, const char *name, const char **missing)
{
    void *p = dlsym(lib, name);
    if (!p && !*missing) *missing = name;
    return p;
}

/* NVML's UUID string of CUDA device `index` ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"); 0 when unknown. */
static int cuda_uuid(int index, char *buf, size_t cap)
{
#ifdef CT_HAVE_CUDA
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, index) != cudaSuccess) { cudaGetLastError(); return 0; }
    const unsigned char *b = (const unsigned char *)prop.uuid.bytes;
    snprintf(buf, cap, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
             b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    return 1;
#else
    (void)index; (void)buf; (void)cap;
    return 0;
#endif
}

ct_status ct_nvml_open(ct_nvml **out, int index, char *name, size_t cap)
{
    *out = NULL;
    if (cap) name[0] = 0;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return ct_fail(CT_ENODEV, "no GPU counters: libnvidia-ml.so.1 cannot be loaded (no NVIDIA driver here)");
    const char *missing = NULL;
    init_fn Init = (init_fn)sym(lib, "nvmlInit_v2", &missing);
    error_string_fn ErrorString = (error_string_fn)sym(lib, "nvmlErrorString", &missing);
    by_index_fn ByIndex = (by_index_fn)sym(lib, "nvmlDeviceGetHandleByIndex_v2", &missing);
    ct_nvml g = {
        .lib = lib,
        .Shutdown = (shutdown_fn)sym(lib, "nvmlShutdown", &missing),
        .GetPowerUsage = (power_fn)sym(lib, "nvmlDeviceGetPowerUsage", &missing),
        .GetTotalEnergyConsumption = (energy_fn)sym(lib, "nvmlDeviceGetTotalEnergyConsumption", &missing),
        .GetTemperature = (temp_fn)sym(lib, "nvmlDeviceGetTemperature", &missing),
        .GetUtilizationRates = (util_fn)sym(lib, "nvmlDeviceGetUtilizationRates", &missing),
        .GetClockInfo = (clock_fn)sym(lib, "nvmlDeviceGetClockInfo", &missing),
    };
    by_uuid_fn ByUuid = (by_uuid_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID");   /* optional: else by index */
    name_fn GetName = (name_fn)dlsym(lib, "nvmlDeviceGetName");
    if (missing) {
        dlclose(lib);
        return ct_fail(CT_ENODEV, "no GPU counters: libnvidia-ml.so.1 has no %s (a driver too old)", missing);
    }
    nvmlReturn_t e = Init();
    if (e != NVML_SUCCESS) {
        ct_status st = ct_fail(CT_ENODEV, "no GPU counters: nvmlInit: %s", ErrorString(e));
        dlclose(lib);
        return st;
    }
    char uuid[64];
    e = ByUuid && cuda_uuid(index, uuid, sizeof uuid) ? ByUuid(uuid, &g.dev) : ByIndex((unsigned)index, &g.dev);
    if (e != NVML_SUCCESS) {
        ct_status st = ct_fail(CT_ENODEV, "no GPU counters: NVML cannot find GPU %d: %s", index, ErrorString(e));
        g.Shutdown();
        dlclose(lib);
        return st;
    }
    if (GetName && cap) GetName(g.dev, name, (unsigned)cap);
    ct_nvml *p = malloc(sizeof *p);
    if (!p) { g.Shutdown(); dlclose(lib); return ct_fail(CT_ENOMEM, "out of memory opening NVML"); }
    *p = g;
    *out = p;
    return CT_OK;
}

void ct_nvml_read(ct_nvml *g, ct_nvml_reading *r)
{
    unsigned int u = 0;
    unsigned long long mj = 0;
    nvmlUtilization_t ut;
    r->power_w = g->GetPowerUsage(g->dev, &u) == NVML_SUCCESS ? u / 1000.0 : NAN;
    r->energy_mj = g->GetTotalEnergyConsumption(g->dev, &mj) == NVML_SUCCESS ? (double)mj : NAN;
    r->temp_c = g->GetTemperature(g->dev, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS ? (double)u : NAN;
    if (g->GetUtilizationRates(g->dev, &ut) == NVML_SUCCESS) { r->busy = ut.gpu; r->mem_busy = ut.memory; }
    else r->busy = r->mem_busy = NAN;
    r->sm_mhz = g->GetClockInfo(g->dev, NVML_CLOCK_SM, &u) == NVML_SUCCESS ? (double)u : NAN;
    r->mem_mhz = g->GetClockInfo(g->dev, NVML_CLOCK_MEM, &u) == NVML_SUCCESS ? (double)u : NAN;
}

void ct_nvml_close(ct_nvml *g)
{
    if (!g) return;
    g->Shutdown();
    dlclose(g->lib);
    free(g);
}
