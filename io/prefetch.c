/* prefetch.c - one background loader thread with two slots (see prefetch.h). */
#include <string.h>
#include "io/prefetch.h"

static void *loader(void *arg)
{
    ct_prefetch *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->queued == 0) pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        int s = p->queue[0];
        p->queue[0] = p->queue[1];
        p->queued--;
        ct_prefetch_job job = p->slot[s];
        pthread_mutex_unlock(&p->mu);
        p->fill(p->ctx, s, job.split, job.first, job.n);   /* outside the lock */
        pthread_mutex_lock(&p->mu);
        p->slot[s].state = 2;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ct_status ct_prefetch_start(ct_prefetch *p, ct_fill_fn fill, void *ctx)
{
    memset(p, 0, sizeof *p);
    p->fill = fill;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, loader, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        return ct_fail(CT_ENOMEM, "cannot start the batch loader thread");
    }
    p->running = 1;
    return CT_OK;
}

void ct_prefetch_request(ct_prefetch *p, int slot, int split, long first, int n)
{
    pthread_mutex_lock(&p->mu);
    CT_ASSERT(p->slot[slot].state == 0 && p->queued < 2);
    p->slot[slot] = (ct_prefetch_job){ split, n, first, 1 };
    p->queue[p->queued++] = slot;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void ct_prefetch_wait(ct_prefetch *p, int slot)
{
    pthread_mutex_lock(&p->mu);
    CT_ASSERT(p->slot[slot].state != 0);
    while (p->slot[slot].state != 2) pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int ct_prefetch_find(ct_prefetch *p, int split, long first, int n)
{
    int found = -1;
    pthread_mutex_lock(&p->mu);
    for (int s = 0; s < 2; s++)
        if (p->slot[s].state != 0 && p->slot[s].split == split && p->slot[s].first == first && p->slot[s].n == n) found = s;
    pthread_mutex_unlock(&p->mu);
    return found;
}

void ct_prefetch_release(ct_prefetch *p, int slot)
{
    pthread_mutex_lock(&p->mu);
    CT_ASSERT(p->slot[slot].state == 2);
    p->slot[slot].state = 0;
    pthread_mutex_unlock(&p->mu);
}

int ct_prefetch_busy(ct_prefetch *p, int slot)
{
    pthread_mutex_lock(&p->mu);
    int busy = p->slot[slot].state != 0;
    pthread_mutex_unlock(&p->mu);
    return busy;
}

void ct_prefetch_stop(ct_prefetch *p)
{
    if (!p->running) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    p->running = 0;
}
