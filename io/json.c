/* json.c - ctrain's JSON files on jansson (see json.h): the writer builds the
 * document as jansson values and prints it with ctrain's layout; the reader
 * turns jansson's errors into "SOURCE:LINE:COLUMN: what was expected". */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "io/json.h"

/* ================= writer ================= */

void ct_json_writer_init(ct_json_writer *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
}

/* Places v (a new reference, or NULL when it could not be made) as the next value:
 * the root, a member of the innermost object or an element of the innermost array.
 * Returns v, or NULL when it could not be placed. */
static json_t *place(ct_json_writer *w, const char *key, json_t *v)
{
    if (!v) { w->failed = 1; return NULL; }
    if (w->depth == 0) {
        CT_ASSERT(!w->root);   /* one document */
        w->root = v;
        return v;
    }
    json_t *parent = w->open[w->depth - 1];
    if (!parent) { json_decref(v); return NULL; }   /* inside a container that failed */
    int r;
    if (json_is_object(parent)) {
        CT_ASSERT(key);
        r = json_object_set_new(parent, key, v);
    } else {
        CT_ASSERT(!key);
        r = json_array_append_new(parent, v);
    }
    if (r != 0) { w->failed = 1; return NULL; }   /* jansson has freed v */
    return v;
}

static void open_level(ct_json_writer *w, const char *key, json_t *v)
{
    CT_ASSERT(w->depth < CT_JSON_MAX_DEPTH);
    json_t *placed = place(w, key, v);
    w->open[w->depth++] = placed;
}

static void close_level(ct_json_writer *w)
{
    CT_ASSERT(w->depth > 0);
    w->depth--;
}

void ct_json_object_begin(ct_json_writer *w, const char *key) { open_level(w, key, json_object()); }
void ct_json_object_end(ct_json_writer *w) { close_level(w); }
void ct_json_array_begin(ct_json_writer *w, const char *key) { open_level(w, key, json_array()); }
void ct_json_array_end(ct_json_writer *w) { close_level(w); }

/* v as a JSON string: jansson takes only valid UTF-8 (a JSON text is UTF-8). Text that
 * is not (a Latin-1 host name, a path of raw bytes) keeps its ASCII, the rest as '?'. */
static json_t *utf8_string(const char *v)
{
    json_t *s = json_string(v);
    if (s) return s;
    char *t = strdup(v);
    if (!t) return NULL;
    for (char *p = t; *p; p++) if ((unsigned char)*p >= 0x80) *p = '?';
    s = json_string(t);
    free(t);
    return s;
}

void ct_json_str(ct_json_writer *w, const char *key, const char *v) { place(w, key, v ? utf8_string(v) : json_null()); }

/* A whole number that "%.10g" prints without an exponent is written as an integer,
 * so that 20 stays "20" (jansson prints every real with a decimal point). */
void ct_json_num(ct_json_writer *w, const char *key, double v)
{
    if (!isfinite(v)) place(w, key, json_null());
    else if (v == floor(v) && fabs(v) < 1e10) place(w, key, json_integer((json_int_t)v));
    else place(w, key, json_real(v));
}

void ct_json_int(ct_json_writer *w, const char *key, long v) { place(w, key, json_integer((json_int_t)v)); }
void ct_json_bool(ct_json_writer *w, const char *key, int v) { place(w, key, json_boolean(v)); }
void ct_json_null(ct_json_writer *w, const char *key) { place(w, key, json_null()); }

ct_status ct_json_writer_finish(ct_json_writer *w)
{
    CT_ASSERT(w->depth == 0);
    ct_status st = CT_OK;
    if (w->failed || !w->root) st = ct_fail(CT_ENOMEM, "out of memory building the JSON document");
    else if (json_dumpf(w->root, w->f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10)) != 0
             || fputc('\n', w->f) == EOF || fflush(w->f) != 0 || ferror(w->f))
        st = ct_fail(CT_EIO, "writing JSON failed (disk full or file not writable?)");
    json_decref(w->root);
    w->root = NULL;
    return st;
}

/* ================= reader ================= */

static ct_status parse_error(const json_error_t *e, const char *source)
{
    int eof = strstr(e->text, "end of file") != NULL;
    return ct_fail(CT_EFORMAT, "%s:%d:%d: %s%s", source, e->line, e->column, e->text,
                   eof ? " (the text ends there: truncated file?)" : "");
}

ct_status ct_json_parse(json_t **root, const char *text, size_t len, const char *source)
{
    json_error_t e;
    *root = json_loadb(text, len, JSON_DECODE_ANY, &e);
    return *root ? CT_OK : parse_error(&e, source ? source : "JSON");
}

ct_status ct_json_load(json_t **root, const char *path)
{
    *root = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ct_fail(CT_EIO, "%s: cannot open the file (does it exist?)", path);
    json_error_t e;
    *root = json_loadf(f, JSON_DECODE_ANY, &e);
    int bad_read = ferror(f);
    fclose(f);
    if (bad_read) { json_decref(*root); *root = NULL; return ct_fail(CT_EIO, "%s: read error", path); }
    return *root ? CT_OK : parse_error(&e, path);
}

const char *ct_json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:  return "object";
    case JSON_ARRAY:   return "array";
    case JSON_STRING:  return "string";
    case JSON_INTEGER: case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE:   return "true/false";
    default:           return "null";
    }
}
