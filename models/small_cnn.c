/* small_cnn.c - the small CNN classifier as a sequential-CNN spec (see small_cnn.h). */
#include <stdio.h>
#include "models/small_cnn.h"

small_cnn_config ct_small_cnn_defaults(void)
{
    return (small_cnn_config){ .channels = 1, .height = 12, .width = 12, .filters = 8, .kernel = 3,
                               .classes = 4, .dropout = 0.25f };
}

ct_status ct_small_cnn_spec(char *buf, size_t cap, const small_cnn_config *c)
{
    if (c->kernel % 2 == 0) return ct_fail(CT_EINVAL, "small-cnn: kernel %d must be odd for 'same' padding", c->kernel);
    if (c->classes < 2) return ct_fail(CT_EINVAL, "small-cnn: need at least 2 classes (got %d)", c->classes);
    if (!(c->dropout >= 0 && c->dropout < 1)) return ct_fail(CT_EINVAL, "small-cnn: dropout must be in [0, 1) (got %g)", c->dropout);
    /* %.9g: the float's exact decimal, so the parsed dropout is the same float */
    int n = snprintf(buf, cap, "conv%dk%dp%d,batchnorm,relu,maxpool2,flatten,dropout%.9g,dense%d", c->filters, c->kernel,
                     c->kernel / 2, (double)c->dropout, c->classes);
    if (n < 0 || (size_t)n >= cap) return ct_fail(CT_EINVAL, "small-cnn: the spec does not fit %zu characters", cap);
    return CT_OK;
}

ct_status ct_small_cnn_build(seq_cnn *m, const small_cnn_config *cfg)
{
    char spec[256];
    CT_TRY(ct_small_cnn_spec(spec, sizeof spec, cfg));
    ct_status st = ct_seq_cnn_build(m, spec, cfg->channels, cfg->height, cfg->width, cfg->classes);
    if (st != CT_OK) return ct_fail(st, "small-cnn: %s", ct_last_error());
    return CT_OK;
}
