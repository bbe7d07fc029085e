/* bytes.h - sizes in bytes as people write them ("512M", "8G", "1.5GB") and
 * print them, and how much memory this machine has free. */
#ifndef CT_BYTES_H
#define CT_BYTES_H
#include <stddef.h>
#include "core/error.h"

/* "123" (bytes), "64K", "512M", "8G", "1.5T", with an optional "B" or "iB"; the
 * multiples are powers of 1024. CT_EINVAL naming `what` (an option) otherwise. */
ct_status ct_bytes_parse(const char *s, size_t *bytes, const char *what);
/* "6.27 GB", "512 MB", "980 kB", "12 B" (powers of 1024, three significant digits) into buf. */
const char *ct_bytes_format(char *buf, size_t cap, double bytes);
/* MemAvailable of /proc/meminfo (what can be allocated without swapping), else the
 * physical memory; 0 when neither can be read. */
size_t ct_mem_available(void);

#endif
