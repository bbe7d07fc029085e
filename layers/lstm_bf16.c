/* lstm_bf16.c - one LSTM forward step in bf16 on AMX tiles, the cell applied block by
 * block (see lstm_bf16.h): packing, the kernel written once over the tile operations
 * (layers/amx_tiles.h), and its two instances, the tiles and their C model. */
#include <string.h>
#include "layers/lstm_bf16.h"
#include "layers/amx_tiles.h"
#include "layers/gemm_packed.h"
#include "core/bf16.h"
#include "core/error.h"

#define UB CT_LSTM_BF16_UNITS
#define KB CT_BF16_KB
#define NB CT_BF16_NB

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

int ct_lstm_bf16_fused_ok(int H)
{
    const ct_bf16_kernels k = ct_kernels_bf16();
    return H > 0 && H % UB == 0 && (k == CT_BF16_AMX || k == CT_BF16_MODEL);
}

size_t ct_lstm_bf16_pack_elems(int Il, int H) { return (size_t)4 * H * (size_t)round_up(Il + H, KB); }
size_t ct_lstm_bf16_work_elems(int rows, int Il, int H) { return (size_t)round_up(rows, 16) * (size_t)round_up(Il + H, KB); }

/* [H/16][4][Kp/2][16][2]: element (u, q, p, j, h) = bf16(W[q H + 16u + j][2p + h]), W = [W_ih | W_hh].
 * Row n of W is rounded whole (ct_bf16s_from_floats), then its pairs go down its panel's
 * column, one 32-bit pair per tile row. */
void ct_lstm_bf16_pack(uint16_t *wp, const float *w_ih, const float *w_hh, int Il, int H)
{
    CT_ASSERT(H % UB == 0);
    const int K = Il + H, Kp = round_up(K, KB);
    const size_t panel = (size_t)(Kp / 2) * NB * 2;   /* elements of one gate's panel */
    uint16_t row[2 * KB];                             /* a chunk of row n, rounded */
    for (size_t n = 0; n < 4 * (size_t)H; n++) {
        const size_t q = n / (size_t)H, u = n % (size_t)H / UB, j = n % UB;
        uint16_t *col = wp + (u * 4 + q) * panel + 2 * j;   /* pair-row 0 of this column */
        for (int k0 = 0; k0 < Kp; k0 += 2 * KB) {           /* 64 k at a time: [x part | h part | zeros] */
            const int ke = Kp - k0 < 2 * KB ? Kp : k0 + 2 * KB;
            int a = k0, b = ke < Il ? ke : Il;
            if (a < b) ct_bf16s_from_floats(row, w_ih + n * Il + a, (size_t)(b - a));
            a = k0 > Il ? k0 : Il; b = ke < K ? ke : K;
            if (a < b) ct_bf16s_from_floats(row + (a - k0), w_hh + n * H + (a - Il), (size_t)(b - a));
            a = k0 > K ? k0 : K;
            if (a < ke) memset(row + (a - k0), 0, (size_t)(ke - a) * sizeof *row);
            for (int p = 0; p < (ke - k0) / 2; p++) memcpy(col + (size_t)(k0 / 2 + p) * NB * 2, row + 2 * p, 2 * sizeof *row);
        }
    }
}

/* The rows [x | hprev] rounded into work [Mp][Kp]; zeros past Il + H and past `rows`. */
static void pack_rows(uint16_t *work, int rows, int Il, int H, const float *x, const float *hprev)
{
    const int Kp = round_up(Il + H, KB), Mp = round_up(rows, 16);
    for (int m = 0; m < Mp; m++) {
        uint16_t *row = work + (size_t)m * Kp;
        if (m >= rows) { memset(row, 0, (size_t)Kp * sizeof *row); continue; }
        ct_bf16s_from_floats(row, x + (size_t)m * Il, (size_t)Il);
        if (hprev) ct_bf16s_from_floats(row + Il, hprev + (size_t)m * H, (size_t)H);
        else       memset(row + Il, 0, (size_t)H * sizeof *row);
        memset(row + Il + H, 0, (size_t)(Kp - Il - H) * sizeof *row);
    }
}

/* One block, on the tiles: z of rows r0 .. r0+15 (the first nr of them exist) for the four
 * gates of units 16u .. 16u+15. The gates' tiles zeroed, the k-blocks summed in order, the
 * tiles stored into z (through `edge` when the block has fewer than 16 rows). */
static inline __attribute__((always_inline))
void tile_block(const int REAL, ct_tile_model *tm, int u, int r0, int nr, int H, int Kp, const uint16_t *ap, const uint16_t *wp,
                float *z, int ldz, int z_block, float (*edge)[4 * UB])
{
    const size_t astride = (size_t)Kp * 2, zstride = (size_t)ldz * 4;   /* bytes from row to row */
    const size_t panel = (size_t)(Kp / 2) * NB * 2;                     /* elements of one gate's packed panel */
    const uint16_t *bi = wp + (size_t)4 * u * panel, *bf = bi + panel, *bg = bf + panel, *bo = bg + panel;
    const uint16_t *a = ap + (size_t)r0 * Kp;
    T_ZERO(0); T_ZERO(1); T_ZERO(2); T_ZERO(3);
    for (int kb = 0; kb < Kp / KB; kb++) {
        const size_t k = (size_t)kb * (KB / 2) * NB * 2;   /* pair-row 16 kb of a panel */
        T_LOAD(4, a + (size_t)kb * KB, astride);           /* rows r0 .. r0+15, k 32 kb .. 32 kb + 31 */
        T_LOAD(5, bi + k, 64);
        T_LOAD(6, bf + k, 64);
        T_LOAD(7, bg + k, 64);
        T_DP(0, 4, 5); T_DP(1, 4, 6); T_DP(2, 4, 7);
        T_LOAD(5, bo + k, 64);
        T_DP(3, 4, 5);
    }
    float *zb = z + (size_t)(z_block ? 0 : r0) * ldz + (size_t)u * UB;   /* gate q of the block at zb + q H */
    if (nr == 16) {
        T_STORE(0, zb, zstride);         T_STORE(1, zb + H, zstride);
        T_STORE(2, zb + 2 * H, zstride); T_STORE(3, zb + 3 * H, zstride);
    } else {
        T_STORE(0, &edge[0][0], sizeof edge[0]);      T_STORE(1, &edge[0][UB], sizeof edge[0]);
        T_STORE(2, &edge[0][2 * UB], sizeof edge[0]); T_STORE(3, &edge[0][3 * UB], sizeof edge[0]);
        for (int r = 0; r < nr; r++)
            for (int q = 0; q < 4; q++) memcpy(zb + (size_t)r * ldz + (size_t)q * H, &edge[r][q * UB], UB * sizeof(float));
    }
}

/* Two blocks of 16 rows at once, rows r0 .. r0+31 (all of them exist), units 16u .. 16u+15:
 * two passes over k, gates (i, f) and then (g, o). C tiles 0-3 hold (rows r0.., gate a),
 * (rows r0.., gate b), (rows r0+16.., a), (rows r0+16.., b); A tiles 4 and 5 the two row
 * blocks, B tiles 6 and 7 the two gates' panels. Each B tile loaded serves two products, where
 * tile_block's serves one: half the weights read from L2 per row. Every tile is zeroed and
 * summed over the k-blocks in order, as in tile_block: the same z, bit for bit. */
static inline __attribute__((always_inline))
void tile_block32(const int REAL, ct_tile_model *tm, int u, int r0, int H, int Kp, const uint16_t *ap, const uint16_t *wp,
                  float *z, int ldz, int z_block)
{
    const size_t astride = (size_t)Kp * 2, zstride = (size_t)ldz * 4;
    const size_t panel = (size_t)(Kp / 2) * NB * 2;
    const uint16_t *a0 = ap + (size_t)r0 * Kp, *a1 = a0 + (size_t)16 * Kp;
    float *zb = z + (size_t)(z_block ? 0 : r0) * ldz + (size_t)u * UB;
    for (int pass = 0; pass < 2; pass++) {
        const uint16_t *ba = wp + ((size_t)4 * u + 2 * (size_t)pass) * panel, *bb = ba + panel;
        T_ZERO(0); T_ZERO(1); T_ZERO(2); T_ZERO(3);
        for (int kb = 0; kb < Kp / KB; kb++) {
            const size_t k = (size_t)kb * (KB / 2) * NB * 2;
            T_LOAD(4, a0 + (size_t)kb * KB, astride);
            T_LOAD(5, a1 + (size_t)kb * KB, astride);
            T_LOAD(6, ba + k, 64);
            T_LOAD(7, bb + k, 64);
            T_DP(0, 4, 6); T_DP(1, 4, 7); T_DP(2, 5, 6); T_DP(3, 5, 7);
        }
        float *zq = zb + (size_t)2 * pass * H, *zq16 = zq + (size_t)16 * ldz;
        T_STORE(0, zq, zstride);   T_STORE(1, zq + H, zstride);
        T_STORE(2, zq16, zstride); T_STORE(3, zq16 + H, zstride);
    }
}

/* The kernel, once, in either order (lstm_bf16.h, "Order"): unit blocks outside, each
 * block's cell as soon as it is stored; or 16 rows outside, their cell once every unit
 * block of them is stored. */
static inline __attribute__((always_inline))
void lstm_tiles(const int REAL, ct_tile_model *tm, ct_lstm_tile_order order, int rows, int H, int Kp, const uint16_t *ap,
                const uint16_t *wp, float *z, int ldz, int z_block, ct_lstm_cell_block cell, void *ctx)
{
    float edge[16][4 * UB];   /* a short block's four tiles, side by side */
    if (order == CT_LSTM_TILES_UNITS_OUTER) {
        for (int u = 0; u < H / UB; u++)
            for (int r0 = 0; r0 < rows; r0 += 16) {
                const int nr = rows - r0 < 16 ? rows - r0 : 16;
                tile_block(REAL, tm, u, r0, nr, H, Kp, ap, wp, z, ldz, z_block, edge);
                cell(ctx, r0, nr, u * UB, UB);
            }
    } else {
        for (int r0 = 0; r0 < rows;) {
            if (rows - r0 >= 32) {   /* 32 whole rows: two row blocks at once */
                for (int u = 0; u < H / UB; u++) tile_block32(REAL, tm, u, r0, H, Kp, ap, wp, z, ldz, z_block);
                cell(ctx, r0, 32, 0, H);
                r0 += 32;
                continue;
            }
            const int nr = rows - r0 < 16 ? rows - r0 : 16;
            for (int u = 0; u < H / UB; u++) tile_block(REAL, tm, u, r0, nr, H, Kp, ap, wp, z, ldz, z_block, edge);
            cell(ctx, r0, nr, 0, H);
            r0 += 16;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
static __attribute__((target("amx-tile,amx-bf16"), noinline))
void lstm_amx(ct_lstm_tile_order order, int rows, int H, int Kp, const uint16_t *ap, const uint16_t *wp, float *z, int ldz,
              int z_block, ct_lstm_cell_block cell, void *ctx)
{
    AMX_LDTILECFG(&CT_TILES_16x64);
    lstm_tiles(1, NULL, order, rows, H, Kp, ap, wp, z, ldz, z_block, cell, ctx);
    AMX_TILERELEASE();
}
#endif

static __attribute__((noinline))
void lstm_model(ct_lstm_tile_order order, int rows, int H, int Kp, const uint16_t *ap, const uint16_t *wp, float *z, int ldz,
                int z_block, ct_lstm_cell_block cell, void *ctx)
{
    ct_tile_model tm;
    CT_ASSERT(ct_tile_model_config(&tm, &CT_TILES_16x64) == CT_OK);
    lstm_tiles(0, &tm, order, rows, H, Kp, ap, wp, z, ldz, z_block, cell, ctx);
}

void ct_lstm_bf16_step(ct_bf16_kernels which, ct_lstm_tile_order order, int rows, int Il, int H, const float *x,
                       const float *hprev, const uint16_t *wp, uint16_t *work, float *z, int ldz, int z_block,
                       ct_lstm_cell_block cell, void *ctx)
{
    CT_ASSERT(H % UB == 0 && Il >= 1 && ldz >= 4 * H && wp && work && z && cell);
    if (rows < 1) return;
    const int Kp = round_up(Il + H, KB);
    pack_rows(work, rows, Il, H, x, hprev);
    switch (which) {
    case CT_BF16_MODEL: lstm_model(order, rows, H, Kp, work, wp, z, ldz, z_block, cell, ctx); return;
#if defined(__x86_64__) && defined(__GNUC__)
    case CT_BF16_AMX:
        CT_ASSERT(ct_kernels_cpu_all() >= CT_KERNELS_AMX);
        lstm_amx(order, rows, H, Kp, work, wp, z, ldz, z_block, cell, ctx);
        return;
#endif
    default: CT_ASSERT(!"the tiles or their model (ct_lstm_bf16_fused_ok)");
    }
}
