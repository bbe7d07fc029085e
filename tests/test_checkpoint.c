/* test_checkpoint.c - checkpoints (train/checkpoint.h) and the callbacks of the
 * training loop (train/train.h):
 *   - every field survives a save and a load bit for bit; a failed load changes nothing;
 *   - resuming is exact: a run stopped after k epochs (or inside an epoch) and resumed
 *     ends with the same weights, optimizer state, RNG and data state and prints the
 *     same log lines (seconds masked) as one uninterrupted run, for the siamese LSTM
 *     and the small CNN, on 1 and 2 threads;
 *   - a run killed with SIGKILL at random moments always leaves a whole checkpoint (the
 *     old one or the new one), and resuming after every kill still ends bit-identical;
 *   - bad input (truncated, corrupt, another model, another shape, a newer format, a
 *     read-only directory, a full disk) gives a clear error, keeps the previous file,
 *     and never starts training;
 *   - --on-nan stop / skip-batch, --save-best, --early-stopping (best weights restored),
 *     --csv (header once, rows appended on resume);
 *   - `ctrain export` of every model: PyTorch loads the state_dict into the equivalent
 *     module and computes ctrain's output, Keras's conventions (tests/export_keras_check.py,
 *     in numpy) compute it from the Keras file, the dense rows after a flatten are in
 *     Keras's channels-last order, and `ctrain import` of each export is exact.
 * The command-line cases run $CTRAIN_BIN (default bin/ctrain) in the runner's scratch
 * directory (t_scratch_dir). */
#define _GNU_SOURCE   /* memmem */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/test.h"
#include "core/interrupt.h"
#include "train/checkpoint.h"
#include "io/h5.h"
#include "io/weights.h"
#include "models/siamese_cnn.h"
#include "models/siamese_lstm.h"
#include "models/small_cnn.h"
#include "train/train.h"

/* ---------------------------------------------------------------- helpers */

static char tdir[64];


static const char *tpath(const char *name)
{
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tdir, name);
    return buf[k];
}

/* Runs `ctrain ARGS` in a child (stdout+stderr into out), optionally with a file
 * size limit (bytes, SIGXFSZ ignored so writes fail with EFBIG) and, when running
 * as root, as user nobody (so directory permissions apply). Returns the exit
 * status, or 128 + signal. */
static int spawn(const char *args, char *out, size_t n, long fsize, int as_nobody)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && exec %s %s", t_scratch_dir(), t_ctrain_bin(), args);
    int pfd[2];
    if (pipe(pfd) != 0) { out[0] = '\0'; return -1; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1); dup2(pfd[1], 2);
        close(pfd[0]); close(pfd[1]);
        if (fsize > 0) {
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit rl = { (rlim_t)fsize, (rlim_t)fsize };
            setrlimit(RLIMIT_FSIZE, &rl);
        }
        if (as_nobody && geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    size_t got = 0;
    ssize_t r;
    char sink[4096];
    while ((r = read(pfd[0], got + 1 < n ? out + got : sink, got + 1 < n ? n - 1 - got : sizeof sink)) > 0)
        if (got + 1 < n) got += (size_t)r;
    out[got] = '\0';
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static int run(const char *args, char *out, size_t n) { return spawn(args, out, n, 0, 0); }

/* The per-epoch log lines of a run, with the seconds and the time per step masked
 * (" - 0.8s - 12ms/step - loss: ..." -> " - X - loss: ..."). */
static void epoch_lines(const char *out, char *dst, size_t n)
{
    for (const char *p = out; *p; ) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *q = len > 3 && !strncmp(p, " - ", 3) ? strstr(p, " - loss: ") : NULL;
        if (q && q < p + len) {
            size_t used = strlen(dst);
            snprintf(dst + used, n - used, " - X%.*s\n", (int)(len - (size_t)(q - p)), q);
        }
        p += len + (e ? 1 : 0);
    }
}

static long file_size(const char *path)
{
    struct stat s;
    return stat(path, &s) == 0 ? (long)s.st_size : -1;
}

static unsigned char *read_all(const char *path, long *n)
{
    *n = file_size(path);
    if (*n < 0) return NULL;
    unsigned char *b = malloc((size_t)*n + 1);
    FILE *f = fopen(path, "rb");
    if (!b || !f || fread(b, 1, (size_t)*n, f) != (size_t)*n) { free(b); if (f) fclose(f); return NULL; }
    fclose(f);
    b[*n] = 0;
    return b;
}

static int write_all(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    int ok = fwrite(b, 1, (size_t)n, f) == (size_t)n;
    return fclose(f) == 0 && ok;
}

static int same_bytes(const char *a, const char *b)
{
    long na, nb;
    unsigned char *x = read_all(a, &na), *y = read_all(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, (size_t)na) == 0;
    free(x); free(y);
    return same;
}

/* ---- compare two checkpoints: every dataset bit for bit (history seconds excepted) ---- */
typedef struct { char names[128][128]; int n; } name_list;
static herr_t collect(hid_t loc, const char *name, const H5O_info_t *info, void *op)
{
    name_list *l = op;
    (void)loc;
    if (info->type == H5O_TYPE_DATASET && l->n < 128) snprintf(l->names[l->n++], 128, "%s", name);
    return 0;
}

static void *read_raw(hid_t f, const char *name, size_t *bytes)
{
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    *bytes = (size_t)H5Sget_simple_extent_npoints(s) * H5Tget_size(t);
    void *b = malloc(*bytes + 1);
    if (b && *bytes && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, b) < 0) { free(b); b = NULL; }
    H5Sclose(s); H5Tclose(t); H5Dclose(d);
    return b;
}

static long attr_long(hid_t f, const char *obj, const char *name)
{
    double v = -1;
    if (ct_h5_attr_read_double(f, obj, name, &v) != CT_OK) return -1;
    return (long)v;
}

/* 1 if equal; else writes the first difference into why. A checkpoint has at least
 * 10 datasets, a weights file at least min_datasets. */
static int h5_same(const char *a, const char *b, char *why, size_t n, int min_datasets, int checkpoint);
static int ckpt_same(const char *a, const char *b, char *why, size_t n) { return h5_same(a, b, why, n, 10, 1); }

static int h5_same(const char *a, const char *b, char *why, size_t n, int min_datasets, int checkpoint)
{
    ct_h5_quiet();
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    int same = fa >= 0 && fb >= 0;
    if (!same) snprintf(why, n, "cannot open %s or %s", a, b);
    static name_list la, lb;
    la.n = lb.n = 0;
    if (same) {
        H5Ovisit2(fa, H5_INDEX_NAME, H5_ITER_INC, collect, &la, H5O_INFO_BASIC);
        H5Ovisit2(fb, H5_INDEX_NAME, H5_ITER_INC, collect, &lb, H5O_INFO_BASIC);
        if (la.n != lb.n || la.n < min_datasets) { same = 0; snprintf(why, n, "%d vs %d datasets", la.n, lb.n); }
    }
    for (int i = 0; same && i < la.n; i++) {
        if (strstr(la.names[i], "seconds")) continue;
        size_t ba = 0, bb = 0;
        void *x = read_raw(fa, la.names[i], &ba), *y = read_raw(fb, la.names[i], &bb);
        if (!x || !y || ba != bb || memcmp(x, y, ba) != 0) { same = 0; snprintf(why, n, "dataset /%s differs", la.names[i]); }
        free(x); free(y);
    }
    if (same && checkpoint) {
        const char *at[][2] = { { "optimizer", "step" }, { "progress", "epoch" }, { "progress", "step" }, { "progress", "seen" } };
        for (int i = 0; same && i < 4; i++)
            if (attr_long(fa, at[i][0], at[i][1]) != attr_long(fb, at[i][0], at[i][1])) {
                same = 0;
                snprintf(why, n, "/%s attribute %s: %ld vs %ld", at[i][0], at[i][1], attr_long(fa, at[i][0], at[i][1]), attr_long(fb, at[i][0], at[i][1]));
            }
    }
    if (fa >= 0) H5Fclose(fa);
    if (fb >= 0) H5Fclose(fb);
    return same;
}

/* ---------------------------------------------------------------- a toy task
 * A model with a 5-float weight w and a 2x3 bias-like parameter, trained to a
 * target by SGD: loss = 0.5 |w - t|^2 (+ same for b), gradient w - t. Validation
 * returns a scripted value per epoch, so callbacks can be tested exactly. Batches
 * given in nan_loss / nan_grad (1-based over the run) give a NaN loss / gradient. */
#define TOY_N 40
typedef struct {
    ct_params ps, st;
    ct_dparams dps, dst;    /* the same on the CPU "device" (layers/ops.h) */
    ct_train_state state;
    long counter;           /* training batches loaded so far */
    int epoch, bad_loss, bad_grad;
    long nan_loss[4], nan_grad[4];
    const double *script;   /* [epochs] validation loss; NULL: the training loss */
    const double *acc;      /* [epochs] validation accuracy (multiples of 1/8); NULL: one half */
    float snap[16][6];      /* w[0..5) and b[0] after each epoch */
    ct_rng data;
    int order[TOY_N];
    long sigterm_at;        /* raise SIGTERM while loading this training batch (1-based over the run; 0: never) */
    int sigterm_val;        /* ... or while validating this epoch (1-based; 0: never) */
    long fail_load_at;      /* loading this training batch fails, as a damaged feature store does (1-based; 0: never) */
} toy;

static void toy_begin(void *ctx, int e) { toy *t = ctx; t->epoch = e; ct_rng_shuffle_int(&t->data, t->order, TOY_N); }
static ct_status toy_load(void *ctx, int split, long first, int n)
{
    toy *t = ctx;
    (void)first; (void)n;
    if (split != CT_SPLIT_TRAIN) {
        if (t->sigterm_val == t->epoch + 1) raise(SIGTERM);
        return CT_OK;
    }
    t->counter++;
    if (t->sigterm_at == t->counter) raise(SIGTERM);
    if (t->fail_load_at == t->counter)
        return ct_fail(CT_EIO, "toy.h5: cannot read utterance id1/v/00001.wav (frames 0-99): the file was truncated");
    t->bad_loss = t->bad_grad = 0;
    for (int k = 0; k < 4; k++) {
        if (t->nan_loss[k] == t->counter) t->bad_loss = 1;
        if (t->nan_grad[k] == t->counter) t->bad_grad = 1;
    }
    return CT_OK;
}

static float toy_loss(toy *t)
{
    double s = 0;
    for (int h = 0; h < t->ps.n; h++) {
        const float *w = ct_params_data(&t->ps, h);
        for (size_t i = 0; i < t->ps.p[h].numel; i++) s += 0.5 * (w[i] - 1.0) * (w[i] - 1.0);
    }
    return (float)s;
}
static float toy_forward(void *ctx, int n, int train, int *correct)
{
    toy *t = ctx;
    *correct = n / 2;
    if (train && t->bad_loss) return NAN;
    if (!train && t->acc) *correct = (int)lround(t->acc[t->epoch] * n);
    if (!train && t->script) return (float)t->script[t->epoch];
    return toy_loss(t);
}
static void toy_backward(void *ctx, int n)
{
    toy *t = ctx;
    (void)n;
    for (int h = 0; h < t->ps.n; h++) {
        const float *w = ct_params_data(&t->ps, h);
        float *g = ct_params_grad(&t->ps, h);
        for (size_t i = 0; i < t->ps.p[h].numel; i++) g[i] += w[i] - 1.0f;
    }
    if (t->bad_grad) t->ps.grad[0] = NAN;
}
static void toy_end(void *ctx, int e, ct_epoch_log *log)
{
    toy *t = ctx;
    (void)log;
    if (e < 16) { memcpy(t->snap[e], ct_params_data(&t->ps, 0), 5 * sizeof(float)); t->snap[e][5] = ct_params_data(&t->ps, 1)[0]; }
}
static ct_status toy_save(void *ctx, hid_t f)
{
    toy *t = ctx;
    size_t n = TOY_N, one = 1;
    int c = (int)t->counter;
    CT_TRY(ct_ckpt_write_rng(f, "data", &t->data));
    CT_TRY(ct_ckpt_write_i32(f, "data/counter", &c, 1, &one));
    return ct_ckpt_write_i32(f, "data/order", t->order, 1, &n);
}
static ct_status toy_restore(void *ctx, hid_t f)
{
    toy *t = ctx;
    ct_rng r;
    int order[TOY_N], c;
    CT_TRY(ct_ckpt_read_rng(f, "data", &r));
    CT_TRY(ct_ckpt_read_i32(f, "data/counter", &c, 1));
    CT_TRY(ct_ckpt_read_i32(f, "data/order", order, TOY_N));
    t->data = r; t->counter = c;
    memcpy(t->order, order, sizeof order);
    return CT_OK;
}

static void toy_init(toy *t, float w0)
{
    memset(t, 0, sizeof *t);
    ct_params_init(&t->ps);
    ct_params_init(&t->st);
    int s5[1] = { 5 }, s23[2] = { 2, 3 }, s3[1] = { 3 };
    ct_params_add(&t->ps, "toy/w", 1, s5, ct_init_const(w0));
    ct_params_add(&t->ps, "toy/b", 2, s23, ct_init_const(-w0));
    ct_params_add(&t->st, "toy/running", 1, s3, ct_init_const(0.5f));
    ct_params_alloc(&t->ps);
    ct_params_alloc(&t->st);
    ct_rng r;
    ct_rng_seed(&r, 1, 1);
    ct_params_initialize(&t->ps, &r);
    ct_params_initialize(&t->st, &r);
    ct_rng_seed(&t->data, 7, CT_STREAM_DATA);
    for (int i = 0; i < TOY_N; i++) t->order[i] = i;
    ct_dparams_make(&t->dps, &ct_cpu_backend, &t->ps, 1);
    ct_dparams_make(&t->dst, &ct_cpu_backend, &t->st, 0);
    t->state = ct_train_state_of(&t->dps, &t->dst);
}

static ct_task toy_task(toy *t)
{
    return (ct_task){ .ctx = t, .state = &t->state, .n_train = TOY_N, .n_val = 8, .begin_epoch = toy_begin, .load = toy_load,
                      .forward = toy_forward, .backward = toy_backward, .end_epoch = toy_end,
                      .save_state = toy_save, .load_state = toy_restore };
}

static ct_ckpt_meta toy_meta;

static ct_fit_config toy_fit(int epochs)
{
    ct_fit_config c;
    memset(&c, 0, sizeof c);
    c.epochs = epochs;
    c.batch = 8;   /* 5 batches per epoch */
    c.optim = ct_optim_defaults(OPT_SGD);
    c.optim.lr = 0.1f;
    c.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = 0.1f };
    c.meta = &toy_meta;
    return c;
}

/* Runs ct_fit with its log captured into out. */
static ct_status fit_capture(const ct_task *t, const ct_fit_config *c, char *out, size_t n)
{
    FILE *f = tmpfile();
    ct_status st = ct_fit(t, c, NULL, f);
    rewind(f);
    size_t got = fread(out, 1, n - 1, f);
    out[got] = '\0';
    fclose(f);
    return st;
}

/* ---------------------------------------------------------------- cases */

static void case_round_trip(void)
{
    t_case("checkpoint/round trip of every field, and a failed load changes nothing");
    toy a, b;
    toy_init(&a, 0.25f);
    toy_init(&b, 0.0f);
    ct_rng r;
    ct_rng_seed(&r, 99, 5);
    for (size_t i = 0; i < a.st.p[0].numel; i++) a.st.data[i] = ct_rng_uniform(&r);
    for (int k = 0; k < 17; k++) ct_rng_u32(&a.data);
    ct_rng_shuffle_int(&a.data, a.order, TOY_N);
    a.counter = 12345;
    ct_optim oa, ob;
    ct_optim_config oc = ct_optim_defaults(OPT_ADAM);
    ct_optim_init(&oa, &oc, a.ps.numel);
    ct_optim_init(&ob, &oc, b.ps.numel);
    for (size_t i = 0; i < a.ps.numel; i++) { oa.m[i] = ct_rng_uniform(&r) - 0.5f; oa.v[i] = ct_rng_uniform(&r); }
    oa.step = 17;
    ct_epoch_log ha[3] = { { 0 } }, hb[3];   /* data_seconds stays 0: checkpoints do not record it (train/task.h) */
    for (int e = 0; e < 3; e++) {
        double *f = &ha[e].seconds;
        for (int k = 0; k < 8; k++) f[k] = ct_rng_uniform_double(&r);
    }
    memset(hb, 0, sizeof hb);
    float bp_a[64] = { 0 }, bs_a[16] = { 0 }, bp_b[64] = { 0 }, bs_b[16] = { 0 };   /* padding stays zero, as in the model */
    for (int h = 0; h < a.ps.n; h++)
        for (size_t i = 0; i < a.ps.p[h].numel; i++) bp_a[a.ps.p[h].offset + i] = ct_rng_uniform(&r);
    for (size_t i = 0; i < a.st.p[0].numel; i++) bs_a[i] = ct_rng_uniform(&r);
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 42);
    ct_rng_u32(&rngs.init);
    ct_ckpt_meta meta = { .model = "toy" };
    ct_kv_set_int(&meta.model_cfg, "hidden", 128);
    ct_kv_set_num(&meta.model_cfg, "margin", 0.75);
    ct_kv_set_str(&meta.model_cfg, "recurrent", "hard_sigmoid");
    ct_kv_set_num(&meta.train_cfg, "lr", 1e-3);
    ct_kv_set_str(&meta.train_cfg, "optimizer", "adam");
    ct_task ta = toy_task(&a), tb = toy_task(&b);
    ct_ckpt ca = { &meta, &a.ps, &a.st, &oa, { 3, 2, 0.125, 1.5, 7, 16, 1, CT_MONITOR_VAL_ACCURACY, 0.875, 2, 1 }, ha, 3,
                   bp_a, bs_a, &ta, &rngs };
    const char *path = tpath("round.h5");
    ct_status st = ct_ckpt_save(path, &ca);
    t_check(st == CT_OK, "save: %s", ct_last_error());
    ct_ckpt cb = { &meta, &b.ps, &b.st, &ob, { 0 }, hb, 3, bp_b, bs_b, &tb, NULL };
    st = ct_ckpt_load(path, &cb);
    t_check(st == CT_OK, "load: %s", ct_last_error());
    t_check(!memcmp(a.ps.data, b.ps.data, a.ps.numel * sizeof(float)), "parameters differ");
    t_check(!memcmp(a.st.data, b.st.data, a.st.numel * sizeof(float)), "state buffers differ");
    t_check(!memcmp(oa.m, ob.m, a.ps.numel * sizeof(float)) && !memcmp(oa.v, ob.v, a.ps.numel * sizeof(float)), "optimizer m/v differ");
    t_check(ob.step == 17, "optimizer step %ld", ob.step);
    const ct_ckpt_progress *pa = &ca.prog, *pb = &cb.prog;
    t_check(pa->epoch == pb->epoch && pa->step == pb->step && pa->lr == pb->lr && pa->sum_loss == pb->sum_loss
            && pa->sum_correct == pb->sum_correct && pa->seen == pb->seen && pa->skipped == pb->skipped && pa->monitor == pb->monitor
            && pa->best == pb->best && pa->best_epoch == pb->best_epoch && pa->wait == pb->wait,
            "progress differs (epoch %d step %ld best %g wait %d)", pb->epoch, pb->step, pb->best, pb->wait);
    t_check(!memcmp(ha, hb, sizeof ha), "history differs");
    t_check(!memcmp(bp_a, bp_b, a.ps.numel * sizeof(float)) && !memcmp(bs_a, bs_b, a.st.numel * sizeof(float)), "best weights differ");
    t_check(a.data.state == b.data.state && a.data.inc == b.data.inc && a.counter == b.counter
            && !memcmp(a.order, b.order, sizeof a.order), "task state differs");
    ct_ckpt_meta m2;
    st = ct_ckpt_read_meta(path, &m2);
    const char *s1 = NULL, *s2 = NULL;
    int hidden = 0; float margin = 0, lr = 0;
    t_check(st == CT_OK && !strcmp(m2.model, "toy") && ct_kv_int(&m2.model_cfg, "hidden", &hidden) && hidden == 128
            && ct_kv_float(&m2.model_cfg, "margin", &margin) && margin == 0.75f
            && ct_kv_str(&m2.model_cfg, "recurrent", &s1) && !strcmp(s1, "hard_sigmoid")
            && ct_kv_float(&m2.train_cfg, "lr", &lr) && lr == 1e-3f && ct_kv_str(&m2.train_cfg, "optimizer", &s2) && !strcmp(s2, "adam"),
            "configuration did not round-trip: %s", ct_last_error());
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    uint64_t v[2] = { 0, 0 };
    hid_t d = f >= 0 ? H5Dopen2(f, "rng/init", H5P_DEFAULT) : -1;
    t_check(d >= 0 && H5Dread(d, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0 && v[0] == rngs.init.state && v[1] == rngs.init.inc,
            "/rng/init is not the caller's init stream");
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);

    /* a checkpoint missing one piece: the load fails and nothing changes */
    const char *broken = tpath("broken.h5");
    long n;
    unsigned char *bytes = read_all(path, &n);
    write_all(broken, bytes, n);
    free(bytes);
    f = H5Fopen(broken, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f >= 0) { H5Ldelete(f, "data/order", H5P_DEFAULT); H5Fclose(f); }
    for (size_t i = 0; i < b.ps.numel; i++) b.ps.data[i] = -7.0f;
    ob.step = -3;
    cb.prog.epoch = -9;
    st = ct_ckpt_load(broken, &cb);
    t_check(st != CT_OK && strstr(ct_last_error(), "data/order"), "a checkpoint without /data/order must fail naming it: %s", ct_last_error());
    int untouched = ob.step == -3 && cb.prog.epoch == -9;
    for (size_t i = 0; i < b.ps.numel; i++) untouched &= b.ps.data[i] == -7.0f;
    t_check(untouched, "a failed load changed the model, optimizer or progress");
    ct_optim_free(&oa); ct_optim_free(&ob);
    ct_params_free(&a.ps); ct_params_free(&a.st); ct_params_free(&b.ps); ct_params_free(&b.st);
}

#define SIAM "train siamese-lstm --speakers 12 --utts 4 --pairs 64 --val-pairs 32 --batch 16 --frames 10 --mels 6 --hidden 8 --embed 4 --no-progress"
#define CNN  "train small-cnn --samples 64 --val-samples 32 --size 8 --filters 4 --batch 16 --no-progress"
/* the spec CNN on the first 64 Fashion-MNIST images, with batchnorm and dropout in it */
#define FCNN "train cnn --data fashion-mnist --samples 64 --val-samples 32 --batch 16 --no-progress " \
             "--arch conv4k3,batchnorm,relu,maxpool2,dropout0.25,flatten,dense10"
static char out1[1 << 16], out2[1 << 16], out3[1 << 16];
static char la[1 << 14], lb[1 << 14];

static void case_resume(const char *model, const char *base, int threads)
{
    char args[1024], why[256] = "";
    const char *full = tpath("full.h5"), *part = tpath("part.h5"), *mid = tpath("mid.h5");
    unlink(full); unlink(part); unlink(mid);
    t_case("checkpoint/%s: one run of 3 epochs (%d thread%s)", model, threads, threads > 1 ? "s" : "");
    snprintf(args, sizeof args, "%s --epochs 3 --threads %d --checkpoint %s", base, threads, full);
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "full run exit %d: %s", rc, out1);
    la[0] = '\0';
    epoch_lines(out1, la, sizeof la);
    if (threads == 1) {
    t_case("checkpoint/%s: stop after 1 epoch + resume == one run (%d thread%s)", model, threads, threads > 1 ? "s" : "");
    /* siamese: a run of --epochs 1 continued with --epochs 3; small-cnn: --stop-after-steps at the epoch's end */
    if (!strcmp(model, "siamese-lstm")) snprintf(args, sizeof args, "%s --epochs 1 --threads %d --checkpoint %s", base, threads, part);
    else snprintf(args, sizeof args, "%s --epochs 3 --stop-after-steps 4 --threads %d --checkpoint %s", base, threads, part);
    rc = run(args, out2, sizeof out2);
    t_check(rc == 0, "first part exit %d: %s", rc, out2);
    snprintf(args, sizeof args, "train %s --resume %s --epochs 3 --threads %d --no-progress --checkpoint %s", model, part, threads, part);
    rc = run(args, out3, sizeof out3);
    t_check(rc == 0 && strstr(out3, "Resuming from"), "resumed run exit %d: %s", rc, out3);
    t_check(ckpt_same(full, part, why, sizeof why), "final checkpoints differ: %s", why);
    lb[0] = '\0';
    epoch_lines(out2, lb, sizeof lb);
    epoch_lines(out3, lb, sizeof lb);
    t_check(!strcmp(la, lb) && strlen(la) > 20, "log lines differ:\none run:\n%sstopped and resumed:\n%s", la, lb);
    }

    t_case("checkpoint/%s: stop inside an epoch (--checkpoint-every) + resume == one run (%d thread%s)", model, threads, threads > 1 ? "s" : "");
    snprintf(args, sizeof args, "%s --epochs 3 --checkpoint-every 3 --stop-after-steps 6 --threads %d --checkpoint %s", base, threads, mid);
    rc = run(args, out2, sizeof out2);
    int e = -1; long s = -1;
    t_check(rc == 0 && strstr(out2, "Stopped after 6 batches"), "interrupted run exit %d: %s", rc, out2);
    t_check(ct_ckpt_verify(mid, &e, &s) == CT_OK && e == 1 && s == 2, "the checkpoint should stand at epoch 2 after batch 2 (epoch %d step %ld): %s",
            e, s, ct_last_error());
    snprintf(args, sizeof args, "train %s --resume %s --threads %d --no-progress --checkpoint %s", model, mid, threads, mid);
    rc = run(args, out3, sizeof out3);
    t_check(rc == 0 && strstr(out3, "Resuming from") && strstr(out3, "after batch 2"), "resumed run exit %d: %s", rc, out3);
    t_check(ckpt_same(full, mid, why, sizeof why), "final checkpoints differ: %s", why);
    lb[0] = '\0';
    epoch_lines(out2, lb, sizeof lb);
    epoch_lines(out3, lb, sizeof lb);
    t_check(!strcmp(la, lb), "log lines differ:\none run:\n%sstopped and resumed:\n%s", la, lb);
}

/* The checkpoint records the GPU's options (--tf32, --deterministic) so that a run resumed on a
 * GPU sums as the uninterrupted one did (cli/common.c; run on a GPU by scripts/gpu-resume.sh);
 * resumed on the CPU, a checkpoint that has them set is taken as it is, not refused. */
static void case_gpu_options_recorded(void)
{
    const char *ck = tpath("gpuopts.h5");
    char args[1024];
    unlink(ck);
    t_case("checkpoint/--tf32 and --deterministic recorded (0 on the CPU); set in a checkpoint, its CPU resume goes on");
    snprintf(args, sizeof args, "%s --epochs 2 --stop-after-steps 3 --threads 1 --checkpoint %s", CNN, ck);
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "first part exit %d: %s", rc, out1);
    hid_t f = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    const char *keys[] = { "tf32", "deterministic" };
    for (int k = 0; k < 2; k++) {
        long long v = -1, one = 1;
        hid_t a = f >= 0 ? H5Aopen_by_name(f, "training", keys[k], H5P_DEFAULT, H5P_DEFAULT) : -1;
        t_check(a >= 0 && H5Aread(a, H5T_NATIVE_LLONG, &v) >= 0 && v == 0, "/training attribute %s: %lld (want 0)", keys[k], v);
        if (a >= 0) H5Aclose(a);
        /* replaced, not rewritten: HDF5 1.10 fails to rewrite an attribute kept in dense storage */
        hid_t s = H5Screate(H5S_SCALAR);
        a = f >= 0 && H5Adelete_by_name(f, "training", keys[k], H5P_DEFAULT) >= 0
            ? H5Acreate_by_name(f, "training", keys[k], H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
        t_check(a >= 0 && H5Awrite(a, H5T_NATIVE_LLONG, &one) >= 0, "cannot set /training attribute %s", keys[k]);
        if (a >= 0) H5Aclose(a);
        H5Sclose(s);
    }
    if (f >= 0) H5Fclose(f);
    snprintf(args, sizeof args, "train small-cnn --resume %s --threads 1 --no-progress", ck);
    rc = run(args, out2, sizeof out2);
    t_check(rc == 0 && strstr(out2, "Resuming from") && strstr(out2, "Epoch 2/2"), "the CPU resume of a checkpoint with the GPU options set: exit %d: %s", rc, out2);
}

/* Pairs drawn every epoch (the default) or once (--fixed-pairs): a checkpoint records which,
 * resumes only that way, and one from before the choice (no fixed_pairs attribute, no
 * /data/pairs_epoch) resumes with its pairs drawn once, bit-identical to one run. */
static void case_pair_modes(void)
{
    char args[1024], why[256] = "";
    const char *full = tpath("fixed-full.h5"), *old = tpath("fixed-old.h5"), *fresh = tpath("fresh-mid.h5");
    unlink(full); unlink(old); unlink(fresh);
    t_case("checkpoint/siamese-lstm: a checkpoint from before --fixed-pairs resumes with its pairs drawn once; a mode "
           "the checkpoint was not made with is one line");
    snprintf(args, sizeof args, "%s --fixed-pairs --epochs 3 --threads 1 --checkpoint %s", SIAM, full);
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "full run exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "%s --fixed-pairs --epochs 3 --checkpoint-every 3 --stop-after-steps 6 --threads 1 --checkpoint %s", SIAM, old);
    rc = run(args, out2, sizeof out2);
    t_check(rc == 0, "first part exit %d: %s", rc, out2);
    hid_t f = H5Fopen(old, H5F_ACC_RDWR, H5P_DEFAULT);
    t_check(f >= 0 && H5Adelete_by_name(f, "training", "fixed_pairs", H5P_DEFAULT) >= 0 && !ct_h5_exists(f, "data/pairs_epoch"),
            "cannot make the checkpoint look older (no /training fixed_pairs), or it has /data/pairs_epoch");
    if (f >= 0) H5Fclose(f);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --threads 1 --no-progress --checkpoint %s", old, old);
    rc = run(args, out3, sizeof out3);
    t_check(rc == 0 && strstr(out3, "after batch 2"), "resuming the older checkpoint: exit %d: %s", rc, out3);
    t_check(ckpt_same(full, old, why, sizeof why), "the older checkpoint's resume differs from one run: %s", why);

    snprintf(args, sizeof args, "%s --epochs 3 --checkpoint-every 3 --stop-after-steps 6 --threads 1 --checkpoint %s", SIAM, fresh);
    rc = run(args, out2, sizeof out2);
    t_check(rc == 0, "first part exit %d: %s", rc, out2);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --fixed-pairs --threads 1 --no-progress", fresh);
    rc = run(args, out3, sizeof out3);
    t_check(rc == 1 && strstr(out3, "resume it without --fixed-pairs"), "resuming per-epoch pairs with --fixed-pairs: exit %d: %s", rc, out3);
    f = H5Fopen(fresh, H5F_ACC_RDWR, H5P_DEFAULT);
    t_check(f >= 0 && H5Ldelete(f, "data/pairs_epoch", H5P_DEFAULT) >= 0, "cannot delete /data/pairs_epoch");
    if (f >= 0) H5Fclose(f);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --threads 1 --no-progress", fresh);
    rc = run(args, out3, sizeof out3);
    t_check(rc == 1 && strstr(out3, "resume it with --fixed-pairs"), "per-epoch pairs without /data/pairs_epoch: exit %d: %s", rc, out3);
    snprintf(args, sizeof args, "%s --fixed-pairs --epochs 1", CNN);
    rc = run(args, out3, sizeof out3);
    t_check(rc == 2 && strstr(out3, "--fixed-pairs is for the speaker models"), "small-cnn --fixed-pairs: exit %d: %s", rc, out3);
}

/* Count "<base>.tmp-*" files and other files in tdir. */
static void dir_census(const char *base, int *temps, int *others)
{
    *temps = *others = 0;
    DIR *d = opendir(tdir);
    struct dirent *de;
    size_t nb = strlen(base);
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (!strncmp(de->d_name, base, nb) && !strncmp(de->d_name + nb, ".tmp-", 5)) (*temps)++;
        else if (!strncmp(de->d_name, base, nb) && !strcmp(de->d_name + nb, ".lock")) { }   /* a killed run's lock (io/lock.h) */
        else if (strcmp(de->d_name, base) != 0) (*others)++;
    }
    if (d) closedir(d);
}

static int finished_ok(const char *path)
{
    int e = -1;
    return ct_ckpt_verify(path, &e, NULL) == CT_OK && e == 4;
}

static void case_kill_loop(void)
{
    t_case("checkpoint/kill -9 at 20 random moments: always a whole checkpoint; resuming each time ends bit-identical");
    const char *ref = tpath("ref.h5"), *ck = tpath("killed.h5");
    char args[1024], why[256] = "";
    const char *sz = "--pairs 128 --epochs 4 --checkpoint-every 2 --threads 1";
    snprintf(args, sizeof args, "%s %s --checkpoint %s", SIAM, sz, ref);
    double t0 = ct_now();
    int rc = run(args, out1, sizeof out1);
    double span = ct_now() - t0;
    t_check(rc == 0, "reference run exit %d: %s", rc, out1);
    t_check(finished_ok(ref), "the reference run's checkpoint is not at epoch 4");
    /* the killed runs live in their own directory so the census sees only them */
    char saved[64];
    snprintf(saved, sizeof saved, "%s", tdir);
    snprintf(tdir + strlen(tdir), sizeof tdir - strlen(tdir), "/kill");
    mkdir(tdir, 0700);
    ck = tpath("killed.h5");
    unlink(ck);
    ct_rng r;
    ct_rng_seed(&r, (uint64_t)time(NULL), 11);
    int whole = 0, absent = 0, finished = 0, restarts = 0, last_e = 0;
    long last_s = 0;
    for (int k = 0; k < 20; k++) {
        int e0 = -1;
        if (file_size(ck) > 0 && ct_ckpt_verify(ck, &e0, NULL) == CT_OK && e0 >= 4) { unlink(ck); restarts++; last_e = 0; last_s = 0; }   /* finished: start over */
        int have = file_size(ck) > 0;
        if (have) snprintf(args, sizeof args, "cd '%s' && exec %s %s %s --checkpoint %s --resume %s >/dev/null 2>&1", t_scratch_dir(),
                           t_ctrain_bin(), SIAM, sz, ck, ck);
        else snprintf(args, sizeof args, "cd '%s' && exec %s %s %s --checkpoint %s >/dev/null 2>&1", t_scratch_dir(), t_ctrain_bin(),
                      SIAM, sz, ck);
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) { setenv("ASAN_OPTIONS", "detect_leaks=0", 1); execl("/bin/sh", "sh", "-c", args, (char *)NULL); _exit(127); }
        double delay = span * (0.05 + 0.75 * ct_rng_uniform_double(&r));
        struct timespec ts = { (time_t)delay, (long)((delay - (double)(time_t)delay) * 1e9) };
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) finished++;
        if (file_size(ck) < 0) { absent++; last_e = 0; last_s = 0; continue; }
        int e = -1; long s = -1;
        ct_status st = ct_ckpt_verify(ck, &e, &s);
        if (!t_check(st == CT_OK, "after kill %d the checkpoint is not whole: %s", k + 1, ct_last_error())) break;
        t_check(e > last_e || (e == last_e && s >= last_s), "after kill %d the checkpoint went back from (%d, %ld) to (%d, %ld)", k + 1, last_e, last_s, e, s);
        last_e = e; last_s = s;
        whole++;
        int temps, others;
        dir_census("killed.h5", &temps, &others);
        t_check(others == 0 && temps <= 1, "after kill %d: %d stray files, %d temp files", k + 1, others, temps);
    }
    printf("  kill loop: 20 kills; checkpoint whole after %d, not yet written after %d; the run had finished %d times (%d fresh starts)\n",
           whole, absent, finished, restarts);
    snprintf(args, sizeof args, "%s %s --checkpoint %s%s%s", SIAM, sz, ck, file_size(ck) > 0 ? " --resume " : "", file_size(ck) > 0 ? ck : "");
    rc = run(args, out2, sizeof out2);
    t_check(rc == 0, "final resumed run exit %d: %s", rc, out2);
    t_check(ckpt_same(ref, ck, why, sizeof why), "after 20 kills and resumes the result differs from one run: %s", why);
    int temps, others;
    dir_census("killed.h5", &temps, &others);
    t_check(temps == 0, "%d temp files of killed runs were left behind after a completed save", temps);
    unlink(ck);
    rmdir(tdir);
    snprintf(tdir, sizeof tdir, "%s", saved);
}

/* ---------------------------------------------------------------- SIGINT and SIGTERM */

/* In a child process (the signal flag cannot be cleared): the toy trained for 4 epochs with
 * the handler installed and SIGTERM raised where `how` says (-1: before ct_fit), checkpointing
 * to `path`. Exit 0 when ct_fit returned CT_EINTR, 1 otherwise, 2 when its log lacks `expect`. */
static int toy_interrupted(int how, int in_validation, const char *path, const char *expect)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        static char log[1 << 14];
        toy t;
        toy_init(&t, 0.25f);
        if (in_validation) t.sigterm_val = how; else t.sigterm_at = how;
        ct_interrupt_install();
        if (how < 0) raise(SIGTERM);
        ct_task task = toy_task(&t);
        ct_fit_config c = toy_fit(4);
        c.checkpoint = path;
        c.command = "toy";
        ct_status st = fit_capture(&task, &c, log, sizeof log);
        if (st == CT_EINTR && !strstr(log, expect)) { fprintf(stderr, "toy log lacks \"%s\": %s", expect, log); _exit(2); }
        _exit(st == CT_EINTR ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ct_fit itself: SIGTERM raised after a training batch, during a validation, and before the
 * first batch; each checkpoint resumed to the end equals one run (weights and history). */
static void case_signal_in_fit(void)
{
    t_case("checkpoint/ct_fit and SIGTERM: after a batch, during validation (redone on resume), before the first batch");
    toy ref;
    toy_init(&ref, 0.25f);
    ct_task tr = toy_task(&ref);
    ct_fit_config c = toy_fit(4);
    ct_epoch_log href[4];
    FILE *lf = tmpfile();
    t_check(lf && ct_fit(&tr, &c, href, lf) == CT_OK, "uninterrupted: %s", ct_last_error());
    if (lf) fclose(lf);
    static const struct { int how, in_validation; const char *expect; } when[] = {
        { 7, 0, "Interrupted by SIGTERM after batch 2 of epoch 2; checkpoint written to" },   /* 5 batches per epoch */
        { 2, 1, "Interrupted by SIGTERM after batch 5 of epoch 2; checkpoint written to" },   /* validating epoch 2 */
        { 5, 0, "Interrupted by SIGTERM after batch 5 of epoch 1; checkpoint written to" },   /* the epoch's last batch */
    };
    for (size_t k = 0; k < sizeof when / sizeof when[0]; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s/toy-sig-%zu.h5", tdir, k);
        unlink(path);
        int rc = toy_interrupted(when[k].how, when[k].in_validation, path, when[k].expect);
        if (!t_check(rc == 0, "case %zu: the child exited %d (0: CT_EINTR with the expected line)", k, rc)) continue;
        toy t;
        toy_init(&t, 0.0f);   /* other weights: the checkpoint must bring them */
        ct_task tt = toy_task(&t);
        ct_fit_config cr = toy_fit(4);
        cr.resume = path;
        ct_epoch_log h[4];
        memset(h, 0, sizeof h);
        FILE *f = tmpfile();
        ct_status st = ct_fit(&tt, &cr, h, f);
        if (f) fclose(f);
        t_check(st == CT_OK, "case %zu: resuming: %s", k, ct_last_error());
        t_check(!memcmp(t.ps.data, ref.ps.data, ref.ps.numel * sizeof(float)), "case %zu: the weights differ from one run", k);
        int same = 1;
        for (int e = 0; e < 4; e++)
            same &= h[e].loss == href[e].loss && h[e].val_loss == href[e].val_loss && h[e].accuracy == href[e].accuracy;
        t_check(same, "case %zu: the history differs from one run", k);
        ct_params_free(&t.ps); ct_params_free(&t.st);
        unlink(path);
    }
    char path[256];
    snprintf(path, sizeof path, "%s/toy-sig-first.h5", tdir);
    unlink(path);
    int rc = toy_interrupted(-1, 0, path, "Interrupted by SIGTERM before the first batch; nothing trained, nothing written");
    t_check(rc == 0 && file_size(path) < 0, "before the first batch: exit %d, checkpoint %s", rc, file_size(path) < 0 ? "absent" : "written");
    ct_params_free(&ref.ps); ct_params_free(&ref.st);
}

/* Starts `ctrain ARGS` in the background, stdout and stderr into `log`; returns its pid. */
static pid_t start_logged(const char *args, const char *log)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && exec %s %s >%s 2>&1", t_scratch_dir(), t_ctrain_bin(), args, log);
    unlink(log);   /* the poll must not see an earlier run's log */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) { execl("/bin/sh", "sh", "-c", cmd, (char *)NULL); _exit(127); }
    return pid;
}

/* Waits until `log` holds `text` (1); 0 when the process ended first (its wait status in
 * *status, *reaped = 1) or after 120 s. Polls every 5 ms: no fixed sleep to guess. */
static int wait_log(pid_t pid, const char *log, const char *text, int *status, int *reaped)
{
    for (int i = 0; i < 24000; i++) {
        long n;
        unsigned char *b = read_all(log, &n);
        int hit = b && strstr((const char *)b, text);
        free(b);
        if (hit) return 1;
        if (!*reaped && waitpid(pid, status, WNOHANG) == pid) *reaped = 1;
        else if (*reaped) return 0;
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* The exit status of the process (waiting for it unless wait_log reaped it); 128 + signal when killed. */
static int exit_of(pid_t pid, int status, int reaped)
{
    if (!reaped) waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* Every dataset of two weights files bit for bit. */
static int weights_same(const char *a, const char *b, char *why, size_t n) { return h5_same(a, b, why, n, 4, 0); }

#define SIG_RUN "train siamese-lstm --speakers 12 --utts 4 --pairs 3072 --val-pairs 64 --batch 32 --frames 50 --mels 20 " \
                "--hidden 64 --embed 8 --threads 1 --epochs 4"

static void case_signals(void)
{
    char args[2048], why[256] = "";
    char log[256], ref[256], refw[256], ck[256], w[256], w2[256], beside[256], keep[256], copy[256], tj[256], cw[256];
    snprintf(log, sizeof log, "%s/sig.log", tdir);
    snprintf(ref, sizeof ref, "%s/sig-ref.h5", tdir);
    snprintf(refw, sizeof refw, "%s/sig-ref-w.h5", tdir);
    snprintf(ck, sizeof ck, "%s/sig.h5", tdir);
    snprintf(w, sizeof w, "%s/sig-w.h5", tdir);
    snprintf(w2, sizeof w2, "%s/sig2.h5", tdir);
    snprintf(beside, sizeof beside, "%s/sig2-interrupted.h5", tdir);
    snprintf(keep, sizeof keep, "%s/sig-keep.h5", tdir);
    snprintf(copy, sizeof copy, "%s/sig-copy.h5", tdir);
    snprintf(tj, sizeof tj, "%s/sig-time.json", tdir);
    snprintf(cw, sizeof cw, "%s/sig-cnn.h5", tdir);

    t_case("checkpoint/SIGTERM during training: exit 143, a checkpoint, and its resume command ends bit-identical to one run");
    snprintf(args, sizeof args, "%s --checkpoint %s --out %s", SIG_RUN, ref, refw);
    double t0 = ct_now();
    int rc = run(args, out1, sizeof out1);
    double span = ct_now() - t0;
    t_check(rc == 0, "uninterrupted run exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "%s --checkpoint %s --out %s", SIG_RUN, ck, w);
    int status = 0, reaped = 0;
    pid_t pid = start_logged(args, log);
    int started = wait_log(pid, log, "Epoch 2/4", &status, &reaped);   /* training has begun: one epoch done */
    if (started) kill(pid, SIGTERM);
    rc = exit_of(pid, status, reaped);
    long n = 0;
    char *text = (char *)read_all(log, &n);
    t_check(started && rc == 143, "exit %d (143 expected; the uninterrupted run took %.1f s): %s", rc, span, text ? text : "");
    const char *line = text ? strstr(text, "Interrupted by SIGTERM") : NULL, *cmd = line ? strstr(line, "resume with: ") : NULL;
    t_check(line && cmd && strstr(line, ck), "no line naming the checkpoint and the command: %s", text ? text : "");
    t_check(file_size(w) < 0, "--out was written by an interrupted run");
    int e = -1; long s = -1;
    t_check(ct_ckpt_verify(ck, &e, &s) == CT_OK, "the checkpoint: %s", ct_last_error());
    if (cmd) {
        char resume[2048];
        snprintf(resume, sizeof resume, "cd '%s' && %.*s 2>&1", t_scratch_dir(), (int)strcspn(cmd + 13, "\n"), cmd + 13);
        FILE *pp = popen(resume, "r");
        size_t got = pp ? fread(out2, 1, sizeof out2 - 1, pp) : 0;
        out2[got] = '\0';
        int st = pp ? pclose(pp) : -1;
        t_check(st == 0 && strstr(out2, "Resuming from"), "the printed command (%s) exit %d: %s", resume, st, out2);
        t_check(ckpt_same(ref, ck, why, sizeof why), "interrupted at epoch %d, batch %ld, and resumed: the checkpoints differ: %s",
                e + 1, s, why);
        t_check(weights_same(refw, w, why, sizeof why), "the weights differ from the uninterrupted run's: %s", why);
        printf("  SIGTERM at epoch %d after batch %ld; resumed to the end\n", e + 1, s);
    }
    free(text);

    t_case("checkpoint/SIGINT: exit 130; with neither --checkpoint nor a run directory the checkpoint goes beside --out, and --out is not written");
    unlink(beside);
    snprintf(args, sizeof args, "%s --out %s --no-run-dir", SIG_RUN, w2);
    status = 0; reaped = 0;
    pid = start_logged(args, log);
    started = wait_log(pid, log, "Epoch 1/4", &status, &reaped);
    if (started) kill(pid, SIGINT);
    rc = exit_of(pid, status, reaped);
    text = (char *)read_all(log, &n);
    t_check(started && rc == 130, "exit %d (130 expected): %s", rc, text ? text : "");
    t_check(text && strstr(text, "Interrupted by SIGINT") && strstr(text, beside) && strstr(text, "--resume"),
            "the line should name %s and the command: %s", beside, text ? text : "");
    t_check(ct_ckpt_verify(beside, &e, &s) == CT_OK, "%s: %s", beside, ct_last_error());
    t_check(file_size(w2) < 0, "--out was written by an interrupted run");
    free(text);

    t_case("checkpoint/a second signal exits at once: the checkpoint on disk untouched, no temp file, no resume line");
    long nb = 0;
    unsigned char *bytes = read_all(ref, &nb);
    t_check(bytes && write_all(keep, bytes, nb) && write_all(copy, bytes, nb), "cannot copy %s", ref);
    free(bytes);
    snprintf(args, sizeof args, "%s --checkpoint %s", SIG_RUN, keep);
    status = 0; reaped = 0;
    pid = start_logged(args, log);
    started = wait_log(pid, log, "Epoch 1/4", &status, &reaped);
    if (started) {   /* both signals pending before it runs again: the second one finds the first being handled */
        kill(pid, SIGSTOP);
        kill(pid, SIGINT);
        kill(pid, SIGTERM);
        kill(pid, SIGCONT);
    }
    rc = exit_of(pid, status, reaped);
    text = (char *)read_all(log, &n);
    t_check(started && (rc == 130 || rc == 143) && text && strstr(text, "exited at once") && !strstr(text, "resume with"),
            "exit %d: %s", rc, text ? text : "");
    t_check(same_bytes(keep, copy), "the checkpoint on disk changed");
    int temps, others;
    dir_census("sig-keep.h5", &temps, &others);
    t_check(temps == 0, "%d temp files left beside the checkpoint", temps);
    free(text);

    t_case("checkpoint/ctrain time and eval stop on a signal with its exit status, writing nothing");
    snprintf(args, sizeof args, "time cnn --protocol smoke --epochs 1000 --samples 256 --val-samples 0 --device cpu --threads 1 "
             "--verbose --json %s", tj);
    status = 0; reaped = 0;
    pid = start_logged(args, log);
    started = wait_log(pid, log, "Epoch 2/1000", &status, &reaped);
    if (started) kill(pid, SIGINT);
    rc = exit_of(pid, status, reaped);
    text = (char *)read_all(log, &n);
    t_check(started && rc == 130 && text && strstr(text, "interrupted by SIGINT; no table or file written") && !strstr(text, "seconds per epoch"),
            "time: exit %d: %s", rc, text ? text : "");
    t_check(file_size(tj) < 0, "time wrote %s", tj);
    free(text);
    snprintf(args, sizeof args, "train cnn --data fashion-mnist --samples 64 --val-samples 0 --epochs 1 --batch 16 --threads 1 "
             "--arch conv32k3,relu,conv32k3,relu,flatten,dense10 --out %s", cw);   /* about 3 s to evaluate at --batch 1 */
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training the cnn to evaluate: exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "eval cnn --weights %s --data fashion-mnist --batch 1 --threads 1", cw);
    status = 0; reaped = 0;
    pid = start_logged(args, log);
    started = wait_log(pid, log, "test images", &status, &reaped);   /* the Data: line, printed before the evaluation */
    if (started) kill(pid, SIGTERM);
    rc = exit_of(pid, status, reaped);
    text = (char *)read_all(log, &n);
    t_check(started && rc == 143 && text && strstr(text, "interrupted by SIGTERM; nothing written") && !strstr(text, "test accuracy"),
            "eval: exit %d: %s", rc, text ? text : "");
    free(text);
    unlink(ref); unlink(refw); unlink(ck); unlink(w); unlink(w2); unlink(beside); unlink(keep); unlink(copy); unlink(log); unlink(cw);
}

/* A bad --resume: non-zero exit, the message contains `expect`, training never started. */
static void expect_refused(const char *what, const char *args, const char *expect)
{
    int rc = run(args, out1, sizeof out1);
    t_check(rc != 0 && rc < 128, "%s: exit %d (must fail cleanly): %s", what, rc, out1);
    t_check(strstr(out1, expect) != NULL, "%s: message lacks \"%s\": %s", what, expect, out1);
    t_check(strstr(out1, "Epoch 1/") == NULL && strstr(out1, "Epoch 2/") == NULL && strstr(out1, "Train on") == NULL,
            "%s: training started: %s", what, out1);
}

/* The same checks at the library level: ct_ckpt_verify and ct_ckpt_read_meta refuse the file. */
static void expect_file_refused(const char *what, const char *path, const char *expect)
{
    ct_ckpt_meta m;
    ct_status st = ct_ckpt_verify(path, NULL, NULL);
    t_check(st != CT_OK && strstr(ct_last_error(), expect), "%s: ct_ckpt_verify: %s", what, ct_last_error());
    st = ct_ckpt_read_meta(path, &m);
    t_check(st != CT_OK || strstr(expect, "checksum"), "%s: ct_ckpt_read_meta accepted it", what);
}

static void case_bad_input(void)
{
    char args[1024];
    const char *good = tpath("good.h5"), *copy = tpath("good_copy.h5"), *bad = tpath("bad.h5"), *cnn = tpath("cnn.h5"), *w = tpath("w.h5");
    snprintf(args, sizeof args, "%s --epochs 1 --threads 1 --checkpoint %s --out %s", SIAM, good, w);
    int rc = run(args, out1, sizeof out1);
    t_case("checkpoint/bad input: truncated, corrupt, another model or shape, newer format, weights file");
    t_check(rc == 0, "making a checkpoint: exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "%s --epochs 1 --threads 1 --checkpoint %s", CNN, cnn);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "making a small-cnn checkpoint: exit %d: %s", rc, out1);
    long n;
    unsigned char *bytes = read_all(good, &n);
    if (!t_check(bytes != NULL && n > 1000, "cannot read %s", good)) return;
    write_all(copy, bytes, n);

    write_all(bad, bytes, n / 2);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --epochs 2 --threads 1", bad);
    expect_refused("truncated", args, "truncated or corrupt");
    write_all(bad, bytes, 100);
    expect_file_refused("truncated to 100 bytes", bad, "truncated or corrupt");

    /* flip bytes inside the LSTM's input weights (found by their values in the file) */
    float wih[4], all[32 * 6];
    hid_t f = H5Fopen(good, H5F_ACC_RDONLY, H5P_DEFAULT);
    int found = f >= 0 && ct_h5_read_f32(f, "model/lstm_1/w_ih_l0", all, 32 * 6) == CT_OK;
    if (f >= 0) H5Fclose(f);
    memcpy(wih, all + 40, sizeof wih);
    unsigned char *hit = found ? memmem(bytes, (size_t)n, wih, sizeof wih) : NULL;
    t_check(hit != NULL, "could not find the weights' bytes in the file");
    if (hit) {
        unsigned char *c = malloc((size_t)n);
        memcpy(c, bytes, (size_t)n);
        c[hit - bytes + 5] ^= 0x5a;
        write_all(bad, c, n);
        free(c);
        expect_file_refused("corrupt weight bytes", bad, "checksum");
        expect_refused("corrupt weight bytes", args, "checksum");
    }
    /* flip bytes in the metadata near the start of the file */
    unsigned char *c = malloc((size_t)n);
    memcpy(c, bytes, (size_t)n);
    for (int k = 0; k < 8; k++) c[48 + k] ^= 0xff;
    write_all(bad, c, n);
    free(c);
    expect_file_refused("corrupt superblock", bad, "corrupt");

    snprintf(args, sizeof args, "train siamese-lstm --resume %s --threads 1", cnn);
    expect_refused("another model", args, "is a checkpoint of model small-cnn, not siamese-lstm");
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --hidden 16 --epochs 2 --threads 1", good);
    expect_refused("another shape", args, "lstm_1/w_ih_l0");
    snprintf(args, sizeof args, "train small-cnn --resume %s --filters 6 --epochs 2 --threads 1", cnn);
    expect_refused("another shape (cnn)", args, "conv2d_1/w");
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --pairs 48 --epochs 2 --threads 1", good);
    expect_refused("other data", args, "other --pairs");

    write_all(bad, bytes, n);
    f = H5Fopen(bad, H5F_ACC_RDWR, H5P_DEFAULT);
    long long v = 2;
    hid_t a = f >= 0 ? H5Aopen(f, "format_version", H5P_DEFAULT) : -1;
    t_check(a >= 0 && H5Awrite(a, H5T_NATIVE_LLONG, &v) >= 0, "could not edit format_version");
    if (a >= 0) H5Aclose(a);
    if (f >= 0) H5Fclose(f);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --epochs 2 --threads 1", bad);
    expect_refused("newer format_version", args, "written by a newer ctrain");
    expect_file_refused("a weights file", w, "is a weights file, not a checkpoint");
    expect_file_refused("a missing file", tpath("none.h5"), "cannot open");
    t_check(same_bytes(good, copy), "the good checkpoint changed");

    t_case("checkpoint/a read-only directory: clear error, previous checkpoint intact, no temp file");
    char rodir[300];
    snprintf(rodir, sizeof rodir, "%s/ro", tdir);
    mkdir(rodir, 0755);
    char ro[400];
    snprintf(ro, sizeof ro, "%s/run.h5", rodir);
    write_all(ro, bytes, n);
    chmod(ro, 0644);
    chmod(tdir, 0755);
    chmod(rodir, 0555);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --checkpoint %s --epochs 2 --threads 1 --no-run-dir", ro, ro);
    rc = spawn(args, out1, sizeof out1, 0, 1);   /* as nobody, who may not write a run directory either */
    t_check(rc == 1 && strstr(out1, "could not write checkpoint") && strstr(out1, "previous checkpoint is untouched"),
            "exit %d: %s", rc, out1);
    t_check(same_bytes(ro, copy), "the previous checkpoint changed");
    DIR *d = opendir(rodir);
    int files = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) files += de->d_name[0] != '.';
    if (d) closedir(d);
    t_check(files == 1, "%d files in the read-only directory (a temp file was left?)", files);
    chmod(rodir, 0755);
    unlink(ro);
    rmdir(rodir);

    t_case("checkpoint/a full disk (file size limit): clear error, previous checkpoint intact, no temp file");
    const char *full = tpath("fsz.h5");
    write_all(full, bytes, n);
    snprintf(args, sizeof args, "train siamese-lstm --resume %s --checkpoint %s --epochs 2 --threads 1", full, full);
    rc = spawn(args, out1, sizeof out1, 4096, 0);
    t_check(rc == 1 && strstr(out1, "could not write checkpoint") && strstr(out1, "previous checkpoint is untouched"),
            "exit %d: %s", rc, out1);
    t_check(same_bytes(full, copy), "the previous checkpoint changed");
    int temps, others;
    dir_census("fsz.h5", &temps, &others);
    t_check(temps == 0, "%d temp files left", temps);
    /* and the library call itself, in a child with a 2 KiB limit */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { 2048, 2048 };
        setrlimit(RLIMIT_FSIZE, &rl);
        toy t;
        toy_init(&t, 0.5f);
        ct_optim o;
        ct_optim_config oc = ct_optim_defaults(OPT_ADAM);
        ct_optim_init(&o, &oc, t.ps.numel);
        ct_epoch_log h[1];
        ct_task tt = toy_task(&t);
        ct_ckpt ck = { &toy_meta, &t.ps, &t.st, &o, { 0 }, h, 1, NULL, NULL, &tt, NULL };
        ct_status st = ct_ckpt_save(full, &ck);
        _exit(st != CT_OK && strstr(ct_last_error(), "previous checkpoint is untouched") ? 0 : 3);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    t_check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "ct_ckpt_save under a 2 KiB file size limit did not fail cleanly (status %d)", status);
    t_check(same_bytes(full, copy), "the previous checkpoint changed");
    free(bytes);
}

static void case_on_nan(void)
{
    char out[1 << 14];
    t_case("checkpoint/--on-nan stop names the epoch, the batch and the last good checkpoint");
    toy t;
    toy_init(&t, 0.5f);
    t.nan_loss[0] = 7;   /* epoch 2, batch 2 */
    ct_task task = toy_task(&t);
    ct_fit_config c = toy_fit(3);
    const char *ck = tpath("nan.h5");
    c.checkpoint = ck;
    c.checkpoint_every = 2;
    ct_status st = fit_capture(&task, &c, out, sizeof out);
    const char *msg = ct_last_error();
    t_check(st == CT_ENUMERIC && strstr(msg, "epoch 2, batch 2") && strstr(msg, ck) && strstr(msg, "epoch 2, after batch 1"),
            "status %d: %s", st, msg);
    int e = -1; long s = -1;
    t_check(ct_ckpt_verify(ck, &e, &s) == CT_OK && e == 1 && s == 1, "the last good checkpoint is not whole at (epoch 2, batch 1): %s", ct_last_error());
    ct_params_free(&t.ps); ct_params_free(&t.st);

    t_case("checkpoint/data that cannot be read stops training before that batch: its message, the epoch and batch, the last good checkpoint kept");
    toy_init(&t, 0.5f);
    t.fail_load_at = 7;   /* epoch 2, batch 2 */
    task = toy_task(&t);
    c = toy_fit(3);
    ck = tpath("readfail.h5");
    c.checkpoint = ck;
    c.checkpoint_every = 2;
    st = fit_capture(&task, &c, out, sizeof out);
    msg = ct_last_error();
    t_check(st == CT_EIO && strstr(msg, "id1/v/00001.wav") && strstr(msg, "training stopped at epoch 2, batch 2") && strstr(msg, ck)
            && strstr(msg, "epoch 2, after batch 1") && !strchr(msg, '\n'), "status %d: %s", st, msg);
    e = -1; s = -1;
    t_check(ct_ckpt_verify(ck, &e, &s) == CT_OK && e == 1 && s == 1, "the last good checkpoint is not whole at (epoch 2, batch 1): %s", ct_last_error());
    t_check(t.counter == 7, "%ld batches loaded: training went on after the failed one", t.counter);
    ct_params_free(&t.ps); ct_params_free(&t.st);

    t_case("checkpoint/--on-nan skip-batch skips non-finite batches, counts and reports them");
    toy_init(&t, 0.5f);
    t.nan_loss[0] = 3; t.nan_loss[1] = 4; t.nan_grad[0] = 8;
    task = toy_task(&t);
    c = toy_fit(2);
    c.on_nan = CT_NAN_SKIP_BATCH;
    st = fit_capture(&task, &c, out, sizeof out);
    t_check(st == CT_OK, "status %d: %s", st, ct_last_error());
    t_check(strstr(out, "Skipped 2 batches of epoch 1") && strstr(out, "Skipped 1 batch of epoch 2"), "no skip report: %s", out);
    /* 10 batches, 3 skipped: SGD applied 7 times, w <- w - lr (w - 1) */
    float w = 0.5f, maxerr = 0;
    for (int k = 0; k < 7; k++) w -= 0.1f * (w - 1.0f);
    for (int i = 0; i < 5; i++) maxerr = fmaxf(maxerr, fabsf(ct_params_data(&t.ps, 0)[i] - w));
    t_check(maxerr < 1e-6f, "weights %g, expected %g after 7 applied updates", ct_params_data(&t.ps, 0)[0], w);
    t_check(isfinite(ct_params_data(&t.ps, 0)[0]), "a NaN reached the weights");
    ct_params_free(&t.ps); ct_params_free(&t.st);
}

static void case_callbacks(void)
{
    char out[1 << 14];
    static const double script[] = { 0.5, 0.4, 0.45, 0.3, 0.35, 0.36, 0.37, 0.2, 0.1, 0.1 };
    t_case("checkpoint/--early-stopping stops after PATIENCE epochs and restores the best weights");
    toy t;
    toy_init(&t, 0.5f);
    t.script = script;
    ct_task task = toy_task(&t);
    ct_fit_config c = toy_fit(10);
    c.early_stopping = 3;
    c.save_best = tpath("best.h5");
    ct_status st = fit_capture(&task, &c, out, sizeof out);
    t_check(st == CT_OK, "status %d: %s", st, ct_last_error());
    t_check(strstr(out, "Epoch 7: early stopping") && !strstr(out, "Epoch 8/10"), "should stop after epoch 7: %s", out);
    t_check(strstr(out, "Restoring model weights from the end of the best epoch: 4") != NULL, "no restore message: %s", out);
    t_check(!memcmp(ct_params_data(&t.ps, 0), t.snap[3], 5 * sizeof(float)) && ct_params_data(&t.ps, 1)[0] == t.snap[3][5],
            "weights are not epoch 4's");
    t_check(strstr(out, "Epoch 1: val_loss improved from inf to 0.50000, saving model to") && strstr(out, "Epoch 3: val_loss did not improve from 0.40000")
            && strstr(out, "Epoch 4: val_loss improved from 0.40000 to 0.30000"), "save-best messages: %s", out);
    int e = -1;
    float wb[5] = { 0 };
    hid_t f = H5Fopen(c.save_best, H5F_ACC_RDONLY, H5P_DEFAULT);
    t_check(ct_ckpt_verify(c.save_best, &e, NULL) == CT_OK && e == 4, "--save-best file should hold epoch 4 (holds %d): %s", e, ct_last_error());
    t_check(f >= 0 && ct_h5_read_f32(f, "model/toy/w", wb, 5) == CT_OK && !memcmp(wb, t.snap[3], sizeof wb), "--save-best weights are not epoch 4's");
    if (f >= 0) H5Fclose(f);
    ct_params_free(&t.ps); ct_params_free(&t.st);

    t_case("checkpoint/the best weights are restored even when training runs to the end; max mode for accuracy");
    static const double up[] = { 0.125, 0.625, 0.375, 0.25 };   /* val_accuracy: best is epoch 2 */
    toy_init(&t, 0.5f);
    t.acc = up;
    task = toy_task(&t);
    c = toy_fit(4);
    c.early_stopping = 5;
    c.monitor = CT_MONITOR_VAL_ACCURACY;
    st = fit_capture(&task, &c, out, sizeof out);
    t_check(st == CT_OK && strstr(out, "best epoch: 2 (val_accuracy 0.6250)") && strstr(out, "Epoch 4/4") && !strstr(out, "early stopping ("),
            "max mode: %s", out);
    t_check(!memcmp(ct_params_data(&t.ps, 0), t.snap[1], 5 * sizeof(float)), "weights are not epoch 2's");
    ct_params_free(&t.ps); ct_params_free(&t.st);
    ct_monitor m;
    t_check(ct_monitor_parse(&m, "val_accuracy") == CT_OK && m == CT_MONITOR_VAL_ACCURACY
            && ct_monitor_parse(&m, "val_auc") != CT_OK && strstr(ct_last_error(), "val_loss, val_accuracy"), "--monitor parsing");

    t_case("checkpoint/--csv writes a header and a row per epoch, and appends on resume without a second header");
    const char *csv = tpath("hist.csv"), *ck = tpath("csv.h5");
    toy_init(&t, 0.5f);
    task = toy_task(&t);
    c = toy_fit(2);
    c.csv = csv;
    c.checkpoint = ck;
    st = fit_capture(&task, &c, out, sizeof out);
    t_check(st == CT_OK, "first part: %s", ct_last_error());
    FILE *fp = fopen(csv, "a");      /* a row written after the checkpoint by a run that then died */
    if (fp) { fputs("3,9,9,9,9,,9,9,9\n", fp); fclose(fp); }
    ct_params_free(&t.ps); ct_params_free(&t.st);
    toy_init(&t, 0.5f);
    task = toy_task(&t);
    c = toy_fit(4);
    c.csv = csv;
    c.checkpoint = ck;
    c.resume = ck;
    st = fit_capture(&task, &c, out, sizeof out);
    t_check(st == CT_OK, "resumed part: %s", ct_last_error());
    long n;
    char *text = (char *)read_all(csv, &n);
    int lines = 0, headers = 0, order_ok = 1, expect = 1;
    for (char *p = text; p && *p; ) {
        char *e2 = strchr(p, '\n');
        if (!strncmp(p, "epoch,loss,accuracy,val_loss,val_accuracy,val_eer,seconds", 57)) headers++;
        else { if (atoi(p) != expect++) order_ok = 0; }
        lines++;
        p = e2 ? e2 + 1 : p + strlen(p);
    }
    t_check(headers == 1 && lines == 5 && order_ok, "CSV should be a header and rows 1..4 (%d headers, %d lines):\n%s", headers, lines, text ? text : "");
    free(text);
    ct_params_free(&t.ps); ct_params_free(&t.st);

    t_case("checkpoint/the command line: --save-best, --early-stopping, --csv, --on-nan on small-cnn");
    char args[1024];
    snprintf(args, sizeof args, "%s --epochs 3 --threads 1 --save-best %s --monitor val_accuracy --early-stopping 1 --csv %s --on-nan skip-batch --out %s",
             CNN, tpath("cbest.h5"), tpath("c.csv"), tpath("cw.h5"));
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0 && strstr(out1, "Restoring model weights from the end of the best epoch") && strstr(out1, "saving model to"),
            "exit %d: %s", rc, out1);
    t_check(ct_ckpt_verify(tpath("cbest.h5"), NULL, NULL) == CT_OK, "--save-best file: %s", ct_last_error());
    text = (char *)read_all(tpath("c.csv"), &n);
    t_check(text && !strncmp(text, "epoch,", 6) && strstr(text, "\n1,"), "CSV: %s", text ? text : "(none)");
    free(text);
    rc = run(CNN " --monitor val_auc --early-stopping 2", out1, sizeof out1);
    t_check(rc == 2 && strstr(out1, "--monitor val_auc"), "bad --monitor: exit %d: %s", rc, out1);
    rc = run(CNN " --on-nan ignore", out1, sizeof out1);
    t_check(rc == 2 && strstr(out1, "use stop or skip-batch"), "bad --on-nan: exit %d: %s", rc, out1);
    rc = run(CNN " --val-samples 0 --early-stopping 2", out1, sizeof out1);
    t_check(rc == 1 && strstr(out1, "needs validation data"), "--early-stopping without validation: exit %d: %s", rc, out1);
    rc = run(CNN " --checkpoint-every 3", out1, sizeof out1);
    t_check(rc == 2 && strstr(out1, "needs --checkpoint"), "--checkpoint-every alone: exit %d: %s", rc, out1);
}

/* ---- export / import ---- */
static int params_equal(const ct_params *a, const ct_params *b)
{
    return a->numel == b->numel && !memcmp(a->data, b->data, a->numel * sizeof(float));
}

static int h5_datasets_equal(const char *a, const char *b, char *why, size_t n)
{
    hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
    static name_list l;
    l.n = 0;
    int same = fa >= 0 && fb >= 0;
    if (same) H5Ovisit2(fa, H5_INDEX_NAME, H5_ITER_INC, collect, &l, H5O_INFO_BASIC);
    if (same && l.n < 3) { same = 0; snprintf(why, n, "only %d datasets in %s", l.n, a); }
    for (int i = 0; same && i < l.n; i++) {
        size_t ba = 0, bb = 0;
        void *x = read_raw(fa, l.names[i], &ba), *y = read_raw(fb, l.names[i], &bb);
        if (!x || !y || ba != bb || memcmp(x, y, ba)) { same = 0; snprintf(why, n, "/%s differs", l.names[i]); }
        free(x); free(y);
    }
    if (fa >= 0) H5Fclose(fa);
    if (fb >= 0) H5Fclose(fb);
    return same;
}

/* CTRAIN_KEEP_EXPORT=DIR keeps the exported files and ctrain's outputs for a manual
 * check with Keras (tests/export_keras_check.py). */
static void keep(const char *model, const char *torch_file, const char *keras_file, const char *io)
{
    const char *dir = getenv("CTRAIN_KEEP_EXPORT");
    if (!dir) return;
    const char *src[3] = { torch_file, keras_file, io }, *kind[3] = { "torch", "keras", "io" };
    for (int i = 0; i < 3; i++) {
        char dst[512];
        long n;
        snprintf(dst, sizeof dst, "%s/%s_%s.h5", dir, model, kind[i]);
        unsigned char *b = read_all(src[i], &n);
        if (b) write_all(dst, b, n);
        free(b);
    }
}

/* Runs a checker script on the exported file: 0 when it computed ctrain's output. */
static int run_checker(const char *what, const char *cmd)
{
    FILE *p = popen(cmd, "r");
    size_t got = p ? fread(out1, 1, sizeof out1 - 1, p) : 0;
    out1[got] = '\0';
    int st = p ? pclose(p) : -1;
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    t_check(rc == 0, "the %s check failed (exit %d)%s: %s", what, rc,
            rc == 2 || strstr(out1, "No module") || rc == 127 ? " - install Debian's python3-torch and python3-h5py (apt-get install python3-torch python3-h5py)" : "",
            out1);
    if (rc == 0) printf("  %s", out1);
    return rc;
}

/* Writes ctrain's input x and output `out` to `io`, then has PyTorch load the exported state
 * dict and compute the same input, and Keras's layout (in numpy: tests/export_keras_check.py)
 * compute it from the Keras file; both must give ctrain's output. */
static void run_export_checks(const char *model, const char *state, const char *keras, const char *io, const float *x, int nd_x,
                              const size_t *dx, const float *out, int nd_out, const size_t *dout)
{
    hid_t f;
    t_check(ct_h5_create(&f, io) == CT_OK && ct_h5_write_f32(f, "x", x, nd_x, dx) == CT_OK
            && ct_h5_write_f32(f, "out", out, nd_out, dout) == CT_OK, "writing %s: %s", io, ct_last_error());
    ct_h5_close(f);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/export_torch_check.py %s %s %s 2>&1", model, state, io);
    run_checker("PyTorch", cmd);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/export_keras_check.py %s %s %s --numpy 2>&1", model, keras, io);
    run_checker("Keras layout", cmd);
    keep(model, state, keras, io);
}

/* Exports checkpoint ck as torch (st) and keras (sk): both must succeed. */
static void export_both(const char *ck, const char *st, const char *sk)
{
    char args[1024];
    snprintf(args, sizeof args, "export --format torch %s --out %s", ck, st);
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "export torch: exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "export --format keras %s --out %s", ck, sk);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "export keras: exit %d: %s", rc, out1);
}

/* `ctrain import` of each export (no option: the exports record the model) gives back weights
 * and buffers equal to ps and bs bit for bit, and keras -> ctrain -> keras is exact. */
static void check_round_trips(const char *model, const char *st, const char *sk, const ct_params *ps, const ct_params *bs,
                              ct_params *p1, ct_params *b1)
{
    char args[1024], why[256] = "", w[256], sk2[256];
    snprintf(w, sizeof w, "%s/imp.h5", tdir);   /* not tpath's: its few buffers hold the caller's names */
    snprintf(sk2, sizeof sk2, "%s/exp_keras3.h5", tdir);
    const char *fmt[2] = { "torch", "keras" }, *src[2] = { st, sk };
    for (int k = 0; k < 2; k++) {
        snprintf(args, sizeof args, "import --format %s %s --out %s --model %s", fmt[k], src[k], w, model);
        int rc = run(args, out1, sizeof out1);
        t_check(rc == 0 && ct_weights_load(w, model, p1, b1) == CT_OK && params_equal(ps, p1) && (!bs || params_equal(bs, b1)),
                "%s: %s round trip is not exact (exit %d): %s %s", model, fmt[k], rc, out1, ct_last_error());
    }
    snprintf(args, sizeof args, "export --format keras %s --out %s", w, sk2);
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0 && h5_datasets_equal(sk, sk2, why, sizeof why), "%s: keras -> ctrain -> keras is not exact (exit %d): %s %s",
            model, rc, why, out1);
}

/* Keras flattens a map [C, H, W] channels-last: row (h W + w) C + c of the first Dense kernel after
 * the flatten must hold ctrain's column (c H + h) W + w of dense_1/w [U, C H W]. */
static void check_flatten_rows(const char *keras, const ct_params *ps, int C, int H, int W)
{
    int h = ct_params_find(ps, "dense_1/w");
    const ct_param *p = &ps->p[h];
    size_t U = (size_t)p->shape[0], F = (size_t)p->shape[1];
    float *k = malloc(U * F * sizeof *k);
    hid_t f;
    int ok = k && F == (size_t)C * H * W && ct_h5_open(&f, keras) == CT_OK;
    if (ok) {
        ok = ct_h5_read_f32(f, "dense_1/dense_1/kernel:0", k, U * F) == CT_OK;
        ct_h5_close(f);
    }
    const float *w = ct_params_data(ps, h);
    for (int c = 0; ok && c < C; c++)
        for (int y = 0; ok && y < H; y++)
            for (int x = 0; ok && x < W; x++)
                for (size_t u = 0; ok && u < U; u++)
                    ok = k[((size_t)(y * W + x) * C + c) * U + u] == w[u * F + (size_t)(c * H + y) * W + x];
    t_check(ok, "the Keras dense_1 kernel's rows are not in Keras's channels-last flatten order (C %d, H %d, W %d)", C, H, W);
    free(k);
}

static void case_export(void)
{
    char args[1024];
    const char *ck = tpath("exp.h5"), *st = tpath("exp_torch.h5"), *sk = tpath("exp_keras.h5"), *io = tpath("exp_io.h5");
    const char *w1 = tpath("imp_torch.h5"), *w2 = tpath("imp_keras.h5"), *sk2 = tpath("exp_keras2.h5");
    char why[256] = "";

    t_case("checkpoint/export siamese-lstm: torch nn.LSTM + nn.Linear and Keras's LSTM + Dense compute ctrain's embeddings");
    snprintf(args, sizeof args, "%s --layers 2 --epochs 1 --threads 1 --checkpoint %s", SIAM, ck);
    int rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training: exit %d: %s", rc, out1);
    export_both(ck, st, sk);
    siamese_lstm_config mc = ct_siamese_lstm_defaults();
    mc.n_mels = 6; mc.frames = 10; mc.hidden = 8; mc.layers = 2; mc.embed = 4; mc.pool = LSTM_RETURN_MEAN;   /* train's default */
    siamese_lstm m, m1, m2;
    memset(&m, 0, sizeof m); memset(&m1, 0, sizeof m1); memset(&m2, 0, sizeof m2);
    int ok = ct_siamese_lstm_build(&m, &mc) == CT_OK && ct_siamese_lstm_build(&m1, &mc) == CT_OK && ct_siamese_lstm_build(&m2, &mc) == CT_OK
             && ct_weights_load(ck, "siamese-lstm", &m.params, NULL) == CT_OK && ct_siamese_lstm_plan_embed(&m, 5, 10) == CT_OK;
    t_check(ok, "building the model: %s", ct_last_error());
    if (ok) {
        float x[5 * 10 * 6], emb[5 * 4];
        int len[5] = { 10, 10, 10, 10, 10 };
        ct_rng r;
        ct_rng_seed(&r, 3, 3);
        t_fill_uniform(x, sizeof x / sizeof x[0], -2, 2, &r);
        ct_siamese_lstm_embed(&m, emb, x, len, 5, 10);
        size_t dx[3] = { 5, 10, 6 }, de[2] = { 5, 4 };
        run_export_checks("siamese-lstm", st, sk, io, x, 3, dx, emb, 2, de);

        t_case("checkpoint/import --format torch|keras reads the exports back (siamese-lstm, exact)");
        snprintf(args, sizeof args, "import --format torch %s --out %s --model siamese-lstm --hidden 8", st, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 0 && ct_weights_load(w1, "siamese-lstm", &m1.params, NULL) == CT_OK && params_equal(&m.params, &m1.params),
                "torch round trip is not exact (exit %d): %s", rc, out1);
        snprintf(args, sizeof args, "import --format keras %s --out %s --model siamese-lstm", sk, w2);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 0 && ct_weights_load(w2, "siamese-lstm", &m2.params, NULL) == CT_OK, "keras import (exit %d): %s", rc, out1);
        /* Keras has one bias per gate: b_ih + b_hh comes back in b_ih, b_hh is zero; all else is exact */
        int exact = 1;
        for (int h = 0; h < m.params.n; h++) {
            const ct_param *p = &m.params.p[h];
            const float *a = ct_params_data(&m.params, h), *b = ct_params_data(&m2.params, h);
            if (strstr(p->name, "/b_")) continue;
            exact &= !memcmp(a, b, p->numel * sizeof(float));
        }
        for (int k = 0; k < 2; k++) {
            char ni[64], nh[64];
            snprintf(ni, sizeof ni, "lstm_1/b_ih_l%d", k);
            snprintf(nh, sizeof nh, "lstm_1/b_hh_l%d", k);
            const float *bi = ct_params_data(&m.params, ct_params_find(&m.params, ni)), *bh = ct_params_data(&m.params, ct_params_find(&m.params, nh));
            const float *ki = ct_params_data(&m2.params, ct_params_find(&m2.params, ni)), *kh = ct_params_data(&m2.params, ct_params_find(&m2.params, nh));
            for (int i = 0; i < 32; i++) exact &= ki[i] == bi[i] + bh[i] && kh[i] == 0.0f;
        }
        t_check(exact, "keras import: weights differ from the checkpoint's");
        snprintf(args, sizeof args, "export --format keras %s --out %s", w2, sk2);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 0 && h5_datasets_equal(sk, sk2, why, sizeof why), "keras -> ctrain -> keras is not exact (exit %d): %s %s", rc, why, out1);
        t_case("checkpoint/import without --model takes the model the export records, and names --model where a file records none");
        snprintf(args, sizeof args, "import --format torch %s --out %s", st, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 0 && ct_weights_load(w1, "siamese-lstm", &m1.params, NULL) == CT_OK && params_equal(&m.params, &m1.params),
                "import of an export with no --model (exit %d): %s", rc, out1);
        char bare[512];
        snprintf(bare, sizeof bare, "%s", tpath("no-model.h5"));
        hid_t fb = H5Fcreate(bare, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        if (fb >= 0) H5Fclose(fb);
        snprintf(args, sizeof args, "import --format torch %s --out %s", bare, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 2 && strstr(out1, "no 'model' attribute") && strstr(out1, "give --model NAME"),
                "a file recording no model, without --model (exit %d): %s", rc, out1);
        snprintf(args, sizeof args, "import --format torch %s --out %s --model siamese-lstm --hidden 16", st, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 1 && strstr(out1, "--hidden 8"), "import with a wrong --hidden must fail naming the sizes (exit %d): %s", rc, out1);
        snprintf(args, sizeof args, "import --format keras %s --out %s --model small-cnn", sk, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 1 && strstr(out1, "Conv2D"), "importing an LSTM file as small-cnn must fail (exit %d): %s", rc, out1);
        snprintf(args, sizeof args, "import --format keras %s --out %s --model cnn", sk, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 1 && strstr(out1, "Conv2D") && strstr(out1, sk), "importing an LSTM file as cnn must fail (exit %d): %s", rc, out1);
    }
    ct_siamese_lstm_free(&m); ct_siamese_lstm_free(&m1); ct_siamese_lstm_free(&m2);

    t_case("checkpoint/export small-cnn: torch Conv2d/BatchNorm2d/Linear and Keras's layout compute ctrain's logits");
    snprintf(args, sizeof args, "%s --epochs 2 --threads 1 --checkpoint %s", CNN, ck);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training: exit %d: %s", rc, out1);
    export_both(ck, st, sk);
    small_cnn_config cc = ct_small_cnn_defaults();
    cc.height = cc.width = 8; cc.filters = 4;
    static seq_cnn c, c1;   /* large: the layer tables */
    memset(&c, 0, sizeof c); memset(&c1, 0, sizeof c1);
    ok = ct_small_cnn_build(&c, &cc) == CT_OK && ct_small_cnn_build(&c1, &cc) == CT_OK
         && ct_weights_load(ck, "small-cnn", &c.params, &c.buffers) == CT_OK && ct_seq_cnn_plan(&c, 6) == CT_OK;
    t_check(ok, "building the model: %s", ct_last_error());
    if (ok) {
        float x[6 * 64];
        int labels[6] = { 0, 1, 2, 3, 0, 1 }, correct = 0;
        ct_rng r, d;
        ct_rng_seed(&r, 5, 3);
        ct_rng_seed(&d, 5, 2);
        t_fill_uniform(x, sizeof x / sizeof x[0], -1, 1, &r);
        ct_seq_cnn_forward(&c, x, labels, 6, 0, &d, &correct);
        size_t dx[4] = { 6, 1, 8, 8 }, dl[2] = { 6, 4 };
        run_export_checks("small-cnn", st, sk, io, x, 4, dx, c.logits, 2, dl);
        check_flatten_rows(sk, &c.params, 4, 4, 4);
        t_case("checkpoint/import --format torch|keras reads the exports back (small-cnn, exact)");
        check_round_trips("small-cnn", st, sk, &c.params, &c.buffers, &c1.params, &c1.buffers);
    }
    ct_seq_cnn_free(&c); ct_seq_cnn_free(&c1);

    /* a flatten of 6 maps of 6x6 (the order matters), batchnorm on maps and on the flat vector */
#define XCNN_SPEC "conv4k3p1,batchnorm,relu,maxpool2,conv6k3s2p1,relu,maxpool2,flatten,batchnorm,dense12,relu,dropout0.2,dense10"
    t_case("checkpoint/export cnn: torch and Keras's layout (Conv2D [KH, KW, C, F], channels-last flatten) compute ctrain's logits");
    snprintf(args, sizeof args, "train cnn --data synthetic --samples 128 --val-samples 32 --batch 32 --epochs 1 --threads 1 "
             "--no-progress --arch " XCNN_SPEC " --checkpoint %s", ck);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training: exit %d: %s", rc, out1);
    export_both(ck, st, sk);
    ok = ct_seq_cnn_build(&c, XCNN_SPEC, 1, 28, 28, 10) == CT_OK && ct_seq_cnn_build(&c1, XCNN_SPEC, 1, 28, 28, 10) == CT_OK
         && ct_weights_load(ck, "cnn", &c.params, &c.buffers) == CT_OK && ct_seq_cnn_plan(&c, 4) == CT_OK;
    t_check(ok, "building the model: %s", ct_last_error());
    if (ok) {
        static float x[4 * 28 * 28];
        int labels[4] = { 0, 1, 2, 3 }, correct = 0;
        ct_rng r, d;
        ct_rng_seed(&r, 7, 3);
        ct_rng_seed(&d, 7, 2);
        t_fill_uniform(x, sizeof x / sizeof x[0], 0, 1, &r);
        ct_seq_cnn_forward(&c, x, labels, 4, 0, &d, &correct);
        size_t dx[4] = { 4, 1, 28, 28 }, dl[2] = { 4, 10 };
        run_export_checks("cnn", st, sk, io, x, 4, dx, c.logits, 2, dl);
        check_flatten_rows(sk, &c.params, 6, 3, 3);
        t_case("checkpoint/import --format torch|keras reads the exports back (cnn, exact)");
        check_round_trips("cnn", st, sk, &c.params, &c.buffers, &c1.params, &c1.buffers);
        /* a Keras file of another network is refused, naming the layer at fault */
        snprintf(args, sizeof args, "import --format keras %s --out %s --model cnn --arch conv4k3,relu,flatten,dense10", sk, w1);
        rc = run(args, out1, sizeof out1);
        t_check(rc == 1 && strstr(out1, "layers with weights"), "importing into another spec must fail (exit %d): %s", rc, out1);
    }
    ct_seq_cnn_free(&c); ct_seq_cnn_free(&c1);

    /* residual blocks: Keras's Add() of the block's input and output, PyTorch's x + block(x) */
#define XRES_SPEC "conv4k3p1,batchnorm,relu,save,conv4k3p1,batchnorm,relu,conv4k3p1,add,relu,maxpool2,flatten,dense12," \
                  "save,relu,dense12,add,dense10"
    t_case("checkpoint/export cnn with residual blocks: torch and Keras's layout compute ctrain's logits");
    snprintf(args, sizeof args, "train cnn --data synthetic --samples 128 --val-samples 32 --batch 32 --epochs 1 --threads 1 "
             "--no-progress --arch " XRES_SPEC " --checkpoint %s", ck);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training: exit %d: %s", rc, out1);
    export_both(ck, st, sk);
    ok = ct_seq_cnn_build(&c, XRES_SPEC, 1, 28, 28, 10) == CT_OK && ct_seq_cnn_build(&c1, XRES_SPEC, 1, 28, 28, 10) == CT_OK
         && ct_weights_load(ck, "cnn", &c.params, &c.buffers) == CT_OK && ct_seq_cnn_plan(&c, 4) == CT_OK;
    t_check(ok, "building the model: %s", ct_last_error());
    if (ok) {
        static float x[4 * 28 * 28];
        int labels[4] = { 0, 1, 2, 3 };
        ct_rng r;
        ct_rng_seed(&r, 7, 4);
        t_fill_uniform(x, sizeof x / sizeof x[0], 0, 1, &r);
        ct_seq_cnn_forward(&c, x, labels, 4, 0, NULL, NULL);
        size_t dx[4] = { 4, 1, 28, 28 }, dl[2] = { 4, 10 };
        run_export_checks("cnn", st, sk, io, x, 4, dx, c.logits, 2, dl);
        check_flatten_rows(sk, &c.params, 4, 14, 14);
        t_case("checkpoint/import --format torch|keras reads the exports back (cnn with residual blocks, exact)");
        check_round_trips("cnn", st, sk, &c.params, &c.buffers, &c1.params, &c1.buffers);
    }
    ct_seq_cnn_free(&c); ct_seq_cnn_free(&c1);

    /* a block that keeps a flattened map: Keras's channels-last Flatten would add it in another order */
#define XRESF_SPEC "conv4k3,maxpool2,flatten,save,batchnorm,add,dense10"
    t_case("checkpoint/export cnn: a residual block over a flattened map goes to PyTorch, and Keras is refused in one line");
    snprintf(args, sizeof args, "train cnn --data synthetic --samples 64 --val-samples 32 --batch 32 --epochs 1 --threads 1 "
             "--no-progress --arch " XRESF_SPEC " --checkpoint %s", ck);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training: exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "export --format torch %s --out %s", ck, st);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "export torch: exit %d: %s", rc, out1);
    snprintf(args, sizeof args, "export --format keras %s --out %s", ck, sk2);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 1 && strstr(out1, "layer 4 \"save\"") && strstr(out1, "--format torch")
            && (!strchr(out1, '\n') || !strchr(out1, '\n')[1]),
            "export keras must fail in one line naming the save and --format torch (exit %d): %s", rc, out1);

#define XSCNN_SPEC "conv4k3p1,batchnorm,relu,maxpool2,conv6k3p1,relu,gaph,dense5"
    t_case("checkpoint/export siamese-cnn: the tower in torch and in Keras's layout (gaph then Flatten) computes ctrain's embeddings");
    snprintf(args, sizeof args, "train siamese-cnn --speakers 12 --utts 4 --pairs 64 --val-pairs 32 --batch 16 --frames 16 --mels 8 "
             "--arch " XSCNN_SPEC " --epochs 1 --threads 1 --no-progress --checkpoint %s", ck);
    rc = run(args, out1, sizeof out1);
    t_check(rc == 0, "training: exit %d: %s", rc, out1);
    export_both(ck, st, sk);
    static siamese_cnn s, s1;
    siamese_cnn_config sc = ct_siamese_cnn_defaults();
    sc.frames = 16; sc.n_mels = 8; sc.embed = 0;
    snprintf(sc.spec, sizeof sc.spec, "%s", XSCNN_SPEC);
    ok = ct_siamese_cnn_build(&s, &sc) == CT_OK && ct_siamese_cnn_build(&s1, &sc) == CT_OK
         && ct_weights_load(ck, "siamese-cnn", &s.enc.params, &s.enc.buffers) == CT_OK && ct_siamese_cnn_plan(&s, 2) == CT_OK
         && ct_siamese_cnn_plan_embed(&s, 5) == CT_OK;
    t_check(ok, "building the model: %s", ct_last_error());
    if (ok) {
        float x[5 * 16 * 8], emb[5 * 5];
        ct_rng r;
        ct_rng_seed(&r, 9, 3);
        t_fill_uniform(x, sizeof x / sizeof x[0], -2, 2, &r);
        ct_siamese_cnn_embed(&s, emb, x, 5);
        size_t dx[3] = { 5, 16, 8 }, de[2] = { 5, 5 };
        run_export_checks("siamese-cnn", st, sk, io, x, 3, dx, emb, 2, de);
        check_flatten_rows(sk, &s.enc.params, 6, 1, 4);
        t_case("checkpoint/import --format torch|keras reads the exports back (siamese-cnn, exact)");
        check_round_trips("siamese-cnn", st, sk, &s.enc.params, &s.enc.buffers, &s1.enc.params, &s1.enc.buffers);
    }
    ct_siamese_cnn_free(&s); ct_siamese_cnn_free(&s1);
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[600];
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat s;
        if (lstat(p, &s) == 0 && S_ISDIR(s.st_mode)) { chmod(p, 0755); remove_tree(p); }
        else unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

void suite_checkpoint(void)
{
    snprintf(tdir, sizeof tdir, "/tmp/ctrain_ckpt_XXXXXX");
    if (!mkdtemp(tdir)) { t_case("checkpoint/setup"); t_check(0, "mkdtemp failed"); return; }
    snprintf(toy_meta.model, sizeof toy_meta.model, "toy");
    ct_h5_quiet();
    case_round_trip();
    case_resume("siamese-lstm", SIAM, 1);
    case_resume("small-cnn", CNN, 1);
    case_resume("cnn", FCNN, 1);
    case_resume("siamese-lstm", SIAM " --fixed-pairs", 1);
    case_pair_modes();
    case_resume("siamese-lstm", SIAM, 2);
    case_resume("small-cnn", CNN, 2);
    /* mixed precision (the products on the tiles' exact C model, which runs on any CPU): the
     * checkpoint records --precision bf16 and the resumed run computes what the whole one did */
    setenv("CTRAIN_BF16_MODEL", "1", 1);
    case_resume("siamese-lstm", SIAM " --precision bf16", 2);
    unsetenv("CTRAIN_BF16_MODEL");
    case_gpu_options_recorded();
    case_kill_loop();
    case_signal_in_fit();
    case_signals();
    case_bad_input();
    case_on_nan();
    case_callbacks();
    case_export();
    remove_tree(tdir);
}
