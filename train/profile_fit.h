/* profile_fit.h - ct_fit (train/train.h) with a model's per-layer timing
 * (models/profile.h) switched on inside its own training steps, as `caffe
 * time` did: `ctrain time --layers` measures each layer's forward and
 * backward seconds in the very batches it trains, after the warm-up epochs,
 * never in validation. The numbers computed are the same as without it. */
#ifndef CT_PROFILE_FIT_H
#define CT_PROFILE_FIT_H
#include <stdio.h>
#include "models/profile.h"
#include "train/train.h"

typedef struct {
    int profile;              /* 0: train without timing the layers */
    int warmup;               /* epochs before the profiled ones */
    long batches, samples;    /* out: training batches and samples profiled */
    double parallel_seconds;  /* out: of the profiled epochs' training (not validation), the
                                 seconds the training thread spent in the worker pool
                                 (core/threads.h: ct_parallel_seconds); the rest ran on one thread */
    double mark;              /* internal: the pool's seconds at the current training batch's start; < 0: none */
} ct_profile_counts;

/* Trains `task` as ct_fit does, the log to `out`, hist [cfg->epochs]; prof is the
 * model's (prof->on is switched per batch here, and off at the end). */
ct_status ct_fit_profiled(const ct_task *task, ct_prof *prof, ct_profile_counts *pc, const ct_fit_config *cfg,
                          ct_epoch_log *hist, FILE *out);

#endif
