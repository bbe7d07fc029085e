/* reduce.cuh - block-wide sum in double for ctrain's own kernels: a fixed
 * reduction order, so results are deterministic run to run. Include from .cu files. */
#ifndef CT_CUDA_REDUCE_CUH
#define CT_CUDA_REDUCE_CUH

/* Sum of v over the block (blockDim.x a power of two, sh[blockDim.x] shared
 * scratch). Every thread gets the result; sh may be reused after it returns. */
__device__ static inline double ct_block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

#endif
