/* hd.h - CT_HD marks a function compiled for both sides: the host (C, and the tests' C++) and,
 * under nvcc, the GPU (__host__ __device__). For the small inline functions that the kernels
 * and their C models share, so that both run the same code (cuda/counter_rng.h, cuda/lstm_rec.h). */
#ifndef CT_CUDA_HD_H
#define CT_CUDA_HD_H
#ifdef __CUDACC__
#define CT_HD __host__ __device__
#else
#define CT_HD
#endif
#endif
