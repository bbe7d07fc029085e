/* seq_cnn.c - the sequential CNN: spec parser with up-front shape checks,
 * parameter registration, activation plan, and forward/backward as one loop
 * over the layer list calling the layer functions through the device's table
 * (layers/ops.h); the classifier is that stack followed by softmax
 * cross-entropy (see seq_cnn.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "models/seq_cnn.h"
#include "layers/pool.h"

size_t ct_seq_layer_out_size(const seq_layer *l)
{
    return (size_t)l->out_c * l->out_h * l->out_w;
}

static size_t in_size(const seq_layer *l)
{
    return (size_t)l->in_c * l->in_h * l->in_w;
}

static int is_elementwise(seq_kind k)
{
    return k == SEQ_RELU || k == SEQ_TANH || k == SEQ_SIGMOID || k == SEQ_DROPOUT;
}

static int is_activation(seq_kind k)
{
    return k == SEQ_RELU || k == SEQ_TANH || k == SEQ_SIGMOID;
}

/* ---- parsing ---- */

/* Unsigned decimal at *s; advances. Returns 0 if there is no digit, -1 if it exceeds hi. */
static int parse_uint(const char **s, int *v, int hi)
{
    const char *p = *s;
    long x = 0;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') {
        x = x * 10 + (*p - '0');
        if (x > hi) return -1;
        p++;
    }
    *s = p;
    *v = (int)x;
    return 1;
}

static const char *shape_str(char *buf, size_t cap, int c, int h, int w, int flat)
{
    if (flat) snprintf(buf, cap, "%d values", c);
    else snprintf(buf, cap, "%dx%dx%d feature maps", c, h, w);
    return buf;
}

/* Reads the number that must follow `what` in token `t` at *s. */
static ct_status need_uint(const char **s, int *v, int lo, int hi, int pos, const char *t, const char *what, const char *example)
{
    int r = parse_uint(s, v, hi);
    if (r == 0)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": missing the %s (write e.g. %s)", pos, t, what, example);
    if (r < 0 || *v < lo)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": the %s must be %d to %d", pos, t, what, lo, hi);
    return CT_OK;
}

static ct_status trailing(const char *s, int pos, const char *t, const char *form)
{
    if (*s) return ct_fail(CT_EINVAL, "spec layer %d \"%s\": unexpected \"%s\" (the form is %s)", pos, t, s, form);
    return CT_OK;
}

/* Parses one token into l (kind and options; shapes come later). */
static ct_status parse_token(seq_layer *l, const char *t, int pos)
{
    const char *s;
    if (!strncmp(t, "conv", 4)) {
        static const char *form = "convFkK[sS][pP], e.g. conv32k3 or conv64k3s2p1";
        l->kind = SEQ_CONV;
        s = t + 4;
        CT_TRY(need_uint(&s, &l->filters, 1, 65536, pos, t, "number of filters", "conv32k3"));
        if (*s != 'k') return ct_fail(CT_EINVAL, "spec layer %d \"%s\": missing the kernel size 'k' (the form is %s)", pos, t, form);
        s++;
        CT_TRY(need_uint(&s, &l->kernel, 1, 1024, pos, t, "kernel size", "conv32k3"));
        l->stride = 1; l->pad = 0;
        if (*s == 's') { s++; CT_TRY(need_uint(&s, &l->stride, 1, 1024, pos, t, "stride", "conv32k3s2")); }
        if (*s == 'p') { s++; CT_TRY(need_uint(&s, &l->pad, 0, 1024, pos, t, "padding", "conv32k3p1")); }
        return trailing(s, pos, t, form);
    }
    if (!strncmp(t, "dense", 5)) {
        l->kind = SEQ_DENSE;
        s = t + 5;
        CT_TRY(need_uint(&s, &l->units, 1, 1 << 20, pos, t, "number of units", "dense128"));
        return trailing(s, pos, t, "denseU, e.g. dense128");
    }
    if (!strncmp(t, "maxpool", 7)) {
        l->kind = SEQ_MAXPOOL;
        s = t + 7;
        CT_TRY(need_uint(&s, &l->kernel, 1, 1024, pos, t, "window size", "maxpool2"));
        l->stride = l->kernel;
        if (*s == 's') { s++; CT_TRY(need_uint(&s, &l->stride, 1, 1024, pos, t, "stride", "maxpool3s2")); }
        return trailing(s, pos, t, "maxpoolK[sS], e.g. maxpool2 or maxpool3s2");
    }
    if (!strncmp(t, "dropout", 7)) {
        l->kind = SEQ_DROPOUT;
        s = t + 7;
        if (!*s) return ct_fail(CT_EINVAL, "spec layer %d \"%s\": missing the drop probability (write e.g. dropout0.25)", pos, t);
        char *end;
        double p = strtod(s, &end);
        if (end == s || *end || !(p >= 0 && p < 1))
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": the drop probability must be a number in [0, 1) (write e.g. dropout0.25)", pos, t);
        l->p = (float)p;
        return CT_OK;
    }
    static const struct { const char *name; seq_kind kind; } plain[] = {
        { "gaph", SEQ_GAPH }, { "gap", SEQ_GAP }, { "flatten", SEQ_FLATTEN }, { "batchnorm", SEQ_BATCHNORM },
        { "relu", SEQ_RELU }, { "tanh", SEQ_TANH }, { "sigmoid", SEQ_SIGMOID },
    };
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        if (!strcmp(t, plain[i].name)) { l->kind = plain[i].kind; return CT_OK; }
    for (size_t i = 0; i < sizeof plain / sizeof *plain; i++)
        if (!strncmp(t, plain[i].name, strlen(plain[i].name)))
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %s takes no number or option", pos, t, plain[i].name);
    return ct_fail(CT_EINVAL, "spec layer %d \"%s\": unknown layer; the layers are convFkK[sS][pP], denseU, maxpoolK[sS], "
                   "gap, gaph, flatten, dropoutP, batchnorm, relu, tanh, sigmoid", pos, t);
}

/* Fills l's output shape from its input shape, or fails naming the layer. */
static ct_status infer_shape(seq_layer *l, int pos)
{
    char sh[64];
    const char *t = l->text;
    l->out_c = l->in_c; l->out_h = l->in_h; l->out_w = l->in_w; l->flat_out = l->flat_in;
    switch (l->kind) {
    case SEQ_CONV: case SEQ_MAXPOOL: case SEQ_GAP: case SEQ_GAPH: case SEQ_FLATTEN:
        if (l->flat_in)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": needs feature maps but its input is flat (%s); "
                           "put %s before flatten/gap/dense", pos, t, shape_str(sh, sizeof sh, l->in_c, 1, 1, 1),
                           l->kind == SEQ_FLATTEN ? "a single flatten" : "it");
        break;
    case SEQ_DENSE:
        if (!l->flat_in)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": dense needs a flat input but gets %s; put flatten (or gap) before it",
                           pos, t, shape_str(sh, sizeof sh, l->in_c, l->in_h, l->in_w, 0));
        break;
    default: break;
    }
    switch (l->kind) {
    case SEQ_CONV: {
        conv2d_dims cd;
        if (l->kernel > l->in_h + 2 * l->pad || l->kernel > l->in_w + 2 * l->pad)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": kernel %dx%d is larger than its input %dx%d (padding %d); "
                           "use a smaller kernel, padding, or fewer pooling layers before it",
                           pos, t, l->kernel, l->kernel, l->in_h, l->in_w, l->pad);
        if (ct_conv2d_dims_make(&cd, 1, l->in_c, l->in_h, l->in_w, l->filters, l->kernel, l->kernel, l->stride, l->pad) != CT_OK) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %s", pos, t, msg);
        }
        l->out_c = l->filters; l->out_h = cd.OH; l->out_w = cd.OW;
        break;
    }
    case SEQ_MAXPOOL:
        if (l->kernel > l->in_h || l->kernel > l->in_w)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": pooling window %dx%d is larger than its input %dx%d; "
                           "use a smaller window or fewer pooling layers", pos, t, l->kernel, l->kernel, l->in_h, l->in_w);
        l->out_h = (l->in_h - l->kernel) / l->stride + 1;
        l->out_w = (l->in_w - l->kernel) / l->stride + 1;
        break;
    case SEQ_GAP:
        l->out_h = l->out_w = 1; l->flat_out = 1;
        break;
    case SEQ_GAPH:   /* mean over H: C maps of W values each, read flat */
        l->out_c = l->in_c * l->in_w; l->out_h = l->out_w = 1; l->flat_out = 1;
        break;
    case SEQ_FLATTEN:
        if ((long)l->in_c * l->in_h * l->in_w > (1L << 28))
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %s are too many features", pos, t, shape_str(sh, sizeof sh, l->in_c, l->in_h, l->in_w, 0));
        l->out_c = l->in_c * l->in_h * l->in_w; l->out_h = l->out_w = 1; l->flat_out = 1;
        break;
    case SEQ_DENSE:
        if ((long)l->in_c * l->units > (1L << 30))
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %d x %d weights are too many", pos, t, l->units, l->in_c);
        l->out_c = l->units;
        break;
    default: break;
    }
    return CT_OK;
}

static void model_reset(seq_cnn *m)
{
    memset(m, 0, sizeof *m);
    ct_params_init(&m->params);
    ct_params_init(&m->buffers);
    ct_arena_init(&m->arena);
}

/* encoder != 0: no classes and no loss (classes is 0); the last layer must be flat */
static ct_status build_impl(seq_cnn *m, const char *spec, int C, int H, int W, int classes, int encoder)
{
    if (C < 1 || H < 1 || W < 1) return ct_fail(CT_EINVAL, "cnn: input %dx%dx%d must have positive sizes", C, H, W);
    if (!encoder && classes < 2) return ct_fail(CT_EINVAL, "cnn: need at least 2 classes (got %d)", classes);
    if (!spec || !*spec) return ct_fail(CT_EINVAL, "spec is empty; write layers separated by commas, e.g. %s", SEQ_CNN_DEFAULT_SPEC);
    if (strlen(spec) >= sizeof m->spec) return ct_fail(CT_EINVAL, "spec is longer than %zu characters", sizeof m->spec - 1);
    for (const char *c = spec; *c; c++)   /* messages quote the spec: it must be printable, one line */
        if (*c <= ' ' || *c > '~')
            return ct_fail(CT_EINVAL, "spec has the byte 0x%02x at position %d; a spec is layers separated by commas, without "
                           "spaces, e.g. %s", (unsigned char)*c, (int)(c - spec) + 1, SEQ_CNN_DEFAULT_SPEC);
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    m->in_c = C; m->in_h = H; m->in_w = W; m->classes = classes;
    int c = C, h = H, w = W, flat = 0, n_conv = 0, n_dense = 0, n_bn = 0;
    m->first_param = -1;
    const char *s = spec;
    for (int pos = 1;; pos++) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == 0)
            return ct_fail(CT_EINVAL, "spec layer %d is empty (two commas in a row, or a comma at the start or end)", pos);
        if (len >= SEQ_CNN_TOKEN_MAX)
            return ct_fail(CT_EINVAL, "spec layer %d \"%.*s\": too long to be a layer", pos, (int)(len > 40 ? 40 : len), s);
        if (m->n >= SEQ_CNN_MAX_LAYERS)
            return ct_fail(CT_EINVAL, "spec layer %d: more than %d layers", pos, SEQ_CNN_MAX_LAYERS);
        seq_layer *l = &m->layer[m->n];
        memcpy(l->text, s, len);
        l->text[len] = 0;
        CT_TRY(parse_token(l, l->text, pos));
        l->in_c = c; l->in_h = h; l->in_w = w; l->flat_in = flat;
        CT_TRY(infer_shape(l, pos));
        c = l->out_c; h = l->out_h; w = l->out_w; flat = l->flat_out;
        int idx = m->n++;
        switch (l->kind) {
        case SEQ_CONV: {
            conv2d_dims cd;
            CT_TRY(ct_conv2d_dims_make(&cd, 1, l->in_c, l->in_h, l->in_w, l->filters, l->kernel, l->kernel, l->stride, l->pad));
            snprintf(l->name, sizeof l->name, "conv2d_%d", ++n_conv);
            CT_TRY(ct_conv2d_params_add(&l->conv, &m->params, l->name, &cd, 1));
            break;
        }
        case SEQ_DENSE:
            snprintf(l->name, sizeof l->name, "dense_%d", ++n_dense);
            CT_TRY(ct_dense_params_add(&l->dense, &m->params, l->name, l->in_c, l->units, 1));
            break;
        case SEQ_BATCHNORM:
            snprintf(l->name, sizeof l->name, "batchnorm_%d", ++n_bn);
            CT_TRY(ct_batchnorm_params_add(&l->bn, &m->params, &m->buffers, l->name, l->in_c));
            break;
        default: break;
        }
        if (l->name[0] && m->first_param < 0) m->first_param = idx;
        if (!end) break;
        s = end + 1;
    }
    seq_layer *last = &m->layer[m->n - 1];
    char sh[64];
    m->out_size = last->out_c;
    if (encoder && !last->flat_out)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\" is the last layer and outputs %s, but an encoder must end in a flat "
                       "embedding; end the spec with e.g. gaph,dense64 (or flatten,dense64)", m->n, last->text,
                       shape_str(sh, sizeof sh, last->out_c, last->out_h, last->out_w, last->flat_out));
    if (!encoder && (!last->flat_out || last->out_c != classes))
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\" is the last layer and outputs %s, but the network must end in %d values "
                       "(one per class); end the spec with %sdense%d", m->n, last->text,
                       shape_str(sh, sizeof sh, last->out_c, last->out_h, last->out_w, last->flat_out), classes,
                       last->flat_out ? "" : "flatten,", classes);
    if (m->first_param < 0)
        return ct_fail(CT_EINVAL, "spec has no conv, dense or batchnorm layer: nothing to train");
    /* in-place elementwise layers: allowed when the buffer they would overwrite was
     * written by a layer whose backward does not read its own output */
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        if (!is_elementwise(l->kind)) continue;
        int owner = i - 1;
        while (owner >= 0 && m->layer[owner].kind == SEQ_FLATTEN) owner--;
        l->in_place = owner >= 0 && !is_activation(m->layer[owner].kind) && m->layer[owner].kind != SEQ_DROPOUT;
    }
    /* relu, then maxpool: max commutes with relu (relu(max x) = max(relu x); the window's
     * first maximum gets the gradient either way, and where the maximum is <= 0 every
     * gradient is 0 either way), so the relu runs after the pool, on a map kH kW times
     * smaller, with the same numbers. Only for an in-place relu: its input is then the
     * pool's input as it was. */
    for (int i = 0; i + 1 < m->n; i++)
        if (m->layer[i].kind == SEQ_RELU && m->layer[i].in_place && m->layer[i + 1].kind == SEQ_MAXPOOL)
            m->layer[i].relu_after_pool = m->layer[i + 1].relu_after_pool = 1;
    CT_TRY(ct_params_alloc(&m->params));
    CT_TRY(ct_params_alloc(&m->buffers));
    m->be = &ct_cpu_backend;
    CT_TRY(ct_dparams_make(&m->dev, m->be, &m->params, 1));   /* on the CPU: the host stores themselves */
    return ct_dparams_make(&m->dev_buffers, m->be, &m->buffers, 0);
}

static ct_status build_model(seq_cnn *m, const char *spec, int C, int H, int W, int classes, int encoder)
{
    model_reset(m);
    ct_status st = build_impl(m, spec, C, H, W, classes, encoder);
    if (st != CT_OK) {
        /* keep the message: freeing does not touch it */
        ct_dparams_free(&m->dev);
        ct_dparams_free(&m->dev_buffers);
        ct_params_free(&m->params);
        ct_params_free(&m->buffers);
        model_reset(m);
    }
    return st;
}

ct_status ct_seq_cnn_build(seq_cnn *m, const char *spec, int C, int H, int W, int classes)
{
    return build_model(m, spec, C, H, W, classes, 0);
}

ct_status ct_seq_cnn_build_encoder(seq_cnn *m, const char *spec, int C, int H, int W)
{
    return build_model(m, spec, C, H, W, 0, 1);
}

void ct_seq_cnn_init_weights(seq_cnn *m, ct_rng *r)
{
    ct_params_initialize(&m->params, r);
    ct_params_initialize(&m->buffers, r);
}

static conv2d_dims conv_dims(const seq_layer *l, int N)
{
    conv2d_dims cd;
    ct_status st = ct_conv2d_dims_make(&cd, N, l->in_c, l->in_h, l->in_w, l->filters, l->kernel, l->kernel, l->stride, l->pad);
    CT_ASSERT(st == CT_OK);
    return cd;
}

static maxpool2d_dims pool_dims(const seq_layer *l, int N)
{
    maxpool2d_dims pd;
    ct_status st = ct_maxpool2d_dims_make(&pd, N, l->in_c, l->in_h, l->in_w, l->kernel, l->stride);
    CT_ASSERT(st == CT_OK);
    return pd;
}

/* Training-mode dims: with synchronised batchnorm and a part set, the whole batch's statistics. */
static batchnorm_dims bn_dims(const seq_cnn *m, const seq_layer *l, int N, int train)
{
    batchnorm_dims d = { .N = N, .C = l->in_c, .HW = l->in_h * l->in_w, .eps = 1e-5f, .momentum = 0.1f };
    if (train && m->bn_sync.sum && m->part_rows > 0) d.sync = &m->bn_sync;
    return d;
}

/* The device's plans, activations and statistics go; the weights stay. */
static void free_step(seq_cnn *m)
{
    for (int i = 0; i < m->n; i++)
        if (m->layer[i].conv_plan) { m->be->ops->conv2d_plan_free(m->be, m->layer[i].conv_plan); m->layer[i].conv_plan = NULL; }
    ct_arena_free(&m->arena);
    m->max_batch = 0;
}

ct_status ct_seq_cnn_set_device(seq_cnn *m, const ct_backend *be)
{
    free_step(m);
    ct_dparams_free(&m->dev);
    ct_dparams_free(&m->dev_buffers);
    m->be = be;
    CT_TRY(ct_dparams_make(&m->dev, be, &m->params, 1));
    return ct_dparams_make(&m->dev_buffers, be, &m->buffers, 0);
}

ct_status ct_seq_cnn_to_device(seq_cnn *m)
{
    CT_TRY(ct_dparams_to_device(&m->dev));
    return ct_dparams_to_device(&m->dev_buffers);
}

ct_status ct_seq_cnn_to_host(seq_cnn *m)
{
    CT_TRY(ct_dparams_to_host(&m->dev));
    return ct_dparams_to_host(&m->dev_buffers);
}

ct_status ct_seq_cnn_plan(seq_cnn *m, int N)
{
    if (N < 1) return ct_fail(CT_EINVAL, "cnn: batch size %d must be at least 1", N);
    for (int i = 0; i < m->n; i++) {
        const seq_layer *l = &m->layer[i];
        if ((double)N * (double)(in_size(l) > ct_seq_layer_out_size(l) ? in_size(l) : ct_seq_layer_out_size(l)) > 2147483647.0)
            return ct_fail(CT_EINVAL, "cnn: batch %d is too large for layer %d \"%s\" (more than 2^31 values); use a smaller --batch",
                           N, i + 1, l->text);
    }
    free_step(m);
    ct_arena_init(&m->arena);
    ct_arena *a = &m->arena;
    m->max_batch = N;
    size_t ws = 0, gmax = (size_t)m->classes;
    float *shared_ws = NULL;
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        size_t nout = (size_t)N * ct_seq_layer_out_size(l), nin = (size_t)N * in_size(l);
        if (nout > gmax) gmax = nout;
        if (nin > gmax) gmax = nin;
        l->out = l->ws = l->xhat = l->mean = l->invstd = l->mask = NULL;
        l->argmax = NULL;
        int own_out = !(l->kind == SEQ_FLATTEN || l->in_place);
        if (own_out) ct_arena_floats(a, &l->out, nout);
        switch (l->kind) {
        case SEQ_CONV: {
            conv2d_dims cd = conv_dims(l, N);
            ct_status st = m->be->ops->conv2d_plan(m->be, &l->conv_plan, &cd, 1);
            if (st != CT_OK) { st = ct_fail(st, "layer %d \"%s\": %s", i + 1, l->text, ct_last_error()); free_step(m); return st; }
            size_t k = m->be->ops->conv2d_workspace_floats(m->be, l->conv_plan);
            if (k > ws) ws = k;
            break;
        }
        case SEQ_MAXPOOL: ct_arena_ints(a, &l->argmax, nout); break;
        case SEQ_DROPOUT: ct_arena_floats(a, &l->mask, nout); break;
        case SEQ_BATCHNORM:
            ct_arena_floats(a, &l->xhat, nout);
            ct_arena_floats(a, &l->mean, (size_t)l->in_c);
            ct_arena_floats(a, &l->invstd, (size_t)l->in_c);
            break;
        default: break;
        }
    }
    ct_arena_floats(a, &shared_ws, ws ? ws : 1);
    m->conv_ws_floats = ws;
    if (m->classes) ct_arena_floats(a, &m->prob, (size_t)N * m->classes);
    else m->prob = NULL;
    ct_arena_floats(a, &m->stats, 2);
    ct_arena_floats(a, &m->grad[0], gmax);
    ct_arena_floats(a, &m->grad[1], gmax);
    ct_status st = ct_arena_alloc_on(a, ct_backend_mem(m->be), "cnn activations");
    if (st != CT_OK) { free_step(m); return st; }
    for (int i = 0; i < m->n; i++)
        if (m->layer[i].kind == SEQ_CONV) m->layer[i].ws = shared_ws;
    return CT_OK;
}

void ct_seq_cnn_free(seq_cnn *m)
{
    if (m->be) free_step(m);
    ct_dparams_free(&m->dev);
    ct_dparams_free(&m->dev_buffers);
    ct_params_free(&m->params);
    ct_params_free(&m->buffers);
}

void ct_seq_cnn_set_part(seq_cnn *m, int first, int rows, int segments)
{
    m->part_first = first;
    m->part_rows = rows;
    m->part_segments = segments;
}

void ct_seq_cnn_sync_batchnorm(seq_cnn *m, int (*sum)(void *ctx, double *buf, int n), void *ctx)
{
    m->bn_sync.sum = sum;
    m->bn_sync.ctx = ctx;
}

/* Training dropout of the N rows of layer l. A part of a larger batch draws, on either
 * device, what the whole batch would draw for its rows (be->ops->dropout_forward_part). */
static void dropout_rows(seq_cnn *m, seq_layer *l, const float *in, int N, ct_rng *rng)
{
    size_t per = ct_seq_layer_out_size(l);   /* values per row */
    if (m->part_rows == 0) { m->be->ops->dropout_forward(m->be, l->out, l->mask, in, (size_t)N * per, l->p, 1, rng); return; }
    int S = m->part_segments, n = N / S;
    CT_ASSERT(n * S == N && m->part_first >= 0 && m->part_first + n <= m->part_rows);
    m->be->ops->dropout_forward_part(m->be, l->out, l->mask, in, per, S, n, m->part_first, m->part_rows, l->p, rng);
}

const float *ct_seq_cnn_forward_stack(seq_cnn *m, const float *x, int N, int train, ct_rng *dropout_rng)
{
    CT_ASSERT(N >= 1 && N <= m->max_batch);
    const ct_backend *be = m->be;
    const ct_dparams *P = &m->dev, *S = &m->dev_buffers;
    const float *in = x;
    ct_prof *p = &m->prof;
    if (m->part_rows > 0) {   /* a part: the whole batch's rows, and this part's weight in its loss */
        m->bn_sync.total_N = m->part_rows * m->part_segments;
        m->bn_sync.share = (double)N / m->bn_sync.total_N;
    }
    ct_prof_start(p, be);
    for (int i = 0; i < m->n; i++) {
        seq_layer *l = &m->layer[i];
        size_t n_out = (size_t)N * ct_seq_layer_out_size(l);
        if (l->kind == SEQ_FLATTEN || l->in_place) l->out = (float *)in;   /* same memory as the input */
        switch (l->kind) {
        case SEQ_CONV:
            be->ops->conv2d_forward(be, l->out, l->ws, in, ct_dparams_data(P, l->conv.w), ct_dparams_data(P, l->conv.b), l->conv_plan, N);
            break;
        case SEQ_DENSE:
            be->ops->dense_forward(be, l->out, in, ct_dparams_data(P, l->dense.w), ct_dparams_data(P, l->dense.b), N, l->in_c, l->units);
            break;
        case SEQ_MAXPOOL: {
            maxpool2d_dims pd = pool_dims(l, N);
            be->ops->maxpool2d_forward(be, l->out, l->argmax, in, &pd);
            if (l->relu_after_pool) {   /* the relu written before this pool (layer i - 1), on the pooled map */
                ct_prof_lap(p, be, &p->fwd[i]);
                be->ops->relu_forward(be, l->out, l->out, n_out);
                ct_prof_lap(p, be, &p->fwd[i - 1]);
            }
            break;
        }
        case SEQ_GAP:
            be->ops->global_avgpool_forward(be, l->out, in, N, l->in_c, l->in_h * l->in_w);
            break;
        case SEQ_GAPH:
            be->ops->avgpool_h_forward(be, l->out, in, N, l->in_c, l->in_h, l->in_w);
            break;
        case SEQ_FLATTEN:
            break;
        case SEQ_DROPOUT:
            if (train && l->p > 0) {
                if (m->given_masks) be->ops->dropout_apply(be, l->out, l->mask, in, n_out);
                else dropout_rows(m, l, in, N, dropout_rng);
            } else if (l->out != in) {
                be->ops->copy(be, l->out, in, n_out * sizeof *l->out);
            }
            break;
        case SEQ_BATCHNORM: {
            batchnorm_dims bd = bn_dims(m, l, N, train);
            be->ops->batchnorm_forward(be, l->out, l->xhat, l->mean, l->invstd, ct_dparams_data(S, l->bn.running_mean),
                                   ct_dparams_data(S, l->bn.running_var), in, ct_dparams_data(P, l->bn.gamma),
                                   ct_dparams_data(P, l->bn.beta), &bd, train);
            break;
        }
        case SEQ_RELU: if (!l->relu_after_pool) be->ops->relu_forward(be, l->out, in, n_out); break;   /* else: the next layer runs it */
        case SEQ_TANH: be->ops->tanh_forward(be, l->out, in, n_out); break;
        case SEQ_SIGMOID: be->ops->sigmoid_forward(be, l->out, in, n_out); break;
        }
        in = l->out;
        ct_prof_lap(p, be, &p->fwd[i]);
    }
    m->logits = in;
    return in;
}

float ct_seq_cnn_forward(seq_cnn *m, const float *x, const int *labels, int N, int train, ct_rng *dropout_rng, int *correct)
{
    CT_ASSERT(m->classes >= 2);
    const ct_backend *be = m->be;
    const float *logits = ct_seq_cnn_forward_stack(m, x, N, train, dropout_rng);    /* [N, classes] */
    ct_prof *p = &m->prof;
    be->ops->softmax_ce_stats(be, m->stats, m->prob, logits, labels, N, m->classes);     /* [2] */
    float stats[2];                                                              /* the step's one read */
    if (be->ops->download(be, stats, m->stats, sizeof stats) != CT_OK) ct_device_fatal("%s", ct_last_error());
    ct_prof_lap(p, be, &p->fwd[m->n - 1]);
    if (correct) *correct = (int)(stats[1] + 0.5f);
    return stats[0];
}

/* Backward through the layers, from d loss / d (last layer's output) in
 * m->grad[0] down to the first layer with parameters. */
static void backward_layers(seq_cnn *m, const float *x, int N)
{
    const ct_backend *be = m->be;
    const ct_dparams *P = &m->dev;
    float *cur = m->grad[0];                          /* d loss / d (output of layer i) */
    ct_prof *p = &m->prof;
    for (int i = m->n - 1; i >= m->first_param; i--) {
        seq_layer *l = &m->layer[i];
        const float *in = i == 0 ? x : m->layer[i - 1].out;
        float *dst = cur == m->grad[0] ? m->grad[1] : m->grad[0];
        float *din = i > m->first_param ? dst : NULL;  /* the first parameter layer's input gradient is not needed */
        size_t n_out = (size_t)N * ct_seq_layer_out_size(l);
        switch (l->kind) {
        case SEQ_CONV:
            be->ops->conv2d_backward(be, din, ct_dparams_grad(P, l->conv.w), ct_dparams_grad(P, l->conv.b), l->ws, cur, in,
                                 ct_dparams_data(P, l->conv.w), l->conv_plan, N);
            cur = dst;
            break;
        case SEQ_DENSE:
            be->ops->dense_backward(be, din, ct_dparams_grad(P, l->dense.w), ct_dparams_grad(P, l->dense.b), cur, in,
                                ct_dparams_data(P, l->dense.w), N, l->in_c, l->units);
            cur = dst;
            break;
        case SEQ_MAXPOOL: {
            maxpool2d_dims pd = pool_dims(l, N);
            if (l->relu_after_pool) {   /* the relu it ran after pooling: its gradient first, on the pooled map */
                be->ops->relu_backward(be, cur, cur, l->out, n_out);
                ct_prof_lap(p, be, &p->bwd[i - 1]);
            }
            be->ops->maxpool2d_backward(be, dst, cur, l->argmax, &pd);
            cur = dst;
            break;
        }
        case SEQ_GAP:
            be->ops->global_avgpool_backward(be, dst, cur, N, l->in_c, l->in_h * l->in_w);
            cur = dst;
            break;
        case SEQ_GAPH:
            be->ops->avgpool_h_backward(be, dst, cur, N, l->in_c, l->in_h, l->in_w);
            cur = dst;
            break;
        case SEQ_FLATTEN:
            break;                                     /* same memory, same order */
        case SEQ_DROPOUT:
            if (l->p > 0) be->ops->dropout_backward(be, cur, cur, l->mask, n_out);
            break;
        case SEQ_BATCHNORM: {
            batchnorm_dims bd = bn_dims(m, l, N, 1);
            be->ops->batchnorm_backward(be, din, ct_dparams_grad(P, l->bn.gamma), ct_dparams_grad(P, l->bn.beta), cur, l->xhat,
                                    l->invstd, ct_dparams_data(P, l->bn.gamma), &bd);
            cur = dst;
            break;
        }
        case SEQ_RELU: if (!l->relu_after_pool) be->ops->relu_backward(be, cur, cur, l->out, n_out); break;   /* else: done by the pool */
        case SEQ_TANH: be->ops->tanh_backward(be, cur, cur, l->out, n_out); break;
        case SEQ_SIGMOID: be->ops->sigmoid_backward(be, cur, cur, l->out, n_out); break;
        }
        ct_prof_lap(p, be, &p->bwd[i]);
    }
}

void ct_seq_cnn_backward_stack(seq_cnn *m, const float *x, const float *dout, int N)
{
    CT_ASSERT(N >= 1 && N <= m->max_batch);
    ct_prof_start(&m->prof, m->be);
    if (dout != m->grad[0]) m->be->ops->copy(m->be, m->grad[0], dout, (size_t)N * m->out_size * sizeof *dout);   /* [N, out_size] */
    backward_layers(m, x, N);
}

void ct_seq_cnn_backward(seq_cnn *m, const float *x, const int *labels, int N)
{
    CT_ASSERT(m->classes >= 2);
    ct_prof_start(&m->prof, m->be);
    m->be->ops->softmax_ce_backward(m->be, m->grad[0], m->prob, labels, N, m->classes);   /* d loss / d logits [N, classes] */
    backward_layers(m, x, N);
}

static double layer_forward_flops(const seq_layer *l, int N)
{
    if (l->kind == SEQ_CONV)
        return 2.0 * N * l->out_c * l->out_h * l->out_w * (double)l->in_c * l->kernel * l->kernel;
    if (l->kind == SEQ_DENSE) return 2.0 * N * (double)l->in_c * l->units;
    return 0;
}

double ct_seq_layer_step_flops(const seq_cnn *m, int i, int N)
{
    const seq_layer *l = &m->layer[i];
    double f = layer_forward_flops(l, N);
    return f * (i > m->first_param ? 3.0 : 2.0);      /* forward, dW, and din unless first */
}

double ct_seq_cnn_step_flops(const seq_cnn *m, int N)
{
    double f = 0;
    for (int i = 0; i < m->n; i++) f += ct_seq_layer_step_flops(m, i, N);
    return f;
}

double ct_seq_cnn_forward_flops(const seq_cnn *m, int N)
{
    double f = 0;
    for (int i = 0; i < m->n; i++) f += layer_forward_flops(&m->layer[i], N);
    return f;
}

static size_t layer_params(const seq_cnn *m, const seq_layer *l)
{
    const ct_params *P = &m->params;
    switch (l->kind) {
    case SEQ_CONV: return P->p[l->conv.w].numel + P->p[l->conv.b].numel;
    case SEQ_DENSE: return P->p[l->dense.w].numel + P->p[l->dense.b].numel;
    case SEQ_BATCHNORM: return P->p[l->bn.gamma].numel + P->p[l->bn.beta].numel;
    default: return 0;
    }
}

void ct_seq_cnn_summary(const seq_cnn *m, char *buf, size_t cap)
{
    size_t k = 0;
    if (cap == 0) return;
    buf[0] = 0;
    for (int i = 0; i < m->n && k < cap; i++) {
        const seq_layer *l = &m->layer[i];
        char sh[64];
        int r = snprintf(buf + k, cap - k, "  %2d %-14s %-13s -> %-22s %8zu params\n", i + 1, l->text,
                         l->name[0] ? l->name : "", shape_str(sh, sizeof sh, l->out_c, l->out_h, l->out_w, l->flat_out),
                         layer_params(m, l));
        if (r < 0) break;
        k += (size_t)r;
    }
}
