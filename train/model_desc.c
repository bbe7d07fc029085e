/* model_desc.c - a speaker model's description beside its weights: written by
 * `ctrain train`, read and checked by `ctrain eval` (see model_desc.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/model_desc.h"
#include "io/featstore.h"
#include "io/h5.h"

/* The names of the LSTM's options, in files and on the command line (--recurrent, --pool). */
const ct_opt_choice ct_lstm_recurrent_choices[] = { { "sigmoid", LSTM_SIGMOID }, { "hard_sigmoid", LSTM_HARD_SIGMOID }, { NULL, 0 } };
const ct_opt_choice ct_lstm_pool_choices[] = { { "last", LSTM_RETURN_LAST }, { "mean", LSTM_RETURN_MEAN }, { NULL, 0 } };

/* ---- writing ---- */

void ct_model_desc_cnn(ct_kv *kv, const siamese_cnn_config *c)
{
    ct_kv_set_int(kv, "n_mels", c->n_mels); ct_kv_set_int(kv, "frames", c->frames); ct_kv_set_int(kv, "embed", c->embed);
    ct_kv_set_num(kv, "margin", c->margin); ct_kv_set_num(kv, "threshold", c->threshold);
    ct_kv_set_str(kv, "arch", c->spec);   /* a ct_kv holds 159 characters: the weights file gets the whole spec besides */
}

ct_status ct_model_desc_features(ct_kv *kv, const char *data)
{
    if (!strcmp(data, "synthetic")) { ct_kv_set_str(kv, "features", "synthetic"); return CT_OK; }
    ct_featstore_settings s;
    CT_TRY(ct_featstore_read_settings(data, &s));
    ct_kv_set_str(kv, "features", "log-mel");
    ct_kv_set_int(kv, "sample_rate", s.sample_rate);
    ct_kv_set_int(kv, "frame_length_ms", s.frame_length_ms);
    ct_kv_set_int(kv, "frame_shift_ms", s.frame_shift_ms);
    ct_kv_set_str(kv, "normalization", s.normalization);
    return CT_OK;
}

/* ---- reading ---- */

ct_status ct_model_desc_read(model_desc *d, const char *path, const char *model)
{
    memset(d, 0, sizeof *d);
    snprintf(d->path, sizeof d->path, "%s", path);
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    ct_status st = ct_kv_read_h5(f, "/", &d->kv);
    ct_h5_close(f);
    if (st != CT_OK) return ct_fail(st, "%s: the root attributes cannot be read (%s); the file is damaged: pass a file written by "
                                    "`ctrain train %s --out`", path, ct_last_error(), model);
    const char *stored = NULL;
    if (ct_kv_str(&d->kv, "model", &stored) && strcmp(stored, model) != 0)
        return ct_fail(CT_EFORMAT, "%s holds the weights of model %s, not %s: evaluate it with `ctrain eval %s`",
                       path, stored, model, stored);
    return CT_OK;
}

static void add_missing(model_desc *d, const char *what)
{
    size_t n = strlen(what), used = strlen(d->missing);
    for (const char *p = d->missing; (p = strstr(p, what)) != NULL; p += n)   /* once each */
        if ((p == d->missing || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0')) return;
    snprintf(d->missing + used, sizeof d->missing - used, "%s%s", used ? ", " : "", what);
}

/* The entry as an integer: an HDF5 integer, an integral float, or a decimal
 * string (older siamese-cnn files wrote frames so). 0 if it is none of these. */
static int entry_int(const ct_kv_entry *e, long long *v)
{
    if (e->type == CT_KV_INT) { *v = e->i; return 1; }
    if (e->type == CT_KV_NUM) { *v = (long long)e->num; return (double)*v == e->num; }
    char *end;
    errno = 0;
    *v = strtoll(e->str, &end, 10);
    return end != e->str && *end == '\0' && errno == 0;
}

/* An integer setting: the file's value when it records one (a given flag must
 * agree), else the flag's, else dflt. flag NULL: not a flag of the command, and
 * a missing value is not worth a note (it does not change the scores). */
static ct_status want_int(model_desc *d, const char *key, const char *flag, int given, int dflt, int lo, int hi, int *out)
{
    const ct_kv_entry *e = ct_kv_get(&d->kv, key);
    long long v;
    if (!e) {
        if (flag) add_missing(d, key);
        *out = given ? given : dflt;
        return CT_OK;
    }
    if (!entry_int(e, &v) || v < lo || v > hi)
        return ct_fail(CT_EFORMAT, "%s: attribute %s is not an integer in [%d, %d]; the file is damaged: pass weights written by "
                       "`ctrain train`", d->path, key, lo, hi);
    if (flag && given && given != v)
        return ct_fail(CT_EINVAL, "%s %d contradicts %s, which records %s = %lld (the model was trained so): leave %s out",
                       flag, given, d->path, key, v, flag);
    *out = (int)v;
    return CT_OK;
}

/* A float setting without a flag (margin, threshold): the file's, else unchanged. */
static void maybe_float(const model_desc *d, const char *key, float *v) { ct_kv_float(&d->kv, key, v); }

ct_status ct_model_desc_cnn_config(model_desc *d, int mels_flag, int store_mels, siamese_cnn_config *mc)
{
    *mc = ct_siamese_cnn_defaults();
    /* the spec may be longer than a ct_kv string: read it whole */
    hid_t f;
    CT_TRY(ct_h5_open(&f, d->path));
    ct_status st = ct_h5_attr_read_str(f, "/", "arch", mc->spec, sizeof mc->spec);
    ct_h5_close(f);
    if (st != CT_OK)
        return ct_fail(CT_EFORMAT, "%s has no \"arch\" attribute: not written by `ctrain train siamese-cnn`", d->path);
    if (!ct_kv_get(&d->kv, "frames"))
        return ct_fail(CT_EFORMAT, "%s has no \"frames\" attribute: not written by `ctrain train siamese-cnn`", d->path);
    CT_TRY(want_int(d, "frames", NULL, 0, 0, 1, 100000, &mc->frames));
    CT_TRY(want_int(d, "n_mels", "--mels", mels_flag, store_mels, 1, 4096, &mc->n_mels));
    maybe_float(d, "margin", &mc->margin);
    maybe_float(d, "threshold", &mc->threshold);
    mc->embed = 0;   /* whatever the recorded spec outputs */
    return CT_OK;
}

ct_status ct_model_desc_check_store(model_desc *d, const char *store, int *store_mels)
{
    ct_featstore_settings s;
    CT_TRY(ct_featstore_read_settings(store, &s));
    if (store_mels) *store_mels = s.n_mels;
    const ct_kv_entry *e = ct_kv_get(&d->kv, "features");
    if (e && (e->type != CT_KV_STR || (strcmp(e->str, "log-mel") && strcmp(e->str, "synthetic"))))
        return ct_fail(CT_EFORMAT, "%s: attribute features is not log-mel or synthetic; the file is damaged: pass weights written by "
                       "`ctrain train`", d->path);
    if (e && !strcmp(e->str, "synthetic"))
        return ct_fail(CT_EINVAL, "%s was trained on synthetic features (--data synthetic), not on the log-mel features of a feature "
                       "store, so it cannot score %s: train it on a store written by `ctrain prep voxceleb`", d->path, store);
    int mels;
    const ct_kv_entry *m = ct_kv_get(&d->kv, "n_mels");
    if (!m) add_missing(d, "n_mels");
    else {
        CT_TRY(want_int(d, "n_mels", NULL, 0, 0, 1, 4096, &mels));
        if (mels != s.n_mels)
            return ct_fail(CT_EINVAL, "%s holds features of %d mel bands, but %s was trained on %d (n_mels = %d): evaluate on a store "
                           "made like its training data (`ctrain prep voxceleb --mels %d`)", store, s.n_mels, d->path, mels, mels, mels);
    }
    if (!e) { add_missing(d, "the feature settings"); return CT_OK; }
    const char *keys[3] = { "sample_rate", "frame_length_ms", "frame_shift_ms" };
    const int have[3] = { s.sample_rate, s.frame_length_ms, s.frame_shift_ms };
    for (int k = 0; k < 3; k++) {
        int want;
        if (!ct_kv_get(&d->kv, keys[k])) { add_missing(d, keys[k]); continue; }
        CT_TRY(want_int(d, keys[k], NULL, 0, 0, 1, 1 << 30, &want));
        if (want != have[k])
            return ct_fail(CT_EINVAL, "%s holds features with %s = %d, but %s was trained on features with %s = %d: evaluate on a "
                           "store made like its training data (`ctrain prep voxceleb` with the same settings)",
                           store, keys[k], have[k], d->path, keys[k], want);
    }
    const char *norm = NULL;
    if (!ct_kv_str(&d->kv, "normalization", &norm)) add_missing(d, "normalization");
    else if (strcmp(norm, s.normalization) != 0)
        return ct_fail(CT_EINVAL, "%s holds features with normalization = %s, but %s was trained on features with normalization = %s: "
                       "evaluate on a store made like its training data (`ctrain prep voxceleb` with the same settings)",
                       store, s.normalization, d->path, norm);
    return CT_OK;
}

const char *ct_model_desc_note(const model_desc *d, char *buf, size_t cap)
{
    if (!d->missing[0]) return NULL;
    snprintf(buf, cap, "%s does not record %s (written by an older ctrain): taken from the flags or their defaults, not checked",
             d->path, d->missing);
    return buf;
}
