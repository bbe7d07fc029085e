/* threads.h - one knob for parallelism: `--threads N`.
 *
 * ctrain's parallel work is OpenBLAS's: every matrix product goes through
 * cblas_sgemm, and ct_threads_set(n) sets OpenBLAS's thread count. ctrain's own
 * loops (elementwise gates, im2col, pooling) are single-threaded, so there are
 * never two thread pools spinning against each other on the same cores.
 */
#ifndef CT_THREADS_H
#define CT_THREADS_H

void ct_threads_set(int n);      /* n >= 1 */
int  ct_threads_get(void);
int  ct_cpu_count(void);         /* online processors */
const char *ct_blas_config(void);   /* OpenBLAS's own description of its build */

#endif
