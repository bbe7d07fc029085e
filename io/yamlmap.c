/* yamlmap.c - flat YAML mappings through libyaml's event API (see yamlmap.h).
 *
 * Reading walks the parser's events: STREAM_START, DOCUMENT_START,
 * MAPPING_START, then key and value SCALARs in turn, MAPPING_END, DOCUMENT_END,
 * STREAM_END. Anything else where a key or a value belongs is refused with its
 * position. libyaml counts lines and columns from 0; messages count from 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "io/files.h"
#include "io/yamlmap.h"

void ct_yaml_map_free(ct_yaml_map *m)
{
    for (int i = 0; i < m->n; i++) { free(m->e[i].key); free(m->e[i].value); }
    free(m->e);
    m->e = NULL;
    m->n = 0;
}

static const char *event_what(yaml_event_type_t t)
{
    switch (t) {
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_MAPPING_START_EVENT:  return "a nested mapping";
    case YAML_ALIAS_EVENT:          return "an alias (*name)";
    case YAML_DOCUMENT_START_EVENT: return "a second document ('---')";
    default:                        return "something else";
    }
}

static ct_status syntax_error(const char *path, const yaml_parser_t *p)
{
    const char *problem = p->problem ? p->problem : "unreadable YAML";
    if (p->error == YAML_READER_ERROR)
        return ct_fail(CT_EFORMAT, "%s: byte %zu: %s: not a YAML text file", path, p->problem_offset, problem);
    if (p->context)
        return ct_fail(CT_EFORMAT, "%s:%zu:%zu: YAML syntax error: %s %s (line %zu, column %zu)", path, p->problem_mark.line + 1,
                       p->problem_mark.column + 1, problem, p->context, p->context_mark.line + 1, p->context_mark.column + 1);
    return ct_fail(CT_EFORMAT, "%s:%zu:%zu: YAML syntax error: %s", path, p->problem_mark.line + 1, p->problem_mark.column + 1, problem);
}

static char *dup_scalar(const yaml_event_t *ev)
{
    char *s = ct_malloc(ev->data.scalar.length + 1, "configuration value");
    if (s) { memcpy(s, ev->data.scalar.value, ev->data.scalar.length); s[ev->data.scalar.length] = '\0'; }
    return s;
}

/* The body of the walk: `state` says what the next event must be. */
enum { WANT_STREAM, WANT_DOCUMENT, WANT_MAPPING, WANT_KEY, WANT_VALUE, WANT_DOCUMENT_END, WANT_STREAM_END, DONE };

static ct_status take_event(const char *path, ct_yaml_map *m, int *state, const yaml_event_t *ev, int *cap)
{
    size_t line = ev->start_mark.line + 1, col = ev->start_mark.column + 1;
    yaml_event_type_t t = ev->type;
    switch (*state) {
    case WANT_STREAM:
        *state = WANT_DOCUMENT;
        return CT_OK;
    case WANT_DOCUMENT:
        if (t == YAML_STREAM_END_EVENT) { *state = DONE; return CT_OK; }   /* an empty file */
        *state = WANT_MAPPING;
        return CT_OK;
    case WANT_MAPPING:
        if (t == YAML_MAPPING_START_EVENT) { *state = WANT_KEY; return CT_OK; }
        if (t == YAML_SCALAR_EVENT && ev->data.scalar.length == 0) { *state = WANT_DOCUMENT_END; return CT_OK; }   /* only comments */
        return ct_fail(CT_EFORMAT, "%s:%zu:%zu: expected `key: value` lines, found %s", path, line, col,
                       t == YAML_SCALAR_EVENT ? "a single value" : event_what(t));
    case WANT_KEY:
        if (t == YAML_MAPPING_END_EVENT) { *state = WANT_DOCUMENT_END; return CT_OK; }
        if (t != YAML_SCALAR_EVENT) return ct_fail(CT_EFORMAT, "%s:%zu:%zu: a key must be a word, not %s", path, line, col, event_what(t));
        for (int i = 0; i < m->n; i++)
            if (strlen(m->e[i].key) == ev->data.scalar.length && !memcmp(m->e[i].key, ev->data.scalar.value, ev->data.scalar.length))
                return ct_fail(CT_EINVAL, "%s:%zu:%zu: '%s' is given twice (first on line %d)", path, line, col, m->e[i].key, m->e[i].key_line);
        if (m->n == *cap) {
            int nc = *cap ? *cap * 2 : 16;
            ct_yaml_entry *e = realloc(m->e, (size_t)nc * sizeof *e);
            if (!e) return ct_fail(CT_ENOMEM, "out of memory reading %s", path);
            m->e = e;
            *cap = nc;
        }
        ct_yaml_entry *e = &m->e[m->n];
        memset(e, 0, sizeof *e);
        if (!(e->key = dup_scalar(ev))) return CT_ENOMEM;
        e->key_line = (int)line;
        e->key_column = (int)col;
        m->n++;
        *state = WANT_VALUE;
        return CT_OK;
    case WANT_VALUE: {
        ct_yaml_entry *v = &m->e[m->n - 1];
        if (t != YAML_SCALAR_EVENT)
            return ct_fail(CT_EFORMAT, "%s:%zu:%zu: '%s' must be a single value, not %s", path, line, col, v->key, event_what(t));
        if (!(v->value = dup_scalar(ev))) return CT_ENOMEM;
        v->value_line = (int)line;
        v->value_column = (int)col;
        *state = WANT_KEY;
        return CT_OK;
    }
    case WANT_DOCUMENT_END:
        *state = WANT_STREAM_END;
        return CT_OK;
    case WANT_STREAM_END:
        if (t == YAML_STREAM_END_EVENT) { *state = DONE; return CT_OK; }
        return ct_fail(CT_EFORMAT, "%s:%zu:%zu: %s: a configuration is one document", path, line, col, event_what(t));
    default:
        return CT_OK;
    }
}

ct_status ct_yaml_map_read(const char *path, ct_yaml_map *m)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) return ct_fail(CT_EIO, "%s: cannot read the configuration (%s)", path, strerror(errno));
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) { fclose(f); return ct_fail(CT_ENOMEM, "out of memory reading %s", path); }
    yaml_parser_set_input_file(&p, f);
    int state = WANT_STREAM, cap = 0;
    ct_status st = CT_OK;
    while (st == CT_OK && state != DONE) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) { st = syntax_error(path, &p); break; }
        if (ev.type == YAML_ALIAS_EVENT || ((ev.type == YAML_SCALAR_EVENT) && ev.data.scalar.anchor))
            st = ct_fail(CT_EFORMAT, "%s:%zu:%zu: anchors and aliases (&name, *name) are not supported in a configuration", path,
                         ev.start_mark.line + 1, ev.start_mark.column + 1);
        else st = take_event(path, m, &state, &ev, &cap);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    fclose(f);
    return st;
}

/* ---- writing ---- */
static int emit(yaml_emitter_t *e, yaml_event_t *ev) { return yaml_emitter_emit(e, ev); }

static int emit_scalar(yaml_emitter_t *e, const char *s)
{
    yaml_event_t ev;
    return yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1, YAML_ANY_SCALAR_STYLE)
        && emit(e, &ev);
}

ct_status ct_yaml_map_write(const char *path, const char *comment, const ct_yaml_entry *entries, int n)
{
    FILE *f;
    char tmp[4200];
    CT_TRY(ct_file_begin(&f, tmp, sizeof tmp, path, "the configuration"));
    for (const char *c = comment; c && *c;) {      /* "# " before every line of the comment */
        size_t len = strcspn(c, "\n");
        fprintf(f, "# %.*s\n", (int)len, c);
        c += len + (c[len] == '\n');
    }
    fflush(f);
    yaml_emitter_t e;
    yaml_event_t ev;
    const char *problem = "write failed";
    int ok = yaml_emitter_initialize(&e);
    if (ok) {
        yaml_emitter_set_output_file(&e, f);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_width(&e, -1);   /* long values (a CNN spec) stay on one line */
        ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && emit(&e, &ev)
          && yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && emit(&e, &ev)
          && yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) && emit(&e, &ev);
        for (int i = 0; ok && i < n; i++) ok = emit_scalar(&e, entries[i].key) && emit_scalar(&e, entries[i].value);
        ok = ok && yaml_mapping_end_event_initialize(&ev) && emit(&e, &ev)
                && yaml_document_end_event_initialize(&ev, 1) && emit(&e, &ev)
                && yaml_stream_end_event_initialize(&ev) && emit(&e, &ev) && yaml_emitter_flush(&e);
        if (!ok && e.problem) problem = e.problem;
        yaml_emitter_delete(&e);
    }
    if (!ok) {
        fclose(f);
        remove(tmp);
        return ct_fail(CT_EIO, "%s: cannot write the configuration (YAML emitter: %s)", path, problem);
    }
    return ct_file_commit(f, tmp, path, "the configuration");
}
