/* tfevents.h - TensorBoard event files, written by hand: the scalars of a
 * training run (loss, accuracy, learning rate, ...) one event per epoch, in the
 * format TensorBoard, TensorFlow and PyTorch's SummaryWriter read.
 *
 * A file "events.out.tfevents.<unix seconds>.<host name>" is a sequence of
 * TFRecord records, each
 *
 *   uint64  length                      little-endian
 *   uint32  masked CRC-32C of length    (its 8 bytes)
 *   byte    data[length]                one serialized Event protocol buffer
 *   uint32  masked CRC-32C of data
 *
 * with masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. The first event
 * carries file_version "brain.Event:2"; the next one a SessionLog START at the
 * first step the file writes, so that TensorBoard drops the steps from that one
 * on that an earlier file in the directory holds (a resumed or repeated run);
 * then one event per write, with wall_time, step and a Summary of simple_value
 * scalars.
 *
 *   ct_tfevents w;
 *   CT_TRY(ct_tfevents_open(&w, "logs/cpu", 1));           // step 1 onwards
 *   const char *tags[] = { "loss", "accuracy" };
 *   float v[] = { 0.52f, 0.81f };
 *   CT_TRY(ct_tfevents_scalars(&w, 1, ct_tfevents_now(), tags, v, 2));
 *   CT_TRY(ct_tfevents_flush(&w));                         // TensorBoard sees it now
 *   ct_tfevents_close(&w);
 *
 * The framing and the CRC are exported for the tests.
 */
#ifndef CT_TFEVENTS_H
#define CT_TFEVENTS_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "core/error.h"

typedef struct {
    FILE *f;
    char path[4352];           /* the event file */
} ct_tfevents;

/* Creates dir (and its parents), opens a new event file in it (never an existing one: a
 * second file in the same second gets ".1", ".2", ... appended) and writes the
 * file_version event and a SessionLog START at first_step. */
ct_status ct_tfevents_open(ct_tfevents *w, const char *dir, long first_step);
/* One event at `step` holding n scalars tags[i] = values[i]. */
ct_status ct_tfevents_scalars(ct_tfevents *w, long step, double wall_time, const char *const *tags, const float *values, int n);
/* Pushes what was written to the file (after every epoch, so TensorBoard shows a live run). */
ct_status ct_tfevents_flush(ct_tfevents *w);
void      ct_tfevents_close(ct_tfevents *w);
/* Seconds since the epoch, with microseconds: an event's wall_time. */
double    ct_tfevents_now(void);

/* ---- the record format ---- */
/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes, continuing from crc
 * (0 to start): ct_crc32c(0, "123456789", 9) = 0xE3069283. */
uint32_t  ct_crc32c(uint32_t crc, const void *data, size_t n);
/* TFRecord's mask of a CRC: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t  ct_crc32c_mask(uint32_t crc);
/* The record of n bytes of data into out[n + 16]: returns n + 16. */
size_t    ct_tfrecord_frame(uint8_t *out, const uint8_t *data, size_t n);

#endif
