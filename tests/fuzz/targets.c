/* targets.c - the readers as fuzz targets (see targets.h): each reads one file
 * the way a command does and checks that every failure says, in one line, which
 * file is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/fuzz/targets.h"
#include "io/audio.h"
#include "io/featstore.h"
#include "io/h5.h"
#include "io/idx.h"
#include "io/trials.h"
#include "io/yamlmap.h"
#include "models/seq_cnn.h"
#include "train/checkpoint.h"
#include "catalog/export.h"
#include "catalog/model_table.h"

static char why[1024];

const char *fuzz_why(void) { return why; }

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int fuzz_check(ct_status st, const char *file)
{
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "fuzz: %s: %s\n", ct_status_name(st), st == CT_OK ? "read" : ct_last_error());
    if (st == CT_OK) return 0;
    const char *msg = ct_last_error();
    if (!msg || !msg[0]) {
        snprintf(why, sizeof why, "a failure (%s) without a message", ct_status_name(st));
        return -1;
    }
    if (strchr(msg, '\n')) {
        snprintf(why, sizeof why, "a message of more than one line: %.900s", msg);
        return -1;
    }
    if (file && !strstr(msg, base_name(file))) {
        snprintf(why, sizeof why, "a message that does not name the file %s: %.800s", base_name(file), msg);
        return -1;
    }
    return 0;
}

long fuzz_h5_open_objects(void)
{
    ssize_t n = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    return n > 0 ? (long)n : 0;
}

int fuzz_h5_left_open(long before)
{
    long n = fuzz_h5_open_objects() - before;
    if (n <= 0) return 0;
    snprintf(why, sizeof why, "%ld HDF5 object(s) left open after reading", n);
    return -1;
}

/* dst = tmp/<the name of src>, a byte-for-byte copy of src. */
static int copy_file(const char *src, const char *tmp, char *dst, size_t cap)
{
    snprintf(dst, cap, "%s/%s", tmp, base_name(src));
    FILE *in = fopen(src, "rb"), *out = in ? fopen(dst, "wb") : NULL;
    char buf[65536];
    size_t n;
    int ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    if (in) fclose(in);
    if (out && fclose(out) != 0) ok = 0;
    return ok ? 0 : -1;
}

/* ---- audio ---- */
static int t_audio(const char *path, const char *tmp)
{
    float *x = NULL;
    size_t n = 0;
    ct_status st = ct_audio_read(&x, &n, path, 0);
    free(x);
    return fuzz_check(st, path);
}

/* ---- AAC in MP4 (.m4a, VoxCeleb2) through FFmpeg, whatever the input's name ---- */
static int t_m4a(const char *path, const char *tmp)
{
    float *x = NULL;
    size_t n = 0;
    ct_status st = ct_audio_read_m4a(&x, &n, path, 0);
    free(x);
    return fuzz_check(st, path);
}

/* ---- the feature store ---- */
static int t_featstore(const char *path, const char *tmp)
{
    ct_featstore_settings s;
    ct_status st = ct_featstore_read_settings(path, &s);
    if (fuzz_check(st, path)) return -1;
    ct_corpus c;
    st = ct_featstore_load(&c, path);
    if (fuzz_check(st, path)) return -1;
    if (st == CT_OK) ct_corpus_free(&c);
    /* the streamed reader, as training and eval use it: every utterance read whole */
    st = ct_featstore_stream(&c, path);
    if (fuzz_check(st, path)) return -1;
    if (st == CT_OK) {
        int longest = 1;
        for (int u = 0; u < c.n_utt; u++) if (c.utt[u].frames > longest) longest = c.utt[u].frames;
        float *x = (size_t)longest * (size_t)c.n_mels <= ((size_t)1 << 26) ? malloc((size_t)longest * (size_t)c.n_mels * sizeof *x) : NULL;
        for (int u = 0; x && u < c.n_utt && st == CT_OK; u++) st = ct_corpus_frames(&c, u, 0, c.utt[u].frames, x);
        free(x);
        ct_corpus_free(&c);
        if (fuzz_check(st, path)) return -1;
    }
    /* prep's append: opening repairs a store cut short, so it works on a copy */
    char copy[512];
    if (copy_file(path, tmp, copy, sizeof copy) != 0) return 0;
    int mels = s.n_mels >= 1 && s.n_mels <= 64 ? s.n_mels : 40;
    ct_featstore *w = NULL;
    st = ct_featstore_open(&w, copy, mels);
    if (fuzz_check(st, copy)) return -1;
    if (st == CT_OK) {
        float feats[3 * 64] = { 0 };
        st = ct_featstore_append(w, "id99999/fuzzvideo/00001.wav", "id99999", "fuzzvideo", feats, 3);
        ct_status cs = ct_featstore_close(w);
        if (fuzz_check(st, copy) || fuzz_check(cs, copy)) return -1;
    }
    remove(copy);
    return 0;
}

/* ---- checkpoints: what --resume reads ---- */
static int t_checkpoint(const char *path, const char *tmp)
{
    static ct_ckpt_meta meta;
    ct_status st = ct_ckpt_read_meta(path, &meta);
    if (fuzz_check(st, path)) return -1;
    int epoch = 0;
    long step = 0;
    if (fuzz_check(ct_ckpt_verify(path, &epoch, &step), path)) return -1;
    if (st != CT_OK) return 0;
    const ct_model_descriptor *d = ct_model_find(meta.model);
    if (!d) return 0;
    void *cfg = calloc(1, d->cfg_size), *net = calloc(1, d->net_size);
    int rc = 0;
    if (!cfg || !net) goto done;
    d->defaults(cfg);
    st = d->from_meta(cfg, &meta, path);
    if ((rc = fuzz_check(st, path)) != 0 || st != CT_OK) goto done;
    if (d->finish(cfg, 1) != CT_OK) goto done;   /* the configuration's own checks: flags' messages */
    st = d->build(net, cfg, NULL);
    if ((rc = fuzz_check(st, NULL)) != 0 || st != CT_OK) goto done;
    ct_params *ps = d->params(net), *bs = d->buffers(net);
    const char *kind = "adam";
    ct_optim_kind k = OPT_ADAM;
    ct_kv_str(&meta.train_cfg, "optimizer", &kind);
    ct_optim_parse(&k, kind);
    ct_optim_config oc = ct_optim_defaults(k);
    ct_optim o;
    if (ct_optim_init(&o, &oc, ps->numel) == CT_OK) {
        static ct_epoch_log hist[64];
        ct_ckpt c = { .meta = &meta, .params = ps, .state = bs, .opt = &o, .hist = hist, .hist_cap = 64 };
        rc = fuzz_check(ct_ckpt_load(path, &c), path);
        ct_optim_free(&o);
    }
    d->free(net);
done:
    free(cfg);
    free(net);
    return rc;
}

/* ---- ctrain's weights files: what export reads ---- */
static int t_weights(const char *path, const char *tmp)
{
    const ct_model_descriptor *d = NULL;
    ct_status st = ct_export_model(path, &d);
    if (st != CT_OK) return fuzz_check(st, path);
    void *cfg = calloc(1, d->cfg_size);
    if (!cfg) return 0;
    d->defaults(cfg);
    char dst[512];
    snprintf(dst, sizeof dst, "%s/export.h5", tmp);
    st = ct_model_export(d, cfg, 0, path, CT_FORMAT_TORCH, dst);
    free(cfg);
    remove(dst);
    return fuzz_check(st, path);
}

/* ---- Keras and PyTorch files: what import reads, for every model ---- */
static int import_all(const char *path, const char *tmp, ct_format format)
{
    char dst[512];
    snprintf(dst, sizeof dst, "%s/imported.h5", tmp);
    for (int i = 0; ct_models[i]; i++) {
        const ct_model_descriptor *d = ct_models[i];
        if (!d->file_config || !d->layout) continue;
        void *cfg = calloc(1, d->cfg_size);
        if (!cfg) return 0;
        d->defaults(cfg);
        ct_status st = ct_model_import(d, cfg, 0, format, path, dst);
        free(cfg);
        remove(dst);
        if (fuzz_check(st, path)) return -1;
    }
    return 0;
}

static int t_keras(const char *path, const char *tmp) { return import_all(path, tmp, CT_FORMAT_KERAS); }
static int t_torch(const char *path, const char *tmp) { return import_all(path, tmp, CT_FORMAT_TORCH); }

/* ---- IDX images and labels ---- */
static int t_idx(const char *path, const char *tmp)
{
    ct_images im;
    ct_status st = ct_idx_read_images(&im, path);
    if (fuzz_check(st, path)) return -1;
    if (st == CT_OK) ct_images_free(&im);
    int *labels = NULL, n = 0;
    st = ct_idx_read_labels(&labels, &n, path);
    free(labels);
    return fuzz_check(st, path);
}

/* ---- trial lists, against the corpus the seeds name ---- */
static int t_trials(const char *path, const char *tmp)
{
    static char *paths[] = { "id10001/vida/00001.wav", "id10001/vidb/00002.wav", "id10002/vidc/00001.wav",
                             "id10002/vidc/00002.wav", "id10003/vidd/00001.wav" };
    ct_corpus c;
    memset(&c, 0, sizeof c);
    c.n_utt = (int)(sizeof paths / sizeof *paths);
    c.path = paths;
    ct_trial *t = NULL;
    int n = 0;
    ct_status st = ct_trials_load(&t, &n, path, &c);
    free(t);
    return fuzz_check(st, path);
}

/* ---- architecture specs (the file's text, up to its first NUL) ---- */
static int t_arch(const char *path, const char *tmp)
{
    char spec[2048];
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(spec, 1, sizeof spec - 1, f);
    fclose(f);
    spec[n] = '\0';
    static seq_cnn m;
    ct_status st = ct_seq_cnn_build(&m, spec, 1, 28, 28, 10);
    if (fuzz_check(st, NULL)) return -1;
    if (st == CT_OK) ct_seq_cnn_free(&m);
    st = ct_seq_cnn_build_encoder(&m, spec, 1, 100, 40);
    if (fuzz_check(st, NULL)) return -1;
    if (st == CT_OK) ct_seq_cnn_free(&m);
    return 0;
}

/* ---- --config files: libyaml's parser and the flat-map rules on top of it ---- */
static int t_config(const char *path, const char *tmp)
{
    ct_yaml_map m;
    memset(&m, 0, sizeof m);
    ct_status st = ct_yaml_map_read(path, &m);
    ct_yaml_map_free(&m);   /* after a failure too: the entries read before it */
    return fuzz_check(st, path);
}

const fuzz_target fuzz_targets[] = {
    { "audio", t_audio }, { "m4a", t_m4a }, { "featstore", t_featstore }, { "checkpoint", t_checkpoint }, { "weights", t_weights },
    { "keras", t_keras }, { "torch", t_torch }, { "idx", t_idx }, { "trials", t_trials }, { "arch", t_arch },
    { "config", t_config },
    { NULL, NULL }
};

const fuzz_target *fuzz_target_find(const char *name)
{
    for (int i = 0; fuzz_targets[i].name; i++)
        if (!strcmp(fuzz_targets[i].name, name)) return &fuzz_targets[i];
    return NULL;
}
