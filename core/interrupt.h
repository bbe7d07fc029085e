/* interrupt.h - SIGINT and SIGTERM as a request to stop, not a kill.
 *
 * A command that can stop cleanly (train, time, eval) calls ct_interrupt_install()
 * once. The first SIGINT or SIGTERM only records itself; the work polls
 * ct_interrupt_signal() at the points where it can stop (after a training step,
 * after a batch of an evaluation), finishes what it is doing (the training loop
 * writes its checkpoint) and the command exits with 128 + the signal's number:
 * 130 for SIGINT (Ctrl-C), 143 for SIGTERM.
 *
 * A second signal means "now": the handler removes the temporary file being
 * written, if any (ct_interrupt_guard_file; io/h5atomic.c registers the
 * "<file>.tmp-<pid>" it fills before renaming it over a checkpoint), writes one
 * line to stderr and calls _exit(128 + signal). The file that was being replaced
 * is therefore left exactly as it was.
 *
 * A SIGINT that was ignored when the program started (a shell's background job)
 * stays ignored. Everything the handler does is async-signal-safe. */
#ifndef CT_INTERRUPT_H
#define CT_INTERRUPT_H

/* Installs the handler for SIGINT and SIGTERM (again: harmless). */
void ct_interrupt_install(void);
/* 0, or the first signal received since the install (SIGINT or SIGTERM). */
int  ct_interrupt_signal(void);
/* Records sig (SIGINT or SIGTERM) as if it had been received, unless a signal already
 * was: how the ranks of a data-parallel job agree to stop together (train/train.c). */
void ct_interrupt_note(int sig);
/* "SIGINT" or "SIGTERM" ("a signal" for any other). */
const char *ct_interrupt_name(int sig);
/* The file a second signal removes before exiting (NULL: none); the path is copied. */
void ct_interrupt_guard_file(const char *path);

#endif
