/* hot.h - CT_HOT: run-time instruction-set dispatch for ctrain's own hot loops.
 *
 * The distributed build (`make dist`) is compiled for a portable x86-64 level
 * (x86-64-v2: SSE4.2, no AVX), because the machine it runs on may lack
 * instructions that the build machine's -march=native would emit. Placed before
 * the definition of a hot element-wise or transform loop (the LSTM cell, the
 * Winograd tile transforms, im2col, batchnorm, relu, max pooling, the
 * optimizer steps), CT_HOT makes GCC compile that function three times, for
 * x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the build's baseline, and
 * pick the best one the CPU supports when the program is loaded (an ifunc
 * resolved once; calls then cost what any call through a pointer costs).
 * OpenBLAS, which does the matrix products, dispatches at run time itself.
 *
 * Only the portable build (-DCT_PORTABLE) turns it on: a -march=native build
 * already compiles every loop for the machine it runs on, and is left exactly
 * as it was. Never put it on small inline helpers (a clone cannot be inlined);
 * put it on the function that holds the loop.
 */
#ifndef CT_HOT_H
#define CT_HOT_H

#if defined(CT_PORTABLE) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define CT_HOT __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define CT_HOT
#endif

#endif
