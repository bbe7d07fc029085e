/* session_job.c - a data-parallel job's agreements outside a session (see
 * session.h): a command's setup before its sessions, and a device that
 * `ctrain time` opened, agreed by every rank so that the command itself calls
 * no collective. */
#include "catalog/session.h"

/* Whether this process is one rank of several (the agreements run). */
static int in_job(const ct_dist *dist) { return dist && dist->mpi; }

ct_status ct_session_agree_setup(const ct_dist *dist, ct_status st)
{
    return in_job(dist) ? ct_dist_agree(dist, st) : st;
}

int ct_session_device_everywhere(const ct_dist *dist, ct_status st, int available, const char *why)
{
    if (!in_job(dist)) return 1;
    ct_status mine = st != CT_OK ? st : available ? CT_OK : ct_fail(CT_ENODEV, "%s", why);
    return ct_dist_agree(dist, mine) == CT_OK;
}
