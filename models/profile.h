/* profile.h - wall time per layer inside real training steps (`ctrain time
 * --layers`, the descendant of `caffe time`), the same way for every model on
 * every device.
 *
 * A model keeps one ct_prof; its forward and backward passes call
 * ct_prof_start before the first layer and ct_prof_lap after each one, adding
 * the seconds since the previous reading to that layer's slot. When profiling
 * is off (`on` = 0, the normal case) both are a single test. When it is on, the
 * device is synchronised before each reading (be->ops->sync: nothing on the CPU),
 * so work queued on a GPU is charged to the layer that queued it, at the price
 * of the overlap the GPU would otherwise have between layers.
 */
#ifndef CT_PROFILE_H
#define CT_PROFILE_H
#include "layers/ops.h"
#include "core/clock.h"

#define CT_PROF_MAX 64      /* layers (or parts) a model reports */

typedef struct {
    int on;                               /* switched by the caller */
    double t;                             /* clock at the last reading */
    double fwd[CT_PROF_MAX], bwd[CT_PROF_MAX];   /* seconds per layer, summed over the profiled steps */
} ct_prof;

static inline void ct_prof_start(ct_prof *p, const ct_backend *be)
{
    if (!p->on) return;
    if (be->ops->sync(be) != CT_OK) ct_device_fatal("%s", ct_last_error());
    p->t = ct_now();
}

/* Adds the time since the last reading to *slot (p->fwd[i] or p->bwd[i]; NULL: the time
 * is not charged). p may be NULL: a part whose caller does not profile it. */
static inline void ct_prof_lap(ct_prof *p, const ct_backend *be, double *slot)
{
    if (!p || !p->on) return;
    if (be->ops->sync(be) != CT_OK) ct_device_fatal("%s", ct_last_error());
    double now = ct_now();
    if (slot) *slot += now - p->t;
    p->t = now;
}

#endif
