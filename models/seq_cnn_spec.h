/* seq_cnn_spec.h - the parser of the sequential CNN's architecture spec (grammar in
 * models/seq_cnn.h): the text becomes the model's layer list, each layer with its
 * kind, options and input and output shapes, residual blocks matched (each add with
 * its save), before anything is allocated. The kinds themselves (their words, how
 * their options read, what shape they output) are rows of ct_seq_kinds; this file
 * only walks the text and the table.
 *
 * Every failure is CT_EINVAL with one line naming the layer by its position and text
 * ("spec layer 3 \"pool2\": unknown layer; ..."). The helpers below are what the
 * kinds' parse and shape functions use to read numbers and report in that form.
 */
#ifndef CT_SEQ_CNN_SPEC_H
#define CT_SEQ_CNN_SPEC_H
#include "models/seq_cnn.h"

/* Fills m->spec, the input sizes, m->classes, m->n and m->layer[] (kind, text, options,
 * shapes, blocks) and m->depth from `spec` for inputs [C, H, W]. A classifier (encoder = 0)
 * must end in `classes` flat values, an encoder in a flat embedding; the spec must have a
 * layer with parameters. m must be zeroed. */
ct_status ct_seq_spec_parse(seq_cnn *m, const char *spec, int C, int H, int W, int classes, int encoder);

/* ---- for the kinds' parse and shape functions (t: the token, pos: its place) ---- */

/* The unsigned decimal at *s, in [lo, hi]; advances *s. `what` names it and `example`
 * shows it written, for the message when it is missing or out of range. */
ct_status ct_seq_spec_uint(const char **s, int *v, int lo, int hi, int pos, const char *t, const char *what,
                           const char *example);
/* Fails unless the token ends at s ("unexpected ... (the form is <form>)"). */
ct_status ct_seq_spec_end(const char *s, int pos, const char *t, const char *form);
/* Fails unless l's input is feature maps; `advice` says where the layer belongs. */
ct_status ct_seq_spec_need_maps(const seq_layer *l, int pos, const char *advice);
/* "8x14x14 feature maps" or "128 values". */
const char *ct_seq_shape_text(char *buf, size_t cap, int c, int h, int w, int flat);

#endif
