/* speaker_task.c - pairs, crops and background batch loading for a siamese
 * speaker model (see speaker_task.h). */
#include <stdlib.h>
#include <string.h>
#include "train/speaker_task.h"
#include "train/verify.h"
#include "train/checkpoint.h"
#include "train/dist.h"
#include "io/h5.h"
#include "core/threads.h"

/* The first of the epochs' pair streams (epoch e: this + e); far from the other streams' numbers. */
#define PAIRS_STREAM_BASE (0x9a125ULL << 32)

/* Fill slot `slot` with batch [first, first+n) of `split`. Runs on the loader thread;
 * a read error is kept with the slot (its message too: messages are per thread) for
 * load() to return on the training thread. */
static void fill(void *ctx, int slot, int split, long first, int n)
{
    speaker_task *s = ctx;
    ct_rng *crop = &s->crop;
    if (split == CT_SPLIT_VAL) {
        /* validation sees the same crops every epoch, so its numbers are comparable */
        if (first == 0) ct_rng_seed(&s->val_crop, s->cfg.seed, 0xc409ULL);
        crop = &s->val_crop;
    } else {
        s->crop_before[slot] = *crop;   /* for a checkpoint taken before this batch trains */
    }
    for (int k = 0; k < n; k++)
        s->batch_pairs[slot][k] = split == CT_SPLIT_TRAIN ? s->pairs[0][s->order[first + k]] : s->pairs[1][first + k];
    int lo, hi;
    ct_dist_part(s->cfg.dist, n, &lo, &hi);   /* this rank's pairs; every pair's crops are drawn */
    s->fill_status[slot] = ct_pairs_batch_pool(s->x[slot], s->len[slot], s->y[slot], s->batch_pairs[slot], n, lo, hi, s->c,
                                               s->m.frames, crop, s->readers, s->n_readers);
    if (s->fill_status[slot] != CT_OK) snprintf(s->fill_error[slot], sizeof s->fill_error[slot], "%s", ct_last_error());
    s->part_first[slot] = lo;
    s->part_rows[slot] = n;
}

/* Wait for every outstanding fill and free both slots. */
static void drain(speaker_task *s)
{
    if (s->cur >= 0 && s->ring) s->m.be->ops->ring_wait(s->m.be, s->ring, s->block[s->cur]);   /* its copy to the device has left it */
    for (int k = 0; k < 2; k++)
        if (ct_prefetch_busy(&s->pf, k)) { ct_prefetch_wait(&s->pf, k); ct_prefetch_release(&s->pf, k); }
    s->cur = -1;
}

/* The stream of epoch e's training pairs: one PCG stream per epoch from the run's seed, a
 * function of (seed, epoch) alone. A stream per epoch, not seed + epoch as the seed: that
 * would give seed 1's second epoch the pairs of seed 2's first. */
static ct_rng epoch_pairs_stream(uint64_t seed, int epoch)
{
    ct_rng r;
    ct_rng_seed(&r, seed, PAIRS_STREAM_BASE + (uint64_t)epoch);
    return r;
}

/* Epoch e's training pairs into out [pairs]. */
static void draw_epoch_pairs(const speaker_task *s, ct_pair *out, int epoch)
{
    ct_rng r = epoch_pairs_stream(s->cfg.seed, epoch);
    ct_pairs_sample(out, (int)s->cfg.pairs, &s->sampler, &r);
}

static void begin_epoch(void *ctx, int epoch)
{
    speaker_task *s = ctx;
    drain(s);   /* nothing may read the pairs or the order while they change */
    if (s->cfg.fixed_pairs) {
        ct_rng_shuffle_int(&s->data, s->order, (int)s->cfg.pairs);
        return;
    }
    if (epoch != s->pairs_epoch) draw_epoch_pairs(s, s->pairs[0], epoch);   /* drawn in order: already shuffled */
    s->pairs_epoch = epoch;
}

static ct_status load(void *ctx, int split, long first, int n)
{
    speaker_task *s = ctx;
    if (s->cur >= 0) {   /* the previous batch is done, once its copy to the device has left the block */
        s->m.be->ops->ring_wait(s->m.be, s->ring, s->block[s->cur]);
        ct_prefetch_release(&s->pf, s->cur);
        s->cur = -1;
    }
    int slot = ct_prefetch_find(&s->pf, split, first, n);
    if (slot < 0) {               /* not prefetched (first batch of a pass): drop stale work, ask now */
        drain(s);
        slot = 0;
        ct_prefetch_request(&s->pf, slot, split, first, n);
    }
    long total = split == CT_SPLIT_TRAIN ? s->cfg.pairs : s->cfg.val_pairs, next = first + n;
    if (next < total && !ct_prefetch_busy(&s->pf, 1 - slot)) {   /* start on the next batch while this one trains */
        int nn = (int)(total - next < s->cfg.batch ? total - next : s->cfg.batch);
        ct_prefetch_request(&s->pf, 1 - slot, split, next, nn);
    }
    ct_prefetch_wait(&s->pf, slot);
    s->cur = slot;
    if (s->fill_status[slot] != CT_OK) return ct_fail(s->fill_status[slot], "%s", s->fill_error[slot]);
    /* the batch to the model's device: one copy of the whole block */
    const float *dev = s->m.be->ops->ring_put(s->m.be, s->ring, s->block[slot], s->block_bytes);
    s->dev_x = dev;
    s->dev_y = dev + s->y_off;
    s->dev_len = (const int *)(dev + s->len_off);
    return CT_OK;
}

static float forward(void *ctx, int n, int train, int *correct)
{
    speaker_task *s = ctx;
    if (s->m.set_part) s->m.set_part(s->m.ctx, s->part_first[s->cur], s->part_rows[s->cur]);   /* dropout as in the whole batch */
    return s->m.forward(s->m.ctx, s->dev_x, s->dev_len, s->len[s->cur], s->dev_y, n, train, &s->dropout, correct);
}

static void backward(void *ctx, int n)
{
    speaker_task *s = ctx;
    s->m.backward(s->m.ctx, s->dev_x, s->dev_len, s->len[s->cur], s->dev_y, n);
}

ct_status ct_speaker_task_init(speaker_task *s, const speaker_task_config *cfg, const ct_corpus *c, const speaker_model *m,
                            const ct_rngs *rngs, FILE *warn)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->m = *m;
    s->c = c;
    s->cur = -1;
    s->pairs_epoch = 0;
    s->data = rngs->data;
    s->dropout = rngs->dropout;
    ct_rng_seed(&s->crop, cfg->seed, 0xc40bULL);
    ct_rng_seed(&s->val_crop, cfg->seed, 0xc409ULL);   /* reseeded before each validation pass; seeded here so a checkpoint always holds a valid state */
    if (cfg->pairs < 1 || cfg->batch < 1) return ct_fail(CT_EINVAL, "need at least 1 training pair and a batch of at least 1");
    if (c->n_mels != m->n_mels)
        return ct_fail(CT_EINVAL, "the data has %d features per frame but the model expects %d (--mels)", c->n_mels, m->n_mels);

    /* which utterances and speakers each split may use */
    int S = c->n_speakers, *spk_tr = ct_malloc((size_t)S * sizeof(int), "speakers"), *spk_va = ct_malloc((size_t)S * sizeof(int), "speakers");
    unsigned char *val_utt = NULL, *tr_utt = NULL;
    ct_status st = spk_tr && spk_va ? CT_OK : CT_ENOMEM;
    int ntr = 0, nva = 0;
    if (st == CT_OK && cfg->val_split == CT_VAL_SPEAKERS && cfg->val_speakers) {
        unsigned char *held = ct_calloc((size_t)S, 1, "speaker split");
        if (!held) st = CT_ENOMEM;
        for (int k = 0; st == CT_OK && k < cfg->n_val_speakers; k++) {
            CT_ASSERT(cfg->val_speakers[k] >= 0 && cfg->val_speakers[k] < S);
            held[cfg->val_speakers[k]] = 1;
        }
        for (int k = 0; st == CT_OK && k < S; k++) { if (held[k]) spk_va[nva++] = k; else spk_tr[ntr++] = k; }
        free(held);
    } else if (st == CT_OK && cfg->val_split == CT_VAL_SPEAKERS) {   /* the speakers left after exclusion, split */
        int n = 0;
        for (int k = 0; k < S; k++) if (!cfg->excluded || !cfg->excluded[k]) spk_va[n++] = k;
        st = ct_speakers_split(spk_tr, &ntr, spk_va, &nva, spk_va, n, cfg->val_fraction, &s->data);
    } else if (st == CT_OK) {
        val_utt = ct_malloc((size_t)c->n_utt, "video split");
        tr_utt = ct_malloc((size_t)c->n_utt, "video split");
        st = val_utt && tr_utt ? ct_corpus_split_videos(val_utt, c, &s->data) : CT_ENOMEM;
        for (int u = 0; st == CT_OK && u < c->n_utt; u++) tr_utt[u] = !val_utt[u];
        for (int k = 0; k < S; k++) spk_tr[k] = spk_va[k] = k;
        ntr = nva = S;
    }
    if (st == CT_OK && cfg->excluded) {   /* a test list's speakers: in neither split */
        int kept = 0;
        for (int k = 0; k < ntr; k++) if (!cfg->excluded[spk_tr[k]]) spk_tr[kept++] = spk_tr[k];
        ntr = kept;
        kept = 0;
        for (int k = 0; k < nva; k++) if (!cfg->excluded[spk_va[k]]) spk_va[kept++] = spk_va[k];
        nva = kept;
    }
    if (st == CT_OK) {
        ct_usable_speakers(spk_tr, &ntr, c, tr_utt, warn);
        ct_usable_speakers(spk_va, &nva, c, val_utt, warn);
        s->n_train_speakers = ntr;
        s->n_val_speakers = nva;
        if (ntr < 2) st = ct_fail(CT_EINVAL, "only %d training speaker(s) with 2 or more utterances; need at least 2", ntr);
        else if (cfg->val_pairs > 0 && nva < 2)
            st = ct_fail(CT_EINVAL, "only %d validation speaker(s) with 2 or more utterances; need at least 2 "
                         "(use more speakers, or --val-pairs 0)", nva);
    }
    size_t row = (size_t)m->frames * m->n_mels;
    if (st == CT_OK) {
        s->pairs[0] = ct_malloc((size_t)cfg->pairs * sizeof(ct_pair), "pairs");
        s->pairs[1] = ct_malloc((size_t)(cfg->val_pairs + 1) * sizeof(ct_pair), "pairs");
        s->order = ct_malloc((size_t)cfg->pairs * sizeof(int), "pairs");
        /* one block per slot: x [2B, T, I] | y [B] | len [2B], each part on a 16-float boundary */
        size_t B = (size_t)cfg->batch;
        s->y_off = (2 * B * row + 15) / 16 * 16;
        s->len_off = s->y_off + (B + 15) / 16 * 16;
        s->block_bytes = (s->len_off + 2 * B) * sizeof(float);
        for (int k = 0; k < 2; k++) {
            s->batch_pairs[k] = ct_malloc(B * sizeof(ct_pair), "batch");
            /* pinned on the GPU: the batch goes to the device from where the prefetch built it */
            if (m->be->ops->host_alloc(m->be, (void **)&s->block[k], s->block_bytes, "batch") != CT_OK) s->block[k] = NULL;
            if (!s->batch_pairs[k] || !s->block[k]) { st = CT_ENOMEM; continue; }
            s->x[k] = s->block[k];
            s->y[k] = s->block[k] + s->y_off;
            s->len[k] = (int *)(s->block[k] + s->len_off);
        }
        if (!s->pairs[0] || !s->pairs[1] || !s->order) st = CT_ENOMEM;
    }
    if (st == CT_OK) st = ct_pair_sampler_init(&s->sampler, c, tr_utt, spk_tr, ntr);
    if (st == CT_OK && c->speaker_name) {
        s->train_names = ct_malloc((size_t)ntr * sizeof *s->train_names, "speaker names");
        if (!s->train_names) st = CT_ENOMEM;
        for (int k = 0; st == CT_OK && k < ntr; k++) s->train_names[k] = c->speaker_name[spk_tr[k]];
    }
    if (st == CT_OK && cfg->fixed_pairs) ct_pairs_sample(s->pairs[0], (int)cfg->pairs, &s->sampler, &s->data);
    if (st == CT_OK && cfg->val_pairs > 0) st = ct_pairs_draw(s->pairs[1], (int)cfg->val_pairs, c, val_utt, spk_va, nva, &s->data);
    if (st == CT_OK && !cfg->fixed_pairs) draw_epoch_pairs(s, s->pairs[0], 0);   /* a valid state before the first epoch begins */
    for (long i = 0; st == CT_OK && i < cfg->pairs; i++) s->order[i] = (int)i;
    free(spk_tr); free(spk_va); free(val_utt); free(tr_utt);
    if (st == CT_OK) st = m->be->ops->ring_create(m->be, &s->ring, s->block_bytes);
    s->n_readers = 1;
    if (st == CT_OK && c->source && cfg->readers > 1) {   /* a streamed store: helpers for the loader thread */
        int cores = ct_cpu_count();
        s->n_readers = cfg->readers < cores ? cfg->readers : cores;
        if (s->n_readers > 1 && !(s->readers = ct_workers_new())) s->n_readers = 1;   /* out of memory: the loader alone, the same batches */
    }
    if (st == CT_OK) st = ct_prefetch_start(&s->pf, fill, s);
    s->state = ct_train_state_of(m->params, m->buffers);
    if (st != CT_OK) ct_speaker_task_free(s);
    return st;
}

/* ---- exact resume ---- */
static ct_status write_pairs(hid_t f, const char *name, const ct_pair *p, long n)
{
    int *ab = ct_malloc(2 * (size_t)n * sizeof(int) + 1, "pairs");
    if (!ab) return CT_ENOMEM;
    for (long i = 0; i < n; i++) { ab[2 * i] = p[i].a; ab[2 * i + 1] = p[i].b; }
    size_t dims[2] = { (size_t)n, 2 };
    ct_status st = ct_ckpt_write_i32(f, name, ab, 2, dims);
    free(ab);
    return st;
}

static ct_status check_pairs(hid_t f, const char *name, const ct_pair *p, long n)
{
    int *ab = ct_malloc(2 * (size_t)n * sizeof(int) + 1, "pairs");
    if (!ab) return CT_ENOMEM;
    ct_status st = ct_ckpt_read_i32(f, name, ab, 2 * (size_t)n);
    if (st != CT_OK) st = ct_fail(st, "%s (was the checkpoint made with other --pairs/--val-pairs?)", ct_last_error());
    for (long i = 0; st == CT_OK && i < n; i++)
        if (ab[2 * i] != p[i].a || ab[2 * i + 1] != p[i].b)
            st = ct_fail(CT_EINVAL, "/%s: pair %ld differs from the one drawn now: resume with the data and --seed the run started with", name, i);
    free(ab);
    return st;
}

static ct_status save_state(void *ctx, hid_t f)
{
    speaker_task *s = ctx;
    ct_rng crop = s->crop;
    /* a training batch already prepared ahead has drawn its crops: save the stream as it was before */
    for (int k = 0; k < 2; k++) {
        if (k == s->cur || !ct_prefetch_busy(&s->pf, k) || s->pf.slot[k].split != CT_SPLIT_TRAIN) continue;
        ct_prefetch_wait(&s->pf, k);
        crop = s->crop_before[k];
    }
    size_t n = (size_t)s->cfg.pairs;
    CT_TRY(ct_ckpt_write_rng(f, "data", &s->data));
    CT_TRY(ct_ckpt_write_rng(f, "crop", &crop));
    CT_TRY(ct_ckpt_write_rng(f, "val_crop", &s->val_crop));
    CT_TRY(ct_ckpt_write_rng(f, "dropout", &s->dropout));
    CT_TRY(ct_ckpt_write_i32(f, "data/order", s->order, 1, &n));
    CT_TRY(write_pairs(f, "data/pairs", s->pairs[0], s->cfg.pairs));
    size_t one = 1;
    if (!s->cfg.fixed_pairs) CT_TRY(ct_ckpt_write_i32(f, "data/pairs_epoch", &s->pairs_epoch, 1, &one));
    if (s->train_names) CT_TRY(ct_h5_write_names(f, "train_speakers", s->train_names, s->n_train_speakers));
    return write_pairs(f, "data/val_pairs", s->pairs[1], s->cfg.val_pairs);
}

static ct_status load_state(void *ctx, hid_t f)
{
    speaker_task *s = ctx;
    ct_rng data, crop, val_crop, dropout;
    long n = s->cfg.pairs;
    int *order = ct_malloc((size_t)n * sizeof(int), "order");
    unsigned char *seen = ct_calloc((size_t)n, 1, "order");
    ct_status st = order && seen ? CT_OK : CT_ENOMEM;
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "data", &data);
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "crop", &crop);
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "val_crop", &val_crop);
    if (st == CT_OK) st = ct_ckpt_read_rng(f, "dropout", &dropout);
    if (st == CT_OK) {
        st = ct_ckpt_read_i32(f, "data/order", order, (size_t)n);
        if (st != CT_OK) st = ct_fail(st, "%s (was the checkpoint made with other --pairs?)", ct_last_error());
    }
    for (long i = 0; st == CT_OK && i < n; i++) {   /* must be a permutation of the pairs */
        if (order[i] < 0 || order[i] >= n || seen[order[i]]) st = ct_fail(CT_EFORMAT, "/data/order is not a permutation of the %ld pairs", n);
        else seen[order[i]] = 1;
    }
    /* the training pairs the checkpoint trained on: the run's one draw, or its epoch's */
    int epoch = 0, per_epoch = ct_h5_exists(f, "data/pairs_epoch");
    ct_pair *pairs = s->pairs[0];
    if (st == CT_OK && per_epoch && s->cfg.fixed_pairs)
        st = ct_fail(CT_EINVAL, "this checkpoint draws new training pairs every epoch: resume it without --fixed-pairs");
    else if (st == CT_OK && !per_epoch && !s->cfg.fixed_pairs)
        st = ct_fail(CT_EINVAL, "this checkpoint has no /data/pairs_epoch: its training pairs were drawn once for the run; "
                     "resume it with --fixed-pairs");
    if (st == CT_OK && per_epoch) {
        st = ct_ckpt_read_i32(f, "data/pairs_epoch", &epoch, 1);
        if (st == CT_OK && epoch < 0) st = ct_fail(CT_EFORMAT, "/data/pairs_epoch is %d, not an epoch", epoch);
        if (st == CT_OK && !(pairs = ct_malloc((size_t)n * sizeof *pairs, "pairs"))) st = CT_ENOMEM;
        if (st == CT_OK) draw_epoch_pairs(s, pairs, epoch);
    }
    if (st == CT_OK) st = check_pairs(f, "data/pairs", pairs, s->cfg.pairs);
    if (st == CT_OK) st = check_pairs(f, "data/val_pairs", s->pairs[1], s->cfg.val_pairs);
    if (st == CT_OK) {
        drain(s);   /* nothing prepared from the old state may be used */
        if (per_epoch) {
            memcpy(s->pairs[0], pairs, (size_t)n * sizeof *pairs);
            s->pairs_epoch = epoch;
        }
        memcpy(s->order, order, (size_t)n * sizeof(int));
        s->data = data;
        s->crop = crop;
        s->val_crop = val_crop;
        s->dropout = dropout;
    }
    if (pairs != s->pairs[0]) free(pairs);
    free(order);
    free(seen);
    return st;
}

/* val_eer on the trial list, after validation. Evaluating embeds utterances
 * with the model's embedding memory (speaker_model.plan_embed), so the training
 * activations and the data pipeline are untouched. Under mpirun the ranks share
 * the utterances and every rank gets the whole list's number (train/verify.h). */
static void end_epoch(void *ctx, int epoch, ct_epoch_log *log)
{
    speaker_task *s = ctx;
    (void)epoch;
    ct_verify_result r;
    ct_status st = ct_verify_trials_dist(&s->m, s->c, s->cfg.trials, s->cfg.n_trials, s->cfg.trial_batch,
                                         s->cfg.trial_max_frames, s->cfg.dist, &r, NULL);   /* shared among the ranks */
    if (st == CT_OK) log->val_eer = r.eer;
    else if (st != CT_EINTR && ct_dist_is_root(s->cfg.dist))   /* a signal: ct_fit abandons the epoch's close and validates it again on resume */
        fprintf(stderr, "warning: val_eer not computed: %s\n", ct_last_error());
}

ct_task ct_speaker_task_ops(speaker_task *s)
{
    return (ct_task){ .ctx = s, .state = &s->state, .n_train = s->cfg.pairs, .n_val = s->cfg.val_pairs, .dist = s->cfg.dist,
                      .begin_epoch = begin_epoch, .load = load, .forward = forward, .backward = backward,
                      .save_state = save_state, .load_state = load_state,
                      .end_epoch = s->cfg.trials ? end_epoch : NULL };
}

void ct_speaker_task_free(speaker_task *s)
{
    if (s->pf.running) { drain(s); ct_prefetch_stop(&s->pf); }
    ct_workers_free(s->readers);
    if (s->ring) s->m.be->ops->ring_free(s->m.be, s->ring);
    free(s->pairs[0]); free(s->pairs[1]); free(s->order);
    ct_pair_sampler_free(&s->sampler);
    free(s->train_names);
    for (int k = 0; k < 2; k++) {
        free(s->batch_pairs[k]);
        if (s->block[k]) s->m.be->ops->host_free(s->m.be, s->block[k]);
    }
    memset(s, 0, sizeof *s);
}
