/* clock.h - the monotonic clock every timing in ctrain reads (epoch seconds, the
 * per-layer profile, the peaks, the benchmarks). */
#ifndef CT_CLOCK_H
#define CT_CLOCK_H

double ct_now(void);   /* monotonic seconds */

#endif
