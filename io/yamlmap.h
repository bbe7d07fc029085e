/* yamlmap.h - flat YAML files of `key: value` lines, read and written with
 * libyaml: the configuration files of `ctrain train --config` and the
 * effective configuration a run directory keeps.
 *
 *   # comments are fine
 *   epochs: 6
 *   pool: mean
 *   data: "feats 2024.h5"
 *
 * Reading keeps every value as the string YAML gives (quoted or not: `6` and
 * "6" are the same) with the line and column of its key and value, for the
 * caller to parse and to name in messages. What is not one mapping of scalars
 * is refused with "FILE:LINE:COLUMN: what was wrong": a YAML syntax error (with
 * libyaml's description), a list, a nested mapping, a key given twice, an
 * alias, a second document. Writing emits the same flat mapping, quoting a
 * value only where YAML needs it, after optional comment lines; the file is
 * replaced atomically (io/files.h). */
#ifndef CT_YAMLMAP_H
#define CT_YAMLMAP_H
#include "core/error.h"

typedef struct {
    char *key, *value;
    int key_line, key_column;        /* 1-based, where the key starts */
    int value_line, value_column;    /* where the value starts */
} ct_yaml_entry;

typedef struct {
    ct_yaml_entry *e;                /* [n], in file order */
    int n;
} ct_yaml_map;

/* Reads path into m (free it with ct_yaml_map_free, also after a failure). An empty file
 * is an empty map. */
ct_status ct_yaml_map_read(const char *path, ct_yaml_map *m);
void      ct_yaml_map_free(ct_yaml_map *m);
/* Writes n entries (their keys and values; the positions are not used) to path, after
 * `comment` (may be NULL; each of its lines becomes a "# " line). */
ct_status ct_yaml_map_write(const char *path, const char *comment, const ct_yaml_entry *e, int n);

#endif
