/* options.c - the choice tables of option declarations (see options.h). */
#include <stdio.h>
#include <string.h>
#include "train/options.h"

int ct_opt_given(const ct_opt *opts, unsigned long long given, const char *flag)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END && i < 64; i++)
        if (opts[i].flag && !strcmp(opts[i].flag, flag)) return (int)((given >> i) & 1);
    return 0;
}

const char *ct_opt_choice_name(const ct_opt_choice *c, int value)
{
    for (; c && c->name; c++) if (c->value == value) return c->name;
    return NULL;
}

int ct_opt_choice_value(const ct_opt_choice *c, const char *name, int *value)
{
    for (; c && c->name && name; c++)
        if (!strcmp(c->name, name)) { *value = c->value; return 1; }
    return 0;
}

void ct_opt_choice_list(const ct_opt_choice *c, char *buf, size_t cap)
{
    int n = 0;
    while (c[n].name) n++;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, cap - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", c[i].name);
    }
}
