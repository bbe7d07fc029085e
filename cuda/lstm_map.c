/* lstm_map.c - flat parameter buffer <-> cuDNN LSTM weight space (see lstm_map.h). */
#include <stdio.h>
#include <string.h>
#include "cuda/lstm_map.h"

size_t ct_lstm_wspace_loc_packed(lstm_wspace_loc *loc, int I, int H, int L)
{
    long long off = 0;
    for (int l = 0; l < L; l++) {
        long long Il = l ? H : I;
        for (int k = 0; k < 8; k++) {
            loc[l * 8 + k].m_n = (long long)H * (k < 4 ? Il : H);
            loc[l * 8 + k].m_off = off;
            off += loc[l * 8 + k].m_n;
        }
        for (int k = 0; k < 8; k++) {
            loc[l * 8 + k].b_n = H;
            loc[l * 8 + k].b_off = off;
            off += H;
        }
    }
    return (size_t)off;
}

/* ctrain's flat offsets of matrix and bias (l, k). */
static void flat_loc(size_t *m_flat, size_t *b_flat, const ct_params *ps, const lstm_ids *ids, int l, int k, int I, int H)
{
    size_t Il = l ? (size_t)H : (size_t)I, Hs = (size_t)H;
    if (k < 4) {
        *m_flat = ps->p[ids->w_ih[l]].offset + (size_t)k * Hs * Il;
        *b_flat = ps->p[ids->b_ih[l]].offset + (size_t)k * Hs;
    } else {
        *m_flat = ps->p[ids->w_hh[l]].offset + (size_t)(k - 4) * Hs * Hs;
        *b_flat = ps->p[ids->b_hh[l]].offset + (size_t)(k - 4) * Hs;
    }
}

static void add_seg(lstm_wspace_map *map, size_t ws, size_t flat, size_t n)
{
    if (map->nseg > 0) {
        lstm_wspace_seg *s = &map->seg[map->nseg - 1];
        if (s->wspace + s->n == ws && s->flat + s->n == flat) { s->n += n; return; }
    }
    CT_ASSERT(map->nseg < LSTM_WSPACE_MAX_SEGS);
    map->seg[map->nseg++] = (lstm_wspace_seg){ ws, flat, n };
}

/* The copy segments of every matrix and bias, in weight-space order (merged where contiguous). */
static void map_segments(lstm_wspace_map *map, const lstm_wspace_loc *loc, const ct_params *ps, const lstm_ids *ids, int I,
                         int H, int L)
{
    for (int l = 0; l < L; l++) {
        for (int k = 0; k < 8; k++) {
            size_t mf, bf;
            flat_loc(&mf, &bf, ps, ids, l, k, I, H);
            add_seg(map, (size_t)loc[l * 8 + k].m_off, mf, (size_t)loc[l * 8 + k].m_n);
        }
        for (int k = 0; k < 8; k++) {
            size_t mf, bf;
            flat_loc(&mf, &bf, ps, ids, l, k, I, H);
            add_seg(map, (size_t)loc[l * 8 + k].b_off, bf, (size_t)loc[l * 8 + k].b_n);
        }
    }
}

ct_status ct_lstm_wspace_map_make(lstm_wspace_map *map, const lstm_wspace_loc *loc, size_t wspace_floats,
                               const ct_params *ps, const lstm_ids *ids, int I, int H, int L)
{
    CT_ASSERT(L >= 1 && L <= LSTM_MAX_LAYERS && ids->L == L);
    memset(map, 0, sizeof *map);
    map->wspace_floats = wspace_floats;
    /* 1. cuDNN's table must describe an LSTM of these sizes inside the space, without overlaps */
    size_t used = 0;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 8; k++) {
            const lstm_wspace_loc *c = &loc[l * 8 + k];
            long long want_m = (long long)H * (k < 4 ? (l ? H : I) : H);
            if (c->m_n != want_m || c->b_n != H)
                return ct_fail(CT_EFORMAT, "cuDNN weight space: layer %d linLayerID %d holds a %lld-float matrix and a %lld-float bias; "
                               "an LSTM with input %d and hidden %d needs %lld and %d (unsupported cuDNN version?)",
                               l, k, c->m_n, c->b_n, I, H, want_m, H);
            if (c->m_off < 0 || c->b_off < 0 || (size_t)(c->m_off + c->m_n) > wspace_floats || (size_t)(c->b_off + c->b_n) > wspace_floats)
                return ct_fail(CT_EFORMAT, "cuDNN weight space: layer %d linLayerID %d lies outside the %zu-float space", l, k, wspace_floats);
            used += (size_t)c->m_n + (size_t)c->b_n;
        }
    for (int a = 0; a < 16 * L; a++)   /* regions: even = matrix, odd = bias */
        for (int b = a + 1; b < 16 * L; b++) {
            const lstm_wspace_loc *ca = &loc[a / 2], *cb = &loc[b / 2];
            long long oa = a & 1 ? ca->b_off : ca->m_off, na = a & 1 ? ca->b_n : ca->m_n;
            long long ob = b & 1 ? cb->b_off : cb->m_off, nb = b & 1 ? cb->b_n : cb->m_n;
            if (oa < ob + nb && ob < oa + na)
                return ct_fail(CT_EFORMAT, "cuDNN weight space: regions of layers %d and %d overlap", a / 16, b / 16);
        }
    /* 2. direct: one base with flat == base + cuDNN offset for every region, and the
     *    space (gaps included) inside the flat buffer */
    size_t m00, b00;
    flat_loc(&m00, &b00, ps, ids, 0, 0, I, H);
    int direct = (size_t)loc[0].m_off <= m00;
    size_t base = direct ? m00 - (size_t)loc[0].m_off : 0;
    if (!direct)
        snprintf(map->why, sizeof map->why, "layer 0 gate matrix 0 is at weight-space float %lld, past ctrain's view at %zu",
                 loc[0].m_off, m00);
    for (int l = 0; l < L && direct; l++)
        for (int k = 0; k < 8 && direct; k++) {
            size_t mf, bf;
            flat_loc(&mf, &bf, ps, ids, l, k, I, H);
            const lstm_wspace_loc *c = &loc[l * 8 + k];
            if (base + (size_t)c->m_off != mf) {
                snprintf(map->why, sizeof map->why, "layer %d gate matrix %d is at weight-space float %lld, ctrain's view at %zu",
                         l, k, c->m_off, mf - base);
                direct = 0;
            } else if (base + (size_t)c->b_off != bf) {
                snprintf(map->why, sizeof map->why, "layer %d gate bias %d is at weight-space float %lld, ctrain's view at %zu",
                         l, k, c->b_off, bf - base);
                direct = 0;
            }
        }
    if (direct && used != wspace_floats) {   /* cuDNN's space has gaps: its gradient pass might write into them */
        snprintf(map->why, sizeof map->why, "cuDNN's %zu-float weight space holds %zu floats of weights (it has gaps)",
                 wspace_floats, used);
        direct = 0;
    }
    if (direct && base + wspace_floats > ps->numel) {
        snprintf(map->why, sizeof map->why, "the %zu-float weight space would run past the end of the parameter buffer", wspace_floats);
        direct = 0;
    }
    if (direct && base % 4 != 0) {   /* keep cuDNN's pointer 16-byte aligned */
        snprintf(map->why, sizeof map->why, "the weight space would start at float %zu, not 16-byte aligned", base);
        direct = 0;
    }
    if (direct) {
        map->direct = 1;
        map->base = base;
        return CT_OK;
    }
    /* 3. fallback: copy segments in weight-space order */
    map_segments(map, loc, ps, ids, I, H, L);
    return CT_OK;
}

ct_status ct_lstm_wspace_map_make_packed(lstm_wspace_map *map, const lstm_wspace_loc *loc, size_t wspace_elems,
                                         const ct_params *ps, const lstm_ids *ids, int I, int H, int L)
{
    CT_TRY(ct_lstm_wspace_map_make(map, loc, wspace_elems, ps, ids, I, H, L));
    if (!map->direct) return CT_OK;
    map->direct = 0;
    map->base = 0;
    snprintf(map->why, sizeof map->why, "the weight space is in another data type than the float32 parameters");
    map_segments(map, loc, ps, ids, I, H, L);
    return CT_OK;
}

void ct_lstm_wspace_pack(float *wspace, const float *flat, const lstm_wspace_map *map)
{
    for (int s = 0; s < map->nseg; s++)
        memcpy(wspace + map->seg[s].wspace, flat + map->seg[s].flat, map->seg[s].n * sizeof(float));
}

void ct_lstm_wspace_unpack_add(float *flat, const float *wspace, const lstm_wspace_map *map)
{
    for (int s = 0; s < map->nseg; s++) {
        const lstm_wspace_seg *g = &map->seg[s];
        for (size_t i = 0; i < g->n; i++) flat[g->flat + i] += wspace[g->wspace + i];
    }
}

ct_status ct_lstm_gpu_dims_check(const lstm_dims *d)
{
    if (d->B < 1 || d->T < 1 || d->I < 1 || d->H < 1)
        return ct_fail(CT_EINVAL, "GPU LSTM: batch %d, steps %d, input %d and hidden %d must all be at least 1", d->B, d->T, d->I, d->H);
    if (d->L < 1 || d->L > LSTM_MAX_LAYERS)
        return ct_fail(CT_EINVAL, "GPU LSTM: %d layers; use 1 to %d", d->L, LSTM_MAX_LAYERS);
    if (d->recur != LSTM_SIGMOID)
        return ct_fail(CT_EINVAL, "GPU LSTM: cuDNN's LSTM has only the sigmoid recurrent activation, not hard_sigmoid; "
                       "use --recurrent sigmoid, or --device cpu for hard_sigmoid");
    if (d->ret != LSTM_RETURN_LAST && d->ret != LSTM_RETURN_SEQUENCE && d->ret != LSTM_RETURN_MEAN)
        return ct_fail(CT_EINVAL, "GPU LSTM: unknown output mode %d", (int)d->ret);
    return CT_OK;
}
