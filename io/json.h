/* json.h - a small JSON writer and reader, enough for ctrain's result files
 * (`ctrain time --json`, read back by `ctrain time --compare`).
 *
 * Writer: streams pretty-printed JSON (two-space indent) to a FILE, keeping
 * track of commas and nesting, so the caller only says what comes next:
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
 * Strings are escaped as RFC 8259 asks: \" \\ and the control characters
 * (\n \t \r \b \f, the rest as \u00XX); other bytes, UTF-8 included, are
 * written as they are. Numbers are written with 10 significant digits; NaN and
 * infinities, which JSON cannot express, are written as null.
 *
 * Reader: parses a whole document into a tree of ct_json values. Everything
 * RFC 8259 allows is accepted (\uXXXX escapes, surrogate pairs included, become
 * UTF-8), except a string containing \u0000, since values are C strings.
 * Errors name the source, the line and column and what was expected, e.g.
 *   "run.json:12:5: expected ',' or '}' after an object member".
 */
#ifndef CT_JSON_H
#define CT_JSON_H
#include <stddef.h>
#include <stdio.h>
#include "core/error.h"

#define CT_JSON_MAX_DEPTH 64

/* ---- writer ---- */
typedef struct {
    FILE *f;
    int depth;                          /* open objects and arrays */
    int count[CT_JSON_MAX_DEPTH];       /* values written so far at each level */
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
/* Ends the document with a newline; CT_EIO if any write failed. The FILE stays open. */
ct_status ct_json_writer_finish(ct_json_writer *w);
/* s as a quoted, escaped JSON string. */
void      ct_json_write_string(FILE *f, const char *s);

/* ---- reader ---- */
typedef enum { CT_JSON_NULL, CT_JSON_BOOL, CT_JSON_NUMBER, CT_JSON_STRING, CT_JSON_ARRAY, CT_JSON_OBJECT } ct_json_type;

typedef struct ct_json ct_json;
struct ct_json {
    ct_json_type type;
    int boolean;            /* CT_JSON_BOOL */
    double num;             /* CT_JSON_NUMBER */
    char *str;              /* CT_JSON_STRING: the decoded value, NUL-terminated */
    char *key;              /* a member of an object: its name; NULL otherwise */
    int n, cap;             /* CT_JSON_ARRAY / OBJECT: elements or members, in order */
    ct_json *item;          /* [n] */
    int line, col;          /* where the value starts in the text (1-based) */
};

/* Parses text [len] into *root (which the caller frees with ct_json_free).
 * `source` names the text in messages (a file name). On failure *root is empty. */
ct_status   ct_json_parse(ct_json *root, const char *text, size_t len, const char *source);
/* Reads and parses a file; CT_EIO names the file when it cannot be read. */
ct_status   ct_json_load(ct_json *root, const char *path);
void        ct_json_free(ct_json *v);   /* frees what v holds (not v itself) */
/* The first member of an object called key; NULL when absent or obj is not an object. */
const ct_json *ct_json_find(const ct_json *obj, const char *key);
const char *ct_json_type_name(ct_json_type t);   /* "null", "true/false", "number", ... */

#endif
