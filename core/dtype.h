/* dtype.h - the data type a backend computes in (layers/ops.h: ct_math.dtype).
 *
 * Every buffer ctrain keeps today - parameters, gradients, optimizer state,
 * activations - is float32, and every layer computes in float32. The data type
 * is named here so that a backend and the plans it makes (the LSTM's, conv2d's)
 * carry it from the start:
 *
 *   CT_F32   float32: 1 sign, 8 exponent, 23 fraction bits. What every backend computes.
 *   CT_BF16  bfloat16: 1 sign, 8 exponent, 7 fraction bits - float32's range with
 *            2-3 significant digits. Computed as mixed precision (docs/precision.md)
 *            where the backend's check_dtype accepts it; elsewhere a backend or plan
 *            asked for it is refused with one line (ct_backend_check_dtype, layers/ops.h).
 *
 * Where bfloat16 plugs in (mixed precision: bf16 products, float32 parameters,
 * sums and optimizer state): a backend opened with math.dtype = CT_BF16 makes
 * its plans in bf16 - on the CPU with AMX tile kernels beside layers/gemm_packed.c,
 * on the GPU with cuDNN's CUDNN_DATA_BFLOAT16 descriptors (cuda/conv2d.cu,
 * cuda/lstm.cu) and cuBLAS's CUBLAS_COMPUTE_32F with bf16 inputs (cuda/dense.cu) - and
 * its check_dtype entry lets CT_BF16 through. Nothing above the backends changes.
 */
#ifndef CT_DTYPE_H
#define CT_DTYPE_H

typedef enum {
    CT_F32 = 0,    /* float32 (the default: a zeroed ct_math computes in it) */
    CT_BF16 = 1,   /* bfloat16 operands of the products, float32 sums (mixed precision) */
} ct_dtype;

/* "float32", "bfloat16", or "unknown" for a value outside the enum. */
const char *ct_dtype_name(ct_dtype t);

#endif
