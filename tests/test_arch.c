/* test_arch.c - tests of the CNN architecture spec parser (models/seq_cnn):
 * good specs give the right layers, parameter names and shapes, output sizes,
 * in-place plan and FLOP count; residual blocks (save ... add) are matched like
 * parentheses and get their skip gradient buffers; every kind of bad spec fails
 * with CT_EINVAL and a message naming the layer by position and text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tests/test.h"
#include "models/seq_cnn.h"

/* Parameter `name` exists in ps with the given shape. */
static void check_param(const ct_params *ps, const char *name, int ndim, int d0, int d1, int d2, int d3)
{
    int h = ct_params_find(ps, name);
    if (!t_check(h >= 0, "parameter %s missing", name)) return;
    const ct_param *p = &ps->p[h];
    int want[4] = { d0, d1, d2, d3 }, same = p->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = p->shape[i] == want[i];
    t_check(same, "%s: ndim %d shape [%d, %d, %d, %d], want ndim %d [%d, %d, %d, %d]", name, p->ndim, p->shape[0],
            p->shape[1], p->shape[2], p->shape[3], ndim, d0, d1, d2, d3);
}

static void check_out(const seq_cnn *m, int i, int c, int h, int w, int flat)
{
    const seq_layer *l = &m->layer[i];
    t_check(l->out_c == c && l->out_h == h && l->out_w == w && l->flat_out == flat,
            "layer %d \"%s\": output %dx%dx%d flat %d, want %dx%dx%d flat %d", i + 1, l->text, l->out_c, l->out_h, l->out_w,
            l->flat_out, c, h, w, flat);
}

static void test_default(void)
{
    t_case("arch/default spec (Keras mnist_cnn): layers, parameter names and shapes, outputs, FLOPs");
    seq_cnn m;
    if (!t_check(ct_seq_cnn_build(&m, SEQ_CNN_DEFAULT_SPEC, 1, 28, 28, 10) == CT_OK, "build: %s", ct_last_error())) return;
    t_check(m.n == 11, "%d layers, want 11", m.n);
    t_check(m.params.n == 8, "%d parameters, want 8", m.params.n);
    const char *order[8] = { "conv2d_1/w", "conv2d_1/b", "conv2d_2/w", "conv2d_2/b", "dense_1/w", "dense_1/b", "dense_2/w", "dense_2/b" };
    for (int i = 0; i < 8 && i < m.params.n; i++)
        t_check(!strcmp(m.params.p[i].name, order[i]), "parameter %d is %s, want %s", i, m.params.p[i].name, order[i]);
    check_param(&m.params, "conv2d_1/w", 4, 32, 1, 3, 3);
    check_param(&m.params, "conv2d_1/b", 1, 32, 0, 0, 0);
    check_param(&m.params, "conv2d_2/w", 4, 64, 32, 3, 3);
    check_param(&m.params, "dense_1/w", 2, 128, 9216, 0, 0);
    check_param(&m.params, "dense_2/w", 2, 10, 128, 0, 0);
    check_param(&m.params, "dense_2/b", 1, 10, 0, 0, 0);
    /* Keras's model.summary() of mnist_cnn: Total params: 1,199,882 */
    t_check(ct_params_count(&m.params) == 1199882, "%zu trainable numbers, want 1199882", ct_params_count(&m.params));
    t_check(m.buffers.n == 0, "no buffers without batchnorm");
    check_out(&m, 0, 32, 26, 26, 0);
    check_out(&m, 2, 64, 24, 24, 0);
    check_out(&m, 4, 64, 12, 12, 0);
    check_out(&m, 6, 9216, 1, 1, 1);
    check_out(&m, 7, 128, 1, 1, 1);
    check_out(&m, 10, 10, 1, 1, 1);
    t_check(m.first_param == 0, "first parameter layer %d, want 0", m.first_param);
    /* relu after conv/dense and dropout after maxpool run in place; the dropout after a relu must not */
    t_check(m.layer[1].in_place && m.layer[3].in_place && m.layer[5].in_place && m.layer[8].in_place && !m.layer[9].in_place,
            "in-place plan %d %d %d %d %d, want 1 1 1 1 0", m.layer[1].in_place, m.layer[3].in_place, m.layer[5].in_place,
            m.layer[8].in_place, m.layer[9].in_place);
    /* forward per image: conv1 2*32*26*26*9 = 389376, conv2 2*64*24*24*288 = 21233664,
     * dense1 2*9216*128 = 2359296, dense2 2*128*10 = 2560: 23984896; a step is 2x conv1 + 3x the rest */
    double fwd = ct_seq_cnn_forward_flops(&m, 1), step = ct_seq_cnn_step_flops(&m, 1);
    t_check(fwd == 23984896.0, "forward FLOPs %.0f, want 23984896", fwd);
    t_check(step == 2.0 * 389376 + 3.0 * (21233664 + 2359296 + 2560), "step FLOPs %.0f, want 71565312", step);
    t_check(ct_seq_cnn_step_flops(&m, 128) == 128 * step, "FLOPs scale with the batch");
    char buf[4096];
    ct_seq_cnn_summary(&m, buf, sizeof buf);
    t_check(strstr(buf, "conv2d_2") && strstr(buf, "64x24x24") && strstr(buf, "1179776"), "summary:\n%s", buf);

    t_case("arch/default spec plans and runs a forward pass (logits [3, 10], finite loss)");
    if (t_check(ct_seq_cnn_plan(&m, 3) == CT_OK, "plan: %s", ct_last_error())) {
        ct_rng r;
        ct_rng_seed(&r, 5, 1);
        ct_seq_cnn_init_weights(&m, &r);
        float *x = t_alloc(3 * 784);
        t_fill_uniform(x, 3 * 784, 0, 1, &r);
        int labels[3] = { 0, 4, 9 }, correct = -1;
        float loss = ct_seq_cnn_forward(&m, x, labels, 3, 1, &r, &correct);
        t_check(loss > 0 && loss < 10 && correct >= 0 && correct <= 3, "loss %g correct %d", loss, correct);
        t_check(m.logits == m.layer[10].out, "logits are the last layer's output");
        free(x);
    }
    ct_seq_cnn_free(&m);
}

static void test_options(void)
{
    t_case("arch/stride, padding, batchnorm, tanh, gap (conv8k3s2p1,batchnorm,relu,conv16k3p1,tanh,gap,dense10)");
    seq_cnn m;
    if (t_check(ct_seq_cnn_build(&m, "conv8k3s2p1,batchnorm,relu,conv16k3p1,tanh,gap,dense10", 1, 28, 28, 10) == CT_OK,
                "build: %s", ct_last_error())) {
        t_check(m.n == 7, "%d layers", m.n);
        check_out(&m, 0, 8, 14, 14, 0);
        check_out(&m, 3, 16, 14, 14, 0);
        check_out(&m, 5, 16, 1, 1, 1);
        check_param(&m.params, "conv2d_1/w", 4, 8, 1, 3, 3);
        check_param(&m.params, "batchnorm_1/gamma", 1, 8, 0, 0, 0);
        check_param(&m.params, "batchnorm_1/beta", 1, 8, 0, 0, 0);
        check_param(&m.params, "conv2d_2/w", 4, 16, 8, 3, 3);
        check_param(&m.params, "dense_1/w", 2, 10, 16, 0, 0);
        check_param(&m.buffers, "batchnorm_1/running_mean", 1, 8, 0, 0, 0);
        check_param(&m.buffers, "batchnorm_1/running_var", 1, 8, 0, 0, 0);
        t_check(m.layer[0].stride == 2 && m.layer[0].pad == 1, "stride %d pad %d", m.layer[0].stride, m.layer[0].pad);
        ct_seq_cnn_free(&m);
    }

    t_case("arch/maxpool with stride, sigmoid, batchnorm on flat features, multi-channel input");
    if (t_check(ct_seq_cnn_build(&m, "conv4k3,sigmoid,maxpool3s2,flatten,dense32,batchnorm,relu,dropout0,dense5", 3, 12, 12, 5) == CT_OK,
                "build: %s", ct_last_error())) {
        check_out(&m, 0, 4, 10, 10, 0);
        check_out(&m, 2, 4, 4, 4, 0);
        check_out(&m, 3, 64, 1, 1, 1);
        check_param(&m.params, "conv2d_1/w", 4, 4, 3, 3, 3);
        check_param(&m.params, "dense_1/w", 2, 32, 64, 0, 0);
        check_param(&m.params, "batchnorm_1/gamma", 1, 32, 0, 0, 0);
        check_param(&m.params, "dense_2/w", 2, 5, 32, 0, 0);
        t_check(m.layer[7].p == 0.0f, "dropout0 parses as p = 0");
        ct_seq_cnn_free(&m);
    }

    t_case("arch/no parameters before the first dense: backward stops there");
    if (t_check(ct_seq_cnn_build(&m, "maxpool2,relu,flatten,dense10", 2, 6, 6, 10) == CT_OK, "build: %s", ct_last_error())) {
        t_check(m.first_param == 3, "first parameter layer %d, want 3", m.first_param);
        t_check(m.layer[1].in_place, "relu after maxpool runs in place");
        ct_seq_cnn_free(&m);
    }
}

static void test_residual(void)
{
    const char *spec = "conv8k3p1,relu,save,conv8k3p1,batchnorm,relu,conv8k3p1,add,relu,maxpool2,"
                       "save,save,conv8k3p1,add,tanh,add,gap,dense10";
    t_case("arch/residual blocks: save and add matched like parentheses, shapes, names, in-place plan, skip buffers");
    seq_cnn m;
    if (!t_check(ct_seq_cnn_build(&m, spec, 1, 12, 12, 10) == CT_OK, "build: %s", ct_last_error())) return;
    t_check(m.n == 18 && m.depth == 2, "%d layers, depth %d; want 18, 2", m.n, m.depth);
    t_check(m.layer[7].kind == SEQ_ADD && m.layer[7].save == 2 && m.layer[7].depth == 0, "first add closes layer %d at depth %d",
            m.layer[7].save + 1, m.layer[7].depth);
    t_check(m.layer[13].save == 11 && m.layer[13].depth == 1 && m.layer[11].depth == 1, "the inner add closes layer %d at depth %d",
            m.layer[13].save + 1, m.layer[13].depth);
    t_check(m.layer[15].save == 10 && m.layer[15].depth == 0 && m.layer[10].depth == 0, "the outer add closes layer %d at depth %d",
            m.layer[15].save + 1, m.layer[15].depth);
    check_out(&m, 2, 8, 12, 12, 0);    /* save: its input, unchanged */
    check_out(&m, 7, 8, 12, 12, 0);    /* add */
    check_out(&m, 15, 8, 6, 6, 0);
    /* names and parameters only for the layers that have them, numbered per kind as before */
    const char *order[8] = { "conv2d_1/w", "conv2d_1/b", "conv2d_2/w", "conv2d_2/b", "batchnorm_1/gamma", "batchnorm_1/beta",
                             "conv2d_3/w", "conv2d_3/b" };
    for (int i = 0; i < 8 && i < m.params.n; i++)
        t_check(!strcmp(m.params.p[i].name, order[i]), "parameter %d is %s, want %s", i, m.params.p[i].name, order[i]);
    t_check(m.layer[2].name[0] == 0 && m.layer[7].name[0] == 0, "save and add have no parameters");
    /* relu before a save runs in place (the save keeps the result), the relu and tanh after an add
     * too; nothing writes over a kept activation */
    t_check(m.layer[1].in_place && m.layer[8].in_place && m.layer[14].in_place, "in place: relu %d, relu %d, tanh %d",
            m.layer[1].in_place, m.layer[8].in_place, m.layer[14].in_place);
    char buf[4096];
    ct_seq_cnn_summary(&m, buf, sizeof buf);
    t_check(strstr(buf, "save") && strstr(buf, "add"), "summary lists save and add:\n%s", buf);
    if (t_check(ct_seq_cnn_plan(&m, 3) == CT_OK, "plan: %s", ct_last_error()))
        t_check(m.skip_grad[0] && m.skip_grad[1] && !m.skip_grad[2] && m.skip_grad[0] != m.skip_grad[1]
                && m.skip_grad[0] != m.grad[0] && m.skip_grad[0] != m.grad[1], "one skip gradient buffer per level");
    ct_seq_cnn_free(&m);

    t_case("arch/a relu right after a save does not run in place (the save keeps what it would overwrite)");
    if (t_check(ct_seq_cnn_build(&m, "conv4k3,save,relu,conv4k3p1,add,flatten,dense12,save,dropout0.5,add,dense3", 1, 8, 8, 3) == CT_OK,
                "build: %s", ct_last_error())) {
        t_check(!m.layer[2].in_place && !m.layer[8].in_place, "in place: relu %d, dropout %d; want 0 0", m.layer[2].in_place,
                m.layer[8].in_place);
        ct_seq_cnn_free(&m);
    }
}

/* The spec must fail with CT_EINVAL and a message containing each of the phrases. */
static void bad(const char *spec, int C, int H, int W, int classes, const char *p1, const char *p2)
{
    t_case("arch/rejects \"%s\" (%dx%dx%d, %d classes)", spec, C, H, W, classes);
    seq_cnn m;
    ct_status st = ct_seq_cnn_build(&m, spec, C, H, W, classes);
    const char *msg = ct_last_error();
    t_check(st == CT_EINVAL, "status %s, want invalid argument (message: %s)", ct_status_name(st), msg);
    t_check(strstr(msg, p1) != NULL, "message \"%s\" should contain \"%s\"", msg, p1);
    if (p2) t_check(strstr(msg, p2) != NULL, "message \"%s\" should contain \"%s\"", msg, p2);
    t_check(m.params.n == 0 && m.params.data == NULL && m.n == 0, "a failed build must leave an empty model");
    ct_seq_cnn_free(&m);   /* safe on a failed build */
}

static void test_errors(void)
{
    bad("conv32k3,relu,pool2,flatten,dense10", 1, 28, 28, 10, "layer 3 \"pool2\"", "unknown layer");
    bad("conv,relu,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv\"", "missing the number of filters");
    bad("conv32,relu,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv32\"", "kernel size");
    bad("conv32k,relu,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv32k\"", "missing the kernel size");
    bad("conv32k3s,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv32k3s\"", "missing the stride");
    bad("conv32k3s0,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv32k3s0\"", "stride must be");
    bad("conv32k3x,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv32k3x\"", "unexpected \"x\"");
    bad("conv0k3,flatten,dense10", 1, 28, 28, 10, "layer 1 \"conv0k3\"", "number of filters must be");
    bad("flatten,dense", 1, 28, 28, 10, "layer 2 \"dense\"", "missing the number of units");
    bad("flatten,dense99999999999,dense10", 1, 28, 28, 10, "layer 2 \"dense99999999999\"", "must be 1 to");
    bad("flatten,dropout,dense10", 1, 28, 28, 10, "layer 2 \"dropout\"", "missing the drop probability");
    bad("flatten,dropout1.5,dense10", 1, 28, 28, 10, "layer 2 \"dropout1.5\"", "[0, 1)");
    bad("flatten,dropout0.5x,dense10", 1, 28, 28, 10, "layer 2 \"dropout0.5x\"", "[0, 1)");
    bad("conv8k3,conv8k30,flatten,dense10", 1, 28, 28, 10, "layer 2 \"conv8k30\"", "larger than its input 26x26");
    bad("conv8k3,maxpool30,flatten,dense10", 1, 28, 28, 10, "layer 2 \"maxpool30\"", "larger than its input 26x26");
    bad("conv8k3,dense10", 1, 28, 28, 10, "layer 2 \"dense10\"", "put flatten (or gap) before it");
    bad("conv8k3,flatten,conv8k3,flatten,dense10", 1, 28, 28, 10, "layer 3 \"conv8k3\"", "input is flat");
    bad("flatten,maxpool2,dense10", 1, 28, 28, 10, "layer 2 \"maxpool2\"", "input is flat");
    bad("conv8k3,flatten,dense12", 1, 28, 28, 10, "layer 3 \"dense12\"", "end the spec with dense10");
    bad("conv8k3,relu", 1, 28, 28, 10, "layer 2 \"relu\"", "flatten,dense10");
    bad("conv8k3,,flatten,dense10", 1, 28, 28, 10, "layer 2 is empty", NULL);
    bad("conv8k3,flatten,dense10,", 1, 28, 28, 10, "layer 4 is empty", NULL);
    bad("conv8k3,relu2,flatten,dense10", 1, 28, 28, 10, "layer 2 \"relu2\"", "takes no number");
    bad("", 1, 28, 28, 10, "spec is empty", NULL);
    bad("flatten", 10, 1, 1, 10, "nothing to train", NULL);
    bad("conv8k3,flatten,dense1", 1, 28, 28, 1, "at least 2 classes", NULL);
    /* residual blocks */
    bad("conv8k3,save,conv16k3p1,add,flatten,dense10", 1, 28, 28, 10, "layer 4 \"add\": the block from layer 2 \"save\" turns "
        "8x26x26 feature maps into 16x26x26 feature maps", "same shape");
    bad("conv8k3,save,conv8k3,add,flatten,dense10", 1, 28, 28, 10, "8x26x26 feature maps into 8x24x24", "same shape");
    bad("conv8k3,save,flatten,add,dense10", 1, 28, 28, 10, "layer 4 \"add\"", "into 5408 values");
    bad("conv8k3,add,flatten,dense10", 1, 28, 28, 10, "layer 2 \"add\": no residual block is open", "save");
    bad("conv8k3,save,conv8k3p1,add,add,flatten,dense10", 1, 28, 28, 10, "layer 5 \"add\": no residual block is open", NULL);
    bad("conv8k3,save,save,conv8k3p1,add,flatten,dense10", 1, 28, 28, 10, "layer 2 \"save\"", "never closed");
    bad("conv8k3,save,save,save,save,save,add,add,add,add,add,flatten,dense10", 1, 28, 28, 10, "layer 6 \"save\"",
        "more than 4 residual blocks open");
    bad("conv8k3,save2,add,flatten,dense10", 1, 28, 28, 10, "layer 2 \"save2\"", "takes no number");
    bad("conv8k3,addx,flatten,dense10", 1, 28, 28, 10, "layer 2 \"addx\"", "takes no number");
}

void suite_arch(void)
{
    test_default();
    test_options();
    test_residual();
    test_errors();
}
