/* error.c - per-thread error messages and checked allocation (see error.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/error.h"

static _Thread_local char ct_errbuf[1024];

ct_status ct_fail(ct_status code, const char *fmt, ...)
{
    /* Format into a local buffer first: callers may pass ct_last_error() as an
     * argument to wrap the previous message ("could not write X: <why>"). */
    char msg[sizeof ct_errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(ct_errbuf, msg, sizeof msg);
    return code;
}

const char *ct_last_error(void) { return ct_errbuf; }

const char *ct_status_name(ct_status s)
{
    switch (s) {
    case CT_OK: return "ok";
    case CT_EINVAL: return "invalid argument";
    case CT_EIO: return "I/O error";
    case CT_EFORMAT: return "bad file format";
    case CT_ENOMEM: return "out of memory";
    case CT_ENUMERIC: return "numeric error";
    case CT_ENODEV: return "device not available";
    case CT_EINTR: return "interrupted";
    }
    return "unknown error";
}

void ct_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "ctrain: internal error: assertion `%s' failed at %s:%d (a bug in ctrain, please report it)\n",
            cond, file, line);
    abort();
}

void ct_device_fatal(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "ctrain: device error: %s\n", msg);
    exit(1);
}

void *ct_malloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) ct_fail(CT_ENOMEM, "out of memory allocating %zu bytes for %s; use a smaller batch or model", bytes, what);
    return p;
}

void *ct_calloc(size_t count, size_t size, const char *what)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) ct_fail(CT_ENOMEM, "out of memory allocating %zu x %zu bytes for %s; use a smaller batch or model",
                    count, size, what);
    return p;
}

void *ct_alloc_aligned(size_t bytes, const char *what)
{
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) {
        ct_fail(CT_ENOMEM, "out of memory allocating %zu bytes for %s; use a smaller batch or model", bytes, what);
        return NULL;
    }
    memset(p, 0, rounded ? rounded : 64);
    return p;
}
