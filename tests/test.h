/* test.h - ctrain's test harness: named test cases, checks that fail loudly,
 * tolerance comparisons that report the error they saw, PyTorch golden files,
 * and the finite-difference gradient checker.
 *
 * A suite is a function `void suite_NAME(void)` (listed in tests/test_main.c).
 * Inside it, each t_case("NAME/what") starts a named case; every check until the
 * next t_case belongs to it. A case passes when none of its checks failed. The
 * runner prints one PASS/FAIL line per case with the largest error seen, and
 * ends with "N passed, N failed"; it exits non-zero if anything failed.
 *
 * Error measure used everywhere (t_close, t_gradcheck): the normalised maximum
 * error  max_i |got_i - ref_i| / max(max_i |ref_i|, floor),  floor = 1e-6.
 * It is scale-free, and a value of 1e-6 means "agrees to about six digits of
 * the tensor's largest entry".
 */
#ifndef CT_TEST_H
#define CT_TEST_H
#include <stddef.h>
#include <hdf5.h>
#include "core/rng.h"

void   t_case(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A case that cannot run here (e.g. no GPU): prints "SKIP <message>" and counts it
 * as skipped, neither passed nor failed. Call it instead of t_case. With the
 * environment variable CT_REQUIRE_GPU=1 it prints "FAIL <message> [...]" and
 * counts a failure instead (for a GPU machine, where nothing may be skipped). */
void   t_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A boolean check; prints the message when it fails. Returns cond. */
int    t_check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Compare n floats with the normalised max error; fails the case if err > tol
 * or any value is NaN/Inf. Returns err. */
double t_close(const char *what, const float *got, const float *ref, size_t n, double tol);
/* Same for a double reference. */
double t_close_d(const char *what, const float *got, const double *ref, size_t n, double tol);

/* Golden files (tests/golden/NAME.h5, written by tests/golden_gen/gen_*.py).
 * t_golden_open fails the case (and returns -1) if the file is missing.
 * t_golden reads dataset `name`, which must hold exactly n elements; on any
 * problem it fails the case and returns a zeroed array, so the test can go on.
 * Free the result with free(). t_golden_i32 likewise for integer data. */
hid_t  t_golden_open(const char *file);
float *t_golden(hid_t f, const char *name, size_t n);
int   *t_golden_i32(hid_t f, const char *name, size_t n);
double t_golden_attr(hid_t f, const char *name);   /* scalar attribute on the root */

/* Runs `$CTRAIN_BIN ARGS` (bin/ctrain if unset) through the shell with stderr
 * merged into stdout, captured into out (truncated to n-1 bytes, NUL-terminated),
 * in the scratch directory below (relative paths in ARGS are relative to it).
 * Returns the exit status, or -1 if it could not start or was killed by a signal. */
int    t_run_ctrain(const char *args, char *out, size_t n);
/* The working directory of the command-line cases: a fresh directory under /tmp, made
 * on first use and removed when the runner ends (a run's default runs/ lands there,
 * never in the source tree). */
const char *t_scratch_dir(void);
/* $CTRAIN_BIN (bin/ctrain if unset) as an absolute path, quoted for the shell. */
const char *t_ctrain_bin(void);
/* The loss and val_loss of each epoch line (" - loss: X ... val_loss: Y") of a training log,
 * in order, at most max (val NAN where the line has none); returns how many were found. */
int    t_epoch_losses(const char *log, double *loss, double *val, int max);

/* A feature store DIR/feats.h5 of 12 synthetic speakers (6 utterances each, 24-40 frames
 * of 8 mels) with VoxCeleb-style paths, and a trial list DIR/trials.txt of every pair of
 * the last 4 speakers' utterances; their paths in feats and trials (cap bytes each).
 * Returns 1, or 0 after a failed check (tests/speaker_fixture.c). */
int    t_speaker_data(const char *dir, char *feats, char *trials, size_t cap);

/* Helpers for building test inputs from a fixed seed. */
void   t_fill_uniform(float *x, size_t n, float lo, float hi, ct_rng *r);
float *t_alloc(size_t n);                         /* zeroed, never NULL */

/* ---- finite-difference gradient check ----
 * The objective runs the forward pass with whatever inputs/weights ctx points
 * at and returns a scalar, typically sum_i out_i * w_i with fixed random w_i,
 * accumulated in double (t_dot). t_gradcheck perturbs x[i] by +-h in place
 * (restoring it) and compares (f(x+h) - f(x-h)) / 2h, formed in double, with
 * analytic[i]. At most max_coords coordinates are checked (drawn with a fixed
 * seed; 0 = all). With kinks != 0 a coordinate whose one-sided slopes
 * (f(x+h)-f(x))/h and (f(x)-f(x-h))/h disagree by more than a smooth function
 * could produce (we are sitting on a ReLU or max-pool kink) is skipped and
 * counted; more than a quarter skipped fails the case. Returns the error. */
typedef double (*t_objective)(void *ctx);
double t_gradcheck(const char *what, t_objective f, void *ctx, float *x, const float *analytic,
                   size_t n, float h, double tol, int max_coords, int kinks);
double t_dot(const float *a, const float *b, size_t n);   /* sum a_i b_i in double */

/* The communicator interface (comm/comm.h) on 2 ranks (tests/test_comm.c), run by the mpi
 * suite: t_comm_rank runs a rank's cases and returns 1 when this process was started as
 * one of those ranks (CT_COMM_TEST set), else 0; t_comm_cases starts them with `mpirun`
 * (its command line) and checks what they report; t_comm_without_mpi is for a build
 * without MPI. */
int    t_comm_rank(void);
void   t_comm_cases(const char *mpirun);
void   t_comm_without_mpi(void);

#endif
