/* model_speaker.c - the data side of the speaker models' descriptors: pairs of
 * utterances from a feature store or a synthetic corpus, validation speakers
 * (or videos), an optional trial list whose speakers are held out and whose
 * EER is reported every epoch (see model_speaker.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/model_speaker.h"
#include "core/bytes.h"
#include "io/featstore.h"

const ct_opt_choice ct_val_split_choices[] = { { "speakers", CT_VAL_SPEAKERS }, { "videos", CT_VAL_VIDEOS }, { NULL, 0 } };

void ct_speaker_opts_defaults(ct_speaker_opts *o)
{
    memset(o, 0, sizeof *o);
    o->synth = (ct_synth_config){ .speakers = 40, .utts_per_speaker = 12, .min_frames = 100, .max_frames = 300,
                                  .n_mels = 40, .noise = 2.0f, .seed = 1 };
    o->pairs = 6000;
    o->val_pairs = 2000;
    o->val_split = CT_VAL_SPEAKERS;
    o->val_fraction = 0.25f;
    o->loader_threads = 4;
}

ct_status ct_speaker_opts_check(const ct_speaker_opts *o)
{
    size_t bytes;
    if (o->data_memory) CT_TRY(ct_bytes_parse(o->data_memory, &bytes, "--data-memory"));
    if (!ct_opt_choice_name(ct_val_split_choices, o->val_split)) return ct_fail(CT_EINVAL, "--val-split: use speakers or videos");
    return CT_OK;
}

ct_status ct_speaker_to_meta(const ct_opt *opts, const void *cfg, const ct_model_data *data, ct_ckpt_meta *meta)
{
    CT_TRY(ct_model_desc_features(&meta->model_cfg, data->source));
    ct_opts_to_kv(opts, CT_IN_TRAINING, cfg, &meta->train_cfg);
    return CT_OK;
}

/* The trial list's speakers become the validation speakers: none of them is trained on. */
static ct_status hold_out_trial_speakers(ct_model_data *d)
{
    const ct_corpus *c = &d->corpus;
    speaker_task_config *tc = &d->tc;
    unsigned char *in_trials = ct_calloc((size_t)c->n_speakers, 1, "trial speakers");
    d->trial_speakers = in_trials ? ct_malloc((size_t)c->n_speakers * sizeof(int), "trial speakers") : NULL;
    if (!d->trial_speakers) { free(in_trials); return CT_ENOMEM; }
    for (int k = 0; k < d->n_trials; k++)
        in_trials[c->utt[d->trials[k].a].speaker] = in_trials[c->utt[d->trials[k].b].speaker] = 1;
    for (int sp = 0; sp < c->n_speakers; sp++)
        if (in_trials[sp]) d->trial_speakers[tc->n_val_speakers++] = sp;
    free(in_trials);
    if (tc->val_split == CT_VAL_SPEAKERS) tc->val_speakers = d->trial_speakers;
    return CT_OK;
}

/* The speakers a test list names leave training and validation (tc.excluded); a list that
 * names none of the store's speakers is a warning: nothing of it was in the data. */
static ct_status exclude_trial_speakers(ct_model_data *d, const char *path)
{
    const ct_corpus *c = &d->corpus;
    d->exclude_path = path;
    d->excluded = ct_malloc((size_t)c->n_speakers + 1, "excluded speakers");
    if (!d->excluded) return CT_ENOMEM;
    CT_TRY(ct_trials_speakers(d->excluded, &d->n_excluded, path, c));
    for (int u = 0; u < c->n_utt; u++) d->n_excluded_utts += d->excluded[c->utt[u].speaker];
    if (d->n_excluded == 0)
        fprintf(stderr, "warning: --exclude-trials %s names no speaker of %s: nothing is excluded\n", path, d->source);
    d->tc.excluded = d->excluded;
    return CT_OK;
}

ct_status ct_speaker_load(ct_model_data *d, const ct_speaker_opts *o, const char *source, long seed, int batch, int n_mels, int frames)
{
    int ranks_here = d->ranks_here;   /* the caller's; everything else starts empty */
    memset(d, 0, sizeof *d);
    d->ranks_here = ranks_here;
    d->source = source;
    speaker_task_config *tc = &d->tc;
    *tc = (speaker_task_config){ .pairs = o->pairs, .val_pairs = o->val_pairs, .batch = batch, .val_split = (ct_val_split)o->val_split,
                                 .val_fraction = o->val_fraction, .seed = (uint64_t)seed, .readers = o->loader_threads };
    d->n_train = o->pairs;
    d->n_val = o->val_pairs;
    ct_synth_config sc = o->synth;
    sc.seed = tc->seed;
    sc.n_mels = n_mels;
    if (sc.min_frames < frames) sc.min_frames = frames;
    if (sc.max_frames < sc.min_frames) sc.max_frames = sc.min_frames;
    if (!strcmp(source, "synthetic")) CT_TRY(ct_corpus_synthetic(&d->corpus, &sc));
    else {   /* a feature store written by `ctrain prep voxceleb`: loaded, or streamed when larger than the budget */
        size_t budget = 0;
        if (o->data_memory) CT_TRY(ct_bytes_parse(o->data_memory, &budget, "--data-memory"));
        if (o->data_memory && budget == 0) return ct_fail(CT_EINVAL, "--data-memory 0: give the memory the data may take, such as 512M");
        /* the loader's two batch slots: crops x [2B, T, I], lengths [2B] and labels [B] each */
        size_t batch_bytes = 2 * ((size_t)2 * batch * frames * n_mels * sizeof(float) + (size_t)3 * batch * sizeof(int));
        CT_TRY(ct_featstore_open_corpus(&d->corpus, source, budget, ranks_here, batch_bytes, &d->store_plan));
    }
    if (o->exclude_trials) CT_TRY(exclude_trial_speakers(d, o->exclude_trials));
    if (!o->trials) return CT_OK;
    d->trials_path = o->trials;
    CT_TRY(ct_trials_load(&d->trials, &d->n_trials, o->trials, &d->corpus));
    CT_TRY(hold_out_trial_speakers(d));
    tc->trials = d->trials;
    tc->n_trials = d->n_trials;
    tc->trial_batch = 32;
    tc->trial_max_frames = 3000;
    return CT_OK;
}

void ct_speaker_data_line(const ct_model_data *d, const ct_model_task *t, const ct_fit_config *fit, FILE *out)
{
    const speaker_task *s = t->open == 1 ? &t->s : NULL;   /* the speaker counts come from the task's split */
    fprintf(out, "Data: %s, %d utterances of %d speakers; validation on %s (%d training, %d validation speakers); "
            "%s lr %g, batch %d pairs\n", d->source, d->corpus.n_utt, d->corpus.n_speakers,
            d->tc.val_split == CT_VAL_SPEAKERS ? (d->trials ? "the trial list's speakers" : "held-out speakers") : "held-out videos",
            s ? s->n_train_speakers : 0, s ? s->n_val_speakers : 0, ct_optim_name(fit->optim.kind), fit->optim.lr, fit->batch);
    if (strcmp(d->source, "synthetic")) {
        char how[512];
        fprintf(out, "Features: %s, %s\n", ct_feat_dtype_name(d->store_plan.dtype), ct_featstore_plan_line(&d->store_plan, how, sizeof how));
    }
    if (d->trials) fprintf(out, "Trials: %s, %d trials; val_eer after every epoch\n", d->trials_path, d->n_trials);
    if (d->n_excluded)
        fprintf(out, "Excluded: %d speaker%s (%d utterances) named by %s, from training and validation\n", d->n_excluded,
                d->n_excluded == 1 ? "" : "s", d->n_excluded_utts, d->exclude_path);
}

void ct_speaker_data_summary(const ct_model_data *d, char *buf, size_t cap)
{
    char how[512] = "";
    if (strcmp(d->source, "synthetic")) {   /* a store: say whether it is in memory or read from the file */
        how[0] = ';';
        how[1] = ' ';
        ct_featstore_plan_line(&d->store_plan, how + 2, sizeof how - 2);
    }
    snprintf(buf, cap, "%s: %d utterances of %d speakers, %g%% of the speakers held out for validation%s", d->source,
             d->corpus.n_utt, d->corpus.n_speakers, 100 * d->tc.val_fraction, how);
}

ct_status ct_speaker_task_open(ct_model_task *t, speaker_model sm, ct_model_data *d, const ct_rngs *rngs)
{
    memset(t, 0, sizeof *t);
    CT_TRY(ct_speaker_task_init(&t->s, &d->tc, &d->corpus, &sm, rngs, stderr));
    t->open = 1;
    t->task = ct_speaker_task_ops(&t->s);
    return CT_OK;
}

void ct_speaker_desc_of(model_desc *d, const char *path, const ct_kv *kv)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    d->kv = *kv;
}
