/* json.h - ctrain's JSON result files (`ctrain time --json`, read back by
 * `ctrain time --compare`; `ctrain eval --json`) on jansson, Debian's
 * libjansson: jansson parses, escapes and prints; this file holds the one way
 * ctrain writes its files and the one way it reports a file it cannot read.
 *
 * Writer: the caller says what comes next, in order, and the document is built
 * as jansson values, then printed when finished:
 *
 *   ct_json_writer w;
 *   ct_json_writer_init(&w, f);
 *   ct_json_object_begin(&w, NULL);          // the root
 *   ct_json_str(&w, "model", "cnn");         // "model": "cnn"
 *   ct_json_array_begin(&w, "epochs");       // "epochs": [
 *   ct_json_num(&w, NULL, 1.25);             //   inside an array the key is NULL
 *   ct_json_array_end(&w);
 *   ct_json_object_end(&w);
 *   if (ct_json_writer_finish(&w) != CT_OK) ...   // a write failed (disk full)
 *
 * The text is what ctrain has always written: members in the order given, two
 * spaces of indent, "key": value, a newline at the end; numbers with 10
 * significant digits (a whole number below 1e10 without a decimal point, as
 * "%.10g" prints it); NaN and infinities, which JSON cannot express, as null.
 * One difference from the files of ctrain's own writer before jansson: an
 * exponent has no '+' and no leading zero (2.5e-7, 1.2e11, not 2.5e-07, 1.2e+11),
 * the same number to every JSON reader.
 * Strings are escaped as RFC 8259 asks (\" \\ \n \t \r \b \f, other control
 * characters as \u00XX); a string that is not UTF-8 keeps its ASCII and the
 * rest becomes '?', since a JSON text is UTF-8.
 *
 * Reader: jansson's tree (json_t); a text that does not parse is an error naming
 * the source, jansson's line and column and what it expected, e.g.
 *   "run.json:12:5: '}' expected near '"x"'". */
#ifndef CT_JSON_H
#define CT_JSON_H
#include <stddef.h>
#include <stdio.h>
#include <jansson.h>
#include "core/error.h"

#define CT_JSON_MAX_DEPTH 64

/* ---- writer ---- */
typedef struct {
    FILE *f;
    json_t *root;
    int depth;                          /* open objects and arrays */
    json_t *open[CT_JSON_MAX_DEPTH];    /* [depth]: the innermost last */
    int failed;                         /* a value could not be made (out of memory) */
} ct_json_writer;

void      ct_json_writer_init(ct_json_writer *w, FILE *f);
/* key: the member's name inside an object; NULL for an array element or the root. */
void      ct_json_object_begin(ct_json_writer *w, const char *key);
void      ct_json_object_end(ct_json_writer *w);
void      ct_json_array_begin(ct_json_writer *w, const char *key);
void      ct_json_array_end(ct_json_writer *w);
void      ct_json_str(ct_json_writer *w, const char *key, const char *v);   /* v NULL: null */
void      ct_json_num(ct_json_writer *w, const char *key, double v);
void      ct_json_int(ct_json_writer *w, const char *key, long v);
void      ct_json_bool(ct_json_writer *w, const char *key, int v);
void      ct_json_null(ct_json_writer *w, const char *key);
/* Prints the document and a newline; CT_EIO if a write failed, CT_ENOMEM if a value could
 * not be made. The FILE stays open; the document is freed either way. */
ct_status ct_json_writer_finish(ct_json_writer *w);

/* ---- reader ---- */
/* Parses text [len] (`source` names it in messages) or the file at `path` into *root, which
 * the caller frees with json_decref. A missing file is CT_EIO naming it; text that is not
 * JSON is CT_EFORMAT "SOURCE:LINE:COLUMN: what jansson expected". */
ct_status   ct_json_parse(json_t **root, const char *text, size_t len, const char *source);
ct_status   ct_json_load(json_t **root, const char *path);
/* "object", "array", "string", "number", "true/false" or "null": for messages. */
const char *ct_json_kind(const json_t *v);

#endif
