/* seq_cnn_spec.c - the architecture spec's parser (see seq_cnn_spec.h): splits the
 * text into tokens, finds each token's kind in the table by its word, lets the kind
 * read its options and infer its output shape, matches residual blocks like
 * parentheses, and checks what the whole network must end in. */
#include <stdio.h>
#include <string.h>
#include "models/seq_cnn_spec.h"

/* ---- helpers of the kinds' parse and shape functions ---- */

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

ct_status ct_seq_spec_uint(const char **s, int *v, int lo, int hi, int pos, const char *t, const char *what,
                           const char *example)
{
    int r = parse_uint(s, v, hi);
    if (r == 0)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": missing the %s (write e.g. %s)", pos, t, what, example);
    if (r < 0 || *v < lo)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": the %s must be %d to %d", pos, t, what, lo, hi);
    return CT_OK;
}

ct_status ct_seq_spec_end(const char *s, int pos, const char *t, const char *form)
{
    if (*s) return ct_fail(CT_EINVAL, "spec layer %d \"%s\": unexpected \"%s\" (the form is %s)", pos, t, s, form);
    return CT_OK;
}

const char *ct_seq_shape_text(char *buf, size_t cap, int c, int h, int w, int flat)
{
    if (flat) snprintf(buf, cap, "%d values", c);
    else snprintf(buf, cap, "%dx%dx%d feature maps", c, h, w);
    return buf;
}

ct_status ct_seq_spec_need_maps(const seq_layer *l, int pos, const char *advice)
{
    char sh[64];
    if (!l->flat_in) return CT_OK;
    return ct_fail(CT_EINVAL, "spec layer %d \"%s\": needs feature maps but its input is flat (%s); put %s before flatten/gap/dense",
                   pos, l->text, ct_seq_shape_text(sh, sizeof sh, l->in_c, 1, 1, 1), advice);
}

/* ---- tokens ---- */

/* The kind whose word is the longest start of token t; -1 if none. */
static int find_kind(const char *t)
{
    int best = -1;
    size_t best_len = 0;
    for (int k = 0; k < SEQ_KINDS; k++) {
        size_t len = strlen(ct_seq_kinds[k].word);
        if (len > best_len && !strncmp(t, ct_seq_kinds[k].word, len)) { best = k; best_len = len; }
    }
    return best;
}

/* Kind and options of token l->text. */
static ct_status parse_token(seq_layer *l, int pos)
{
    const char *t = l->text;
    int k = find_kind(t);
    if (k < 0) {
        char forms[512] = "";
        for (int j = 0; j < SEQ_KINDS; j++)
            snprintf(forms + strlen(forms), sizeof forms - strlen(forms), "%s%s", j ? ", " : "", ct_seq_kinds[j].form);
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": unknown layer; the layers are %s", pos, t, forms);
    }
    const seq_kind_row *row = &ct_seq_kinds[k];
    const char *opts = t + strlen(row->word);
    l->kind = (seq_kind)k;
    if (row->parse) return row->parse(l, opts, pos);
    if (*opts) return ct_fail(CT_EINVAL, "spec layer %d \"%s\": %s takes no number or option", pos, t, row->word);
    return CT_OK;
}

/* Residual blocks: a save opens one, an add closes the innermost open one. */
static ct_status match_block(seq_cnn *m, int i, int *open, int *n_open)
{
    seq_layer *l = &m->layer[i];
    unsigned flags = ct_seq_kinds[l->kind].flags;
    if (flags & SEQ_OPENS) {
        if (*n_open == SEQ_CNN_MAX_DEPTH)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": more than %d residual blocks open at once; close one with add first",
                           i + 1, l->text, SEQ_CNN_MAX_DEPTH);
        l->depth = *n_open;
        open[(*n_open)++] = i;
        if (*n_open > m->depth) m->depth = *n_open;
    } else if (flags & SEQ_CLOSES) {
        if (*n_open == 0)
            return ct_fail(CT_EINVAL, "spec layer %d \"%s\": no residual block is open for it to close; open one with save "
                           "where the block starts (e.g. save,conv16k3p1,relu,conv16k3p1,add)", i + 1, l->text);
        l->save = open[--(*n_open)];
        l->depth = *n_open;
    }
    return CT_OK;
}

ct_status ct_seq_spec_parse(seq_cnn *m, const char *spec, int C, int H, int W, int classes, int encoder)
{
    if (!spec || !*spec) return ct_fail(CT_EINVAL, "spec is empty; write layers separated by commas, e.g. %s", SEQ_CNN_DEFAULT_SPEC);
    if (strlen(spec) >= sizeof m->spec) return ct_fail(CT_EINVAL, "spec is longer than %zu characters", sizeof m->spec - 1);
    for (const char *c = spec; *c; c++)   /* messages quote the spec: it must be printable, one line */
        if (*c <= ' ' || *c > '~')
            return ct_fail(CT_EINVAL, "spec has the byte 0x%02x at position %d; a spec is layers separated by commas, without "
                           "spaces, e.g. %s", (unsigned char)*c, (int)(c - spec) + 1, SEQ_CNN_DEFAULT_SPEC);
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    m->in_c = C; m->in_h = H; m->in_w = W; m->classes = classes;
    int c = C, h = H, w = W, flat = 0, trains = 0;
    int open[SEQ_CNN_MAX_DEPTH], n_open = 0;
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
        CT_TRY(parse_token(l, pos));
        CT_TRY(match_block(m, m->n, open, &n_open));
        const seq_kind_row *row = &ct_seq_kinds[l->kind];
        l->in_c = c; l->in_h = h; l->in_w = w; l->flat_in = flat;
        l->out_c = c; l->out_h = h; l->out_w = w; l->flat_out = flat;
        if (row->shape) CT_TRY(row->shape(m, l, pos));
        c = l->out_c; h = l->out_h; w = l->out_w; flat = l->flat_out;
        trains |= row->param_name != NULL;
        m->n++;
        if (!end) break;
        s = end + 1;
    }
    if (n_open > 0) {
        const seq_layer *l = &m->layer[open[n_open - 1]];
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\": the residual block it opens is never closed; put add where the block ends",
                       open[n_open - 1] + 1, l->text);
    }
    const seq_layer *last = &m->layer[m->n - 1];
    char sh[64];
    m->out_size = last->out_c;
    if (encoder && !last->flat_out)
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\" is the last layer and outputs %s, but an encoder must end in a flat "
                       "embedding; end the spec with e.g. gaph,dense64 (or flatten,dense64)", m->n, last->text,
                       ct_seq_shape_text(sh, sizeof sh, last->out_c, last->out_h, last->out_w, last->flat_out));
    if (!encoder && (!last->flat_out || last->out_c != classes))
        return ct_fail(CT_EINVAL, "spec layer %d \"%s\" is the last layer and outputs %s, but the network must end in %d values "
                       "(one per class); end the spec with %sdense%d", m->n, last->text,
                       ct_seq_shape_text(sh, sizeof sh, last->out_c, last->out_h, last->out_w, last->flat_out), classes,
                       last->flat_out ? "" : "flatten,", classes);
    if (!trains) return ct_fail(CT_EINVAL, "spec has no conv, dense or batchnorm layer: nothing to train");
    return CT_OK;
}
