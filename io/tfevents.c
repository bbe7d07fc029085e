/* tfevents.c - TensorBoard event files (see tfevents.h).
 *
 * Two choices, and why:
 *   - CRC-32C is computed here, bit by bit. Google's crc32c library is not packaged
 *     in Debian 12 (no libcrc32c-dev; `apt-cache search crc32c` finds only
 *     python3-crc32c), and an event file holds a few hundred bytes per epoch, so
 *     the eight-shifts-per-byte loop costs nothing and reads as the definition.
 *   - The Event and Summary protocol buffers are encoded by a dozen lines below
 *     rather than by protobuf-c, which would need code generated from the .proto
 *     files by protoc-c at build time for the handful of fields used here. The
 *     field numbers, from TensorFlow's (and TensorBoard's copy of)
 *     tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto:
 *
 *       message Event {
 *         double wall_time = 1;           // fixed64
 *         int64  step = 2;                // varint
 *         oneof what {
 *           string     file_version = 3;  // "brain.Event:2"
 *           Summary    summary = 5;
 *           SessionLog session_log = 7;
 *         }
 *       }
 *       message SessionLog { SessionStatus status = 1; }   // START = 1
 *       message Summary {
 *         message Value {
 *           string tag = 1;
 *           float  simple_value = 2;      // fixed32
 *         }
 *         repeated Value value = 1;
 *       }
 *
 * The wire format: every field is a key varint (field_number << 3 | wire_type;
 * wire types 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit) followed by its
 * value; integers are little-endian, varints 7 bits per byte, low bits first,
 * the top bit saying "more follows"; a nested message is length-delimited. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include "io/files.h"
#include "io/tfevents.h"

/* ---- CRC-32C and the record ---- */

uint32_t ct_crc32c(uint32_t crc, const void *data, size_t n)
{
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

uint32_t ct_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) out[i] = (uint8_t)(v >> (8 * i));
}

size_t ct_tfrecord_frame(uint8_t *out, const uint8_t *data, size_t n)
{
    put_le(out, (uint64_t)n, 8);                                  /* length */
    put_le(out + 8, ct_crc32c_mask(ct_crc32c(0, out, 8)), 4);     /* masked CRC of the length's 8 bytes */
    memcpy(out + 12, data, n);                                    /* the Event */
    put_le(out + 12 + n, ct_crc32c_mask(ct_crc32c(0, data, n)), 4);
    return n + 16;
}

/* ---- a protocol buffer being written: bytes into a fixed buffer ---- */
enum { PB_CAP = 8192 };
typedef struct {
    uint8_t b[PB_CAP];
    size_t n;
    int overflow;            /* more than PB_CAP bytes asked for */
} pb;

static void pb_bytes(pb *m, const void *p, size_t n)
{
    if (m->overflow || n > PB_CAP - m->n) { m->overflow = 1; return; }
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

static void pb_varint(pb *m, uint64_t v)
{
    uint8_t b[10];
    int k = 0;
    do { b[k] = (uint8_t)(v & 0x7f); v >>= 7; if (v) b[k] |= 0x80; k++; } while (v);
    pb_bytes(m, b, (size_t)k);
}

static void pb_key(pb *m, int field, int wire) { pb_varint(m, (uint64_t)field << 3 | (uint64_t)wire); }

static void pb_double(pb *m, int field, double x)
{
    uint64_t bits;
    uint8_t b[8];
    memcpy(&bits, &x, 8);
    put_le(b, bits, 8);
    pb_key(m, field, 1);
    pb_bytes(m, b, 8);
}

static void pb_float(pb *m, int field, float x)
{
    uint32_t bits;
    uint8_t b[4];
    memcpy(&bits, &x, 4);
    put_le(b, bits, 4);
    pb_key(m, field, 5);
    pb_bytes(m, b, 4);
}

static void pb_len(pb *m, int field, const void *p, size_t n)   /* a string or a nested message */
{
    pb_key(m, field, 2);
    pb_varint(m, n);
    pb_bytes(m, p, n);
}

/* ---- events ---- */
enum { EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5, EVENT_SESSION_LOG = 7 };
enum { SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2 };
enum { SESSION_LOG_STATUS = 1, SESSION_START = 1 };

/* Frames the encoded event m and appends it to the file. */
static ct_status write_event(ct_tfevents *w, const pb *m)
{
    uint8_t rec[PB_CAP + 16];
    if (m->overflow) return ct_fail(CT_EINVAL, "%s: an event larger than %d bytes (tags too long?)", w->path, PB_CAP);
    size_t n = ct_tfrecord_frame(rec, m->b, m->n);
    if (fwrite(rec, 1, n, w->f) != n) return ct_fail(CT_EIO, "%s: write failed (disk full?)", w->path);
    return CT_OK;
}

static void event_head(pb *m, double wall_time, long step)
{
    m->n = 0;
    m->overflow = 0;
    pb_double(m, EVENT_WALL_TIME, wall_time);
    pb_key(m, EVENT_STEP, 0);
    pb_varint(m, (uint64_t)(int64_t)step);   /* int64: negative steps as 10-byte two's complement */
}

double ct_tfevents_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec * 1e-6;
}

ct_status ct_tfevents_open(ct_tfevents *w, const char *dir, long first_step)
{
    pb m;
    memset(w, 0, sizeof *w);
    CT_TRY(ct_mkdirs(dir));
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    for (char *c = host; *c; c++) if (*c == '/') *c = '_';
    double now = ct_tfevents_now();
    for (int k = 0; k < 1000 && !w->f; k++) {   /* a new file, never one another writer holds */
        int len = k ? snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s.%d", dir, (long long)now, host, k)
                    : snprintf(w->path, sizeof w->path, "%s/events.out.tfevents.%lld.%s", dir, (long long)now, host);
        if (len >= (int)sizeof w->path) return ct_fail(CT_EINVAL, "%s: directory name too long for an event file", dir);
        int fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd < 0 && errno == EEXIST) continue;
        if (fd < 0) return ct_fail(CT_EIO, "%s: cannot create the TensorBoard event file (%s)", w->path, strerror(errno));
        if (!(w->f = fdopen(fd, "wb"))) { close(fd); return ct_fail(CT_EIO, "%s: cannot open (%s)", w->path, strerror(errno)); }
    }
    if (!w->f) return ct_fail(CT_EIO, "%s: no free event file name", dir);
    event_head(&m, now, 0);
    pb_len(&m, EVENT_FILE_VERSION, "brain.Event:2", 13);
    ct_status st = write_event(w, &m);
    if (st == CT_OK) {
        pb log = { .n = 0 };
        pb_key(&log, SESSION_LOG_STATUS, 0);
        pb_varint(&log, SESSION_START);
        event_head(&m, now, first_step);
        pb_len(&m, EVENT_SESSION_LOG, log.b, log.n);
        st = write_event(w, &m);
    }
    if (st == CT_OK) st = ct_tfevents_flush(w);
    if (st != CT_OK) ct_tfevents_close(w);
    return st;
}

ct_status ct_tfevents_scalars(ct_tfevents *w, long step, double wall_time, const char *const *tags, const float *values, int n)
{
    pb m, summary, value;
    summary.n = 0;
    summary.overflow = 0;
    for (int i = 0; i < n; i++) {
        value.n = 0;
        value.overflow = 0;
        pb_len(&value, VALUE_TAG, tags[i], strlen(tags[i]));
        pb_float(&value, VALUE_SIMPLE_VALUE, values[i]);
        if (value.overflow) summary.overflow = 1;
        pb_len(&summary, SUMMARY_VALUE, value.b, value.n);
    }
    event_head(&m, wall_time, step);
    if (summary.overflow) m.overflow = 1;
    pb_len(&m, EVENT_SUMMARY, summary.b, summary.n);
    return write_event(w, &m);
}

ct_status ct_tfevents_flush(ct_tfevents *w)
{
    if (fflush(w->f) != 0) return ct_fail(CT_EIO, "%s: write failed (disk full?)", w->path);
    return CT_OK;
}

void ct_tfevents_close(ct_tfevents *w)
{
    if (w->f) fclose(w->f);
    w->f = NULL;
}
