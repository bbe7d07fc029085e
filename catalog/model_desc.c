/* model_desc.c - a speaker model's description beside its weights: written by
 * `ctrain train`, read and checked by `ctrain eval` (see model_desc.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "catalog/model_desc.h"
#include "io/featstore.h"
#include "io/h5.h"

/* The names of the LSTM's options, in files and on the command line (--recurrent, --pool). */
const ct_opt_choice ct_lstm_recurrent_choices[] = { { "sigmoid", LSTM_SIGMOID }, { "hard_sigmoid", LSTM_HARD_SIGMOID }, { NULL, 0 } };
const ct_opt_choice ct_lstm_pool_choices[] = { { "last", LSTM_RETURN_LAST }, { "mean", LSTM_RETURN_MEAN }, { NULL, 0 } };

/* ---- writing ---- */

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

/* The integer setting `key`, which the file records: CT_EFORMAT when it is not an integer in [lo, hi]. */
static ct_status recorded_int(const model_desc *d, const char *key, int lo, int hi, int *out)
{
    long long v;
    if (!entry_int(ct_kv_get(&d->kv, key), &v) || v < lo || v > hi)
        return ct_fail(CT_EFORMAT, "%s: attribute %s is not an integer in [%d, %d]; the file is damaged: pass weights written by "
                       "`ctrain train`", d->path, key, lo, hi);
    *out = (int)v;
    return CT_OK;
}

ct_status ct_model_desc_cnn_arch(const char *path, const ct_kv *kv, char *spec, size_t cap)
{
    /* the spec may be longer than a ct_kv string: read it whole */
    hid_t f;
    CT_TRY(ct_h5_open(&f, path));
    ct_status st = ct_h5_attr_read_str(f, "/", "arch", spec, cap);
    ct_h5_close(f);
    if (st != CT_OK) return ct_fail(CT_EFORMAT, "%s has no \"arch\" attribute: not written by `ctrain train siamese-cnn`", path);
    if (!ct_kv_get(kv, "frames"))
        return ct_fail(CT_EFORMAT, "%s has no \"frames\" attribute: not written by `ctrain train siamese-cnn`", path);
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
        CT_TRY(recorded_int(d, "n_mels", 1, 4096, &mels));
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
        CT_TRY(recorded_int(d, keys[k], 1, 1 << 30, &want));
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
