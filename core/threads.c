/* threads.c - thread count for OpenBLAS (see threads.h). */
#include <unistd.h>
#include <cblas.h>
#include "core/threads.h"
#include "core/error.h"

static int ct_nthreads = 1;

void ct_threads_set(int n)
{
    CT_ASSERT(n >= 1);
    ct_nthreads = n;
    openblas_set_num_threads(n);
}

int ct_threads_get(void) { return ct_nthreads; }

int ct_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

const char *ct_blas_config(void) { return openblas_get_config(); }
