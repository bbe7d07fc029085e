/* error.h - how ctrain reports failures.
 *
 * Two kinds of failure, handled differently:
 *   - bad user input (a wrong shape, a corrupt file, a NaN loss, a missing GPU):
 *     the function returns a ct_status other than CT_OK and leaves a message with
 *     ct_fail() saying what was wrong and what to do. The caller passes the status
 *     up; the CLI prints ct_last_error() and exits non-zero. Nothing aborts.
 *   - programmer errors (a NULL where the contract says non-NULL, an impossible
 *     dimension inside a layer): CT_ASSERT, which prints file:line and aborts.
 */
#ifndef CT_ERROR_H
#define CT_ERROR_H
#include <stddef.h>

typedef enum {
    CT_OK = 0,
    CT_EINVAL,   /* bad argument or configuration from the user */
    CT_EIO,      /* a file could not be read or written */
    CT_EFORMAT,  /* a file was read but its content is wrong (corrupt, other version) */
    CT_ENOMEM,   /* an allocation failed */
    CT_ENUMERIC, /* NaN or Inf where a finite number was needed */
    CT_ENODEV,   /* the requested device is not available */
    CT_EINTR     /* stopped by SIGINT or SIGTERM (core/interrupt.h) */
} ct_status;

/* Records a printf-style message for the calling thread and returns `code`,
 * so failing paths read `return ct_fail(CT_EINVAL, "...", ...);`. The arguments
 * may include ct_last_error(), to wrap the previous message with context. */
ct_status ct_fail(ct_status code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last message recorded on this thread ("" if none). */
const char *ct_last_error(void);

/* A short name for a status ("invalid argument", "I/O error", ...). */
const char *ct_status_name(ct_status s);

/* Propagate a failing status to the caller. */
#define CT_TRY(expr) do { ct_status ct_s_ = (expr); if (ct_s_ != CT_OK) return ct_s_; } while (0)

/* C11's _Noreturn is not a C++ keyword: the CUDA sources (.cu, compiled as C++)
 * that include this header get the C++ attribute instead. */
#if defined(__cplusplus) && !defined(_Noreturn)
#define _Noreturn [[noreturn]]
#endif

/* Programmer errors only: never for conditions that user input can cause. */
#define CT_ASSERT(cond) \
    do { if (!(cond)) ct_assert_fail(#cond, __FILE__, __LINE__); } while (0)
_Noreturn void ct_assert_fail(const char *cond, const char *file, int line);

/* A device failing inside a step whose memory was planned before (a copy to the
 * GPU that fails, a kernel that faults): not user input and not a ctrain bug, and
 * nothing can be saved any more. Prints "ctrain: device error: <message>" and
 * exits with status 1. */
_Noreturn void ct_device_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc/calloc that report CT_ENOMEM through ct_fail (returning NULL) instead of crashing. */
void *ct_malloc(size_t bytes, const char *what);
void *ct_calloc(size_t count, size_t size, const char *what);
/* 64-byte aligned, zeroed: for the big flat buffers (free with free()). */
void *ct_alloc_aligned(size_t bytes, const char *what);

#endif
