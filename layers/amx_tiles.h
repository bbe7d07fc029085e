/* amx_tiles.h - the AMX tile instructions, and the seam that lets one kernel body run
 * either on the real tiles or on the C model of them (layers/gemm_bf16.h). Private to
 * the two files that write tile kernels: layers/gemm_bf16.c (the product) and
 * layers/lstm_bf16.c (the LSTM's fused forward step).
 *
 * A tile kernel is written ONCE as an always_inline function whose first two parameters
 * are `const int REAL` and `ct_tile_model *tm`, using only T_ZERO, T_LOAD, T_STORE and
 * T_DP below. It is then instantiated twice: inside a function compiled with
 * target("amx-tile,amx-bf16") that calls AMX_LDTILECFG first and AMX_TILERELEASE last,
 * with REAL = 1 (the instructions), and inside a plain function with REAL = 0 and a
 * configured model (ct_tile_model_config). With REAL a constant at each call site, each
 * instance keeps only its own branch; what is loaded from where, in what order and with
 * which tails is the same code in both, so the tests run the real kernel's logic on any
 * CPU through the model.
 *
 * The instructions are inline assembly (GNU syntax: sources first, the destination last);
 * a tile is named by its number, a literal. Inline assembly needs no compiler support for
 * AMX, only an assembler that knows the mnemonics (binutils 2.36+). */
#ifndef CT_AMX_TILES_H
#define CT_AMX_TILES_H
#include "layers/gemm_bf16.h"

#define AMX_LDTILECFG(cfg)              __asm__ volatile("ldtilecfg %0" ::"m"(*(const ct_tile_config *)(cfg)))
#define AMX_TILERELEASE()               __asm__ volatile("tilerelease" ::: "memory")
#define AMX_TILEZERO(t)                 __asm__ volatile("tilezero %%tmm" #t ::)
#define AMX_TILELOADD(t, base, stride)  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"((long)(stride)) : "memory")
#define AMX_TILESTORED(t, base, stride) __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"((long)(stride)) : "memory")
#define AMX_TDPBF16PS(c, a, b)          __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::)

/* The seam: REAL is a constant at each call site (1: the tiles, 0: the model tm). */
#define T_ZERO(t)                do { if (REAL) AMX_TILEZERO(t); else ct_tile_model_zero(tm, t); } while (0)
#define T_LOAD(t, base, stride)  do { if (REAL) AMX_TILELOADD(t, base, stride); else ct_tile_model_load(tm, t, base, stride); } while (0)
#define T_STORE(t, base, stride) do { if (REAL) AMX_TILESTORED(t, base, stride); else ct_tile_model_store(tm, t, base, stride); } while (0)
#define T_DP(c, a, b)            do { if (REAL) AMX_TDPBF16PS(c, a, b); else ct_tile_model_dpbf16ps(tm, c, a, b); } while (0)

/* Both kernels configure all eight tiles as 16 rows x 64 bytes (palette 1). */
static const ct_tile_config CT_TILES_16x64 = {
    .palette = 1, .colsb = { 64, 64, 64, 64, 64, 64, 64, 64 }, .rows = { 16, 16, 16, 16, 16, 16, 16, 16 } };

#endif
