/* interrupt.c - the first SIGINT/SIGTERM is recorded, the second exits at once
 * (see interrupt.h). */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "core/interrupt.h"

static atomic_int received;               /* the first signal, 0 before any */

/* The temporary file to remove on a second signal. Two slots, so that the
 * handler never reads a path while it is being copied: `guard` names the slot
 * in use (-1: none) and is switched only after the slot is complete. */
static char guard_path[2][4352];
static atomic_int guard = -1;

static void put(const char *s) { ssize_t r = write(2, s, strlen(s)); (void)r; }

static void on_signal(int sig)
{
    int first = 0;
    if (atomic_compare_exchange_strong(&received, &first, sig)) return;   /* the first: recorded, the work stops itself */
    int g = atomic_load(&guard);
    if (g >= 0) unlink(guard_path[g]);
    put("\nctrain: ");
    put(ct_interrupt_name(sig));
    put(" while stopping: exited at once, nothing more written\n");
    _exit(128 + sig);
}

void ct_interrupt_install(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;   /* reads and writes in progress go on; the work polls the flag */
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int ct_interrupt_signal(void) { return atomic_load(&received); }

void ct_interrupt_note(int sig)
{
    int none = 0;
    atomic_compare_exchange_strong(&received, &none, sig);
}

const char *ct_interrupt_name(int sig)
{
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    return "a signal";
}

void ct_interrupt_guard_file(const char *path)
{
    if (!path) { atomic_store(&guard, -1); return; }
    int next = atomic_load(&guard) == 0 ? 1 : 0;
    snprintf(guard_path[next], sizeof guard_path[next], "%s", path);
    atomic_store(&guard, next);
}
