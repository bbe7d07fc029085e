/* version.c - the git commit ctrain was built from, embedded at build time: the
 * Makefile passes CTRAIN_COMMIT (git rev-parse --short=12 HEAD, "-modified" appended
 * when the checkout had uncommitted changes; "unknown" outside a git checkout) and
 * rebuilds this file whenever it changes. */
#include "cli/cli.h"

#ifndef CTRAIN_COMMIT
#define CTRAIN_COMMIT "unknown"
#endif

const char *cli_commit(void) { return CTRAIN_COMMIT; }
