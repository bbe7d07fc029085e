/* bytes.c - byte sizes parsed and printed, and the memory available (see bytes.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "core/bytes.h"

ct_status ct_bytes_parse(const char *s, size_t *bytes, const char *what)
{
    char *end = NULL;
    double v = s && *s ? strtod(s, &end) : -1;
    double scale = 1;
    if (end && *end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': scale = 1024.0; end++; break;
        case 'M': scale = 1024.0 * 1024; end++; break;
        case 'G': scale = 1024.0 * 1024 * 1024; end++; break;
        case 'T': scale = 1024.0 * 1024 * 1024 * 1024; end++; break;
        default: break;
        }
        if (scale > 1 && (*end == 'i' || *end == 'I')) end++;
        if (*end == 'b' || *end == 'B') end++;
    }
    if (!end || *end || !isfinite(v) || v < 0 || v * scale > 1e18)
        return ct_fail(CT_EINVAL, "%s %s: give a size such as 512M, 8G or 1.5G (bytes, or K, M, G, T: powers of 1024)",
                       what, s ? s : "(none)");
    *bytes = (size_t)llround(v * scale);
    return CT_OK;
}

const char *ct_bytes_format(char *buf, size_t cap, double b)
{
    static const char *unit[] = { "B", "kB", "MB", "GB", "TB" };
    int k = 0;
    while (b >= 1000 && k < 4) { b /= 1024; k++; }
    if (k == 0) snprintf(buf, cap, "%.0f B", b);
    else snprintf(buf, cap, b < 9.995 ? "%.2f %s" : b < 99.95 ? "%.1f %s" : "%.0f %s", b, unit[k]);
    return buf;
}

size_t ct_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    if (kb > 0) return (size_t)kb * 1024;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
}
