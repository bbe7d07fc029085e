/* json.c - the JSON writer and reader of json.h. The reader is a recursive
 * descent over RFC 8259's grammar:
 *
 *   value  := object | array | string | number | "true" | "false" | "null"
 *   object := "{" [ string ":" value { "," string ":" value } ] "}"
 *   array  := "[" [ value { "," value } ] "]"
 *   number := [ "-" ] ( "0" | [1-9][0-9]* ) [ "." [0-9]+ ] [ ( "e" | "E" ) [ "+" | "-" ] [0-9]+ ]
 *
 * with whitespace (space, tab, newline, carriage return) allowed between tokens.
 */
#include <ctype.h>
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

void ct_json_write_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"':  fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* Before any value: the comma after the previous sibling, a newline and the
 * indent, and the member's name inside an object. */
static void value_start(ct_json_writer *w, const char *key)
{
    if (w->depth > 0) {
        fputs(w->count[w->depth - 1]++ ? ",\n" : "\n", w->f);
        fprintf(w->f, "%*s", 2 * w->depth, "");
    }
    if (key) {
        ct_json_write_string(w->f, key);
        fputs(": ", w->f);
    }
}

static void open_level(ct_json_writer *w, const char *key, char c)
{
    CT_ASSERT(w->depth < CT_JSON_MAX_DEPTH);
    value_start(w, key);
    fputc(c, w->f);
    w->count[w->depth++] = 0;
}

static void close_level(ct_json_writer *w, char c)
{
    CT_ASSERT(w->depth > 0);
    int had = w->count[--w->depth];
    if (had) fprintf(w->f, "\n%*s", 2 * w->depth, "");
    fputc(c, w->f);
}

void ct_json_object_begin(ct_json_writer *w, const char *key) { open_level(w, key, '{'); }
void ct_json_object_end(ct_json_writer *w) { close_level(w, '}'); }
void ct_json_array_begin(ct_json_writer *w, const char *key) { open_level(w, key, '['); }
void ct_json_array_end(ct_json_writer *w) { close_level(w, ']'); }

void ct_json_str(ct_json_writer *w, const char *key, const char *v)
{
    value_start(w, key);
    if (v) ct_json_write_string(w->f, v);
    else fputs("null", w->f);
}

void ct_json_num(ct_json_writer *w, const char *key, double v)
{
    value_start(w, key);
    if (isfinite(v)) fprintf(w->f, "%.10g", v);
    else fputs("null", w->f);
}

void ct_json_int(ct_json_writer *w, const char *key, long v) { value_start(w, key); fprintf(w->f, "%ld", v); }
void ct_json_bool(ct_json_writer *w, const char *key, int v) { value_start(w, key); fputs(v ? "true" : "false", w->f); }
void ct_json_null(ct_json_writer *w, const char *key) { value_start(w, key); fputs("null", w->f); }

ct_status ct_json_writer_finish(ct_json_writer *w)
{
    CT_ASSERT(w->depth == 0);
    fputc('\n', w->f);
    if (fflush(w->f) != 0 || ferror(w->f)) return ct_fail(CT_EIO, "writing JSON failed (disk full or file not writable?)");
    return CT_OK;
}

/* ================= reader ================= */

typedef struct {
    const char *s, *end;     /* the text */
    const char *p;           /* the next character */
    const char *source;      /* for messages */
    int depth;
} parser;

static void where(const parser *ps, const char *at, int *line, int *col)
{
    *line = 1; *col = 1;
    for (const char *q = ps->s; q < at; q++) {
        if (*q == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

/* "SOURCE:LINE:COL: what was wrong" at position `at`. */
static ct_status parse_error(const parser *ps, const char *at, const char *what)
{
    int line, col;
    where(ps, at, &line, &col);
    if (at >= ps->end) return ct_fail(CT_EFORMAT, "%s:%d:%d: %s (the text ends there: truncated file?)", ps->source, line, col, what);
    return ct_fail(CT_EFORMAT, "%s:%d:%d: %s", ps->source, line, col, what);
}

static void skip_space(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int peek(const parser *ps) { return ps->p < ps->end ? (unsigned char)*ps->p : -1; }

/* Appends one code point as UTF-8 to buf (room for 4 more bytes is guaranteed by the caller). */
static size_t put_utf8(char *buf, size_t k, unsigned cp)
{
    if (cp < 0x80) buf[k++] = (char)cp;
    else if (cp < 0x800) { buf[k++] = (char)(0xC0 | cp >> 6); buf[k++] = (char)(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
        buf[k++] = (char)(0xE0 | cp >> 12); buf[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[k++] = (char)(0x80 | (cp & 0x3F));
    } else {
        buf[k++] = (char)(0xF0 | cp >> 18); buf[k++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        buf[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)); buf[k++] = (char)(0x80 | (cp & 0x3F));
    }
    return k;
}

static int hex4(const char *p, const char *end, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        if (p + i >= end || !isxdigit((unsigned char)p[i])) return 0;
        int c = (unsigned char)p[i];
        *v = *v * 16 + (unsigned)(isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
    }
    return 1;
}

/* A string starting at the opening quote: *out receives the decoded, malloc'd value. */
static ct_status parse_string(parser *ps, char **out)
{
    const char *start = ps->p++;   /* the opening quote */
    /* The decoded string is never longer than the text it came from. */
    const char *q = ps->p;
    while (q < ps->end && *q != '"') q += *q == '\\' ? 2 : 1;
    if (q >= ps->end) return parse_error(ps, start, "unterminated string");
    char *buf = ct_malloc((size_t)(q - ps->p) + 5, "JSON string");
    if (!buf) return CT_ENOMEM;
    size_t k = 0;
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) { free(buf); return parse_error(ps, ps->p, "control character inside a string (write it as \\n, \\t or \\u00XX)"); }
        if (c != '\\') { buf[k++] = (char)c; ps->p++; continue; }
        const char *esc = ps->p++;
        char e = *ps->p++;
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) { buf[k++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"]; continue; }
        unsigned cp, lo;
        if (e != 'u' || !hex4(ps->p, ps->end, &cp)) { free(buf); return parse_error(ps, esc, "bad escape in a string (expected \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX)"); }
        ps->p += 4;
        if (cp >= 0xD800 && cp < 0xDC00) {          /* a high surrogate must be followed by a low one */
            if (ps->p + 1 < ps->end && ps->p[0] == '\\' && ps->p[1] == 'u' && hex4(ps->p + 2, ps->end, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                ps->p += 6;
            } else { free(buf); return parse_error(ps, esc, "unpaired UTF-16 surrogate in a \\u escape"); }
        } else if (cp >= 0xDC00 && cp < 0xE000) { free(buf); return parse_error(ps, esc, "unpaired UTF-16 surrogate in a \\u escape"); }
        if (cp == 0) { free(buf); return parse_error(ps, esc, "\\u0000 inside a string is not supported"); }
        k = put_utf8(buf, k, cp);
    }
    ps->p++;   /* the closing quote */
    buf[k] = '\0';
    *out = buf;
    return CT_OK;
}

static ct_status parse_number(parser *ps, double *v)
{
    const char *start = ps->p, *q = ps->p;
    if (q < ps->end && *q == '-') q++;
    if (q < ps->end && *q == '0') q++;
    else if (q < ps->end && *q >= '1' && *q <= '9') while (q < ps->end && isdigit((unsigned char)*q)) q++;
    else return parse_error(ps, start, "expected a value (a number, string, object, array, true, false or null)");
    if (q < ps->end && *q == '.') {
        if (++q >= ps->end || !isdigit((unsigned char)*q)) return parse_error(ps, q, "expected a digit after the decimal point");
        while (q < ps->end && isdigit((unsigned char)*q)) q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-')) q++;
        if (q >= ps->end || !isdigit((unsigned char)*q)) return parse_error(ps, q, "expected a digit in the exponent");
        while (q < ps->end && isdigit((unsigned char)*q)) q++;
    }
    char tmp[64];
    size_t n = (size_t)(q - start);
    if (n >= sizeof tmp) return parse_error(ps, start, "number too long");
    memcpy(tmp, start, n);
    tmp[n] = '\0';
    *v = strtod(tmp, NULL);
    ps->p = q;
    return CT_OK;
}

static ct_status parse_value(parser *ps, ct_json *v);

/* Room for one more child of an array or object. */
static ct_json *add_item(ct_json *v)
{
    if (v->n == v->cap) {
        int cap = v->cap ? 2 * v->cap : 8;
        ct_json *item = realloc(v->item, (size_t)cap * sizeof *item);
        if (!item) { ct_fail(CT_ENOMEM, "out of memory reading JSON"); return NULL; }
        v->item = item;
        v->cap = cap;
    }
    ct_json *it = &v->item[v->n++];
    memset(it, 0, sizeof *it);
    return it;
}

/* The elements of an array or the members of an object, after its opening bracket. */
static ct_status parse_children(parser *ps, ct_json *v)
{
    int object = v->type == CT_JSON_OBJECT;
    char close = object ? '}' : ']';
    skip_space(ps);
    if (peek(ps) == close) { ps->p++; return CT_OK; }
    for (;;) {
        ct_json *it = add_item(v);
        if (!it) return CT_ENOMEM;
        skip_space(ps);
        if (object) {
            if (peek(ps) != '"') return parse_error(ps, ps->p, "expected a member name in double quotes");
            CT_TRY(parse_string(ps, &it->key));
            skip_space(ps);
            if (peek(ps) != ':') return parse_error(ps, ps->p, "expected ':' after the member name");
            ps->p++;
        }
        CT_TRY(parse_value(ps, it));
        skip_space(ps);
        if (peek(ps) == ',') { ps->p++; continue; }
        if (peek(ps) == close) { ps->p++; return CT_OK; }
        return parse_error(ps, ps->p, object ? "expected ',' or '}' after an object member" : "expected ',' or ']' after an array element");
    }
}

static ct_status parse_value(parser *ps, ct_json *v)
{
    skip_space(ps);
    where(ps, ps->p, &v->line, &v->col);
    int c = peek(ps);
    if (c == '{' || c == '[') {
        if (ps->depth >= CT_JSON_MAX_DEPTH) return parse_error(ps, ps->p, "nested too deeply");
        v->type = c == '{' ? CT_JSON_OBJECT : CT_JSON_ARRAY;
        ps->p++;
        ps->depth++;
        ct_status st = parse_children(ps, v);
        ps->depth--;
        return st;
    }
    if (c == '"') { v->type = CT_JSON_STRING; return parse_string(ps, &v->str); }
    static const struct { const char *word; ct_json_type type; int boolean; } words[] = {
        { "true", CT_JSON_BOOL, 1 }, { "false", CT_JSON_BOOL, 0 }, { "null", CT_JSON_NULL, 0 } };
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(ps->end - ps->p) >= n && !strncmp(ps->p, words[i].word, n)) {
            v->type = words[i].type;
            v->boolean = words[i].boolean;
            ps->p += n;
            return CT_OK;
        }
    }
    v->type = CT_JSON_NUMBER;
    return parse_number(ps, &v->num);
}

ct_status ct_json_parse(ct_json *root, const char *text, size_t len, const char *source)
{
    memset(root, 0, sizeof *root);
    parser ps = { text, text + len, text, source ? source : "JSON", 0 };
    ct_status st = parse_value(&ps, root);
    if (st == CT_OK) {
        skip_space(&ps);
        if (ps.p < ps.end) st = parse_error(&ps, ps.p, "unexpected text after the end of the document");
    }
    if (st != CT_OK) { ct_json_free(root); memset(root, 0, sizeof *root); }
    return st;
}

ct_status ct_json_load(ct_json *root, const char *path)
{
    memset(root, 0, sizeof *root);
    FILE *f = fopen(path, "rb");
    if (!f) return ct_fail(CT_EIO, "%s: cannot open the file (does it exist?)", path);
    size_t cap = 1 << 16, n = 0;
    char *text = ct_malloc(cap, "JSON text");
    ct_status st = text ? CT_OK : CT_ENOMEM;
    while (st == CT_OK) {
        n += fread(text + n, 1, cap - n, f);
        if (n < cap) break;
        char *bigger = realloc(text, cap * 2);
        if (!bigger) st = ct_fail(CT_ENOMEM, "%s: out of memory reading the file", path);
        else { text = bigger; cap *= 2; }
    }
    if (st == CT_OK && ferror(f)) st = ct_fail(CT_EIO, "%s: read error", path);
    fclose(f);
    if (st == CT_OK && n == 0) st = ct_fail(CT_EFORMAT, "%s: the file is empty", path);
    if (st == CT_OK) st = ct_json_parse(root, text, n, path);
    free(text);
    return st;
}

void ct_json_free(ct_json *v)
{
    for (int i = 0; i < v->n; i++) ct_json_free(&v->item[i]);
    free(v->item);
    free(v->str);
    free(v->key);
    v->item = NULL; v->str = NULL; v->key = NULL;
    v->n = v->cap = 0;
}

const ct_json *ct_json_find(const ct_json *obj, const char *key)
{
    if (!obj || obj->type != CT_JSON_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (!strcmp(obj->item[i].key, key)) return &obj->item[i];
    return NULL;
}

const char *ct_json_type_name(ct_json_type t)
{
    static const char *names[] = { "null", "true/false", "number", "string", "array", "object" };
    return (int)t >= 0 && (int)t < 6 ? names[t] : "?";
}
