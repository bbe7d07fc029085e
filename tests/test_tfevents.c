/* test_tfevents.c - TensorBoard event files (io/tfevents.h) and `--logdir`:
 *   - CRC-32C against published vectors (RFC 3720 appendix B.4, the "123456789"
 *     check value) and TFRecord's masked CRC and framing against bytes that
 *     TensorBoard's own RecordWriter wrote;
 *   - the writer's file, decoded here field by field: the version event, the
 *     SessionLog START, the scalars with their tags, steps and exact values;
 *   - TensorBoard's own reader (EventAccumulator, from PyPI through
 *     tests/tensorboard_venv.sh) on real runs: `ctrain train small-cnn` (a step
 *     schedule, so every epoch has its own learning rate), `ctrain train
 *     siamese-lstm` with a trial list (val_eer), and `ctrain time --logdir`
 *     (DIR/cpu): every tag and every value against the run's CSV log or JSON.
 *     Without PyPI those cases report SKIP with the reason. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/tfevents.h"

/* ---- reading records and protocol buffers back ---- */
typedef struct { const uint8_t *p, *end; int bad; } reader;

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static uint64_t varint(reader *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) { r->bad = 1; return 0; }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

/* The next field: its number and wire type; varints and fixed values in *v, length-delimited in *sub. */
static int field(reader *r, int *num, int *wire, uint64_t *v, reader *sub)
{
    if (r->p >= r->end || r->bad) return 0;
    uint64_t key = varint(r);
    *num = (int)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: *v = varint(r); break;
    case 1: if (r->end - r->p < 8) { r->bad = 1; return 0; } *v = get_le(r->p, 8); r->p += 8; break;
    case 5: if (r->end - r->p < 4) { r->bad = 1; return 0; } *v = get_le(r->p, 4); r->p += 4; break;
    case 2: {
        uint64_t n = varint(r);
        if ((uint64_t)(r->end - r->p) < n) { r->bad = 1; return 0; }
        *sub = (reader){ r->p, r->p + n, 0 };
        r->p += n;
        break;
    }
    default: r->bad = 1; return 0;
    }
    return !r->bad;
}

/* One decoded event. */
typedef struct {
    double wall_time;
    long step;
    char file_version[32];
    int session_status;              /* -1: no session_log */
    int n;                           /* scalars */
    char tag[8][32];
    float value[8];
} event;

static int decode_event(const uint8_t *p, size_t len, event *e)
{
    reader r = { p, p + len, 0 }, sub;
    memset(e, 0, sizeof *e);
    e->session_status = -1;
    int num, wire;
    uint64_t v;
    while (field(&r, &num, &wire, &v, &sub)) {
        if (num == 1 && wire == 1) memcpy(&e->wall_time, &v, 8);
        else if (num == 2 && wire == 0) e->step = (long)v;
        else if (num == 3 && wire == 2) snprintf(e->file_version, sizeof e->file_version, "%.*s", (int)(sub.end - sub.p), (const char *)sub.p);
        else if (num == 7 && wire == 2) {
            reader s = sub, x;
            e->session_status = 0;
            while (field(&s, &num, &wire, &v, &x)) if (num == 1 && wire == 0) e->session_status = (int)v;
        } else if (num == 5 && wire == 2) {
            reader s = sub, val;
            while (field(&s, &num, &wire, &v, &val)) {
                if (num != 1 || wire != 2 || e->n >= 8) return 0;
                reader t = val, str = { 0 };
                while (field(&t, &num, &wire, &v, &str)) {
                    if (num == 1 && wire == 2) snprintf(e->tag[e->n], sizeof e->tag[e->n], "%.*s", (int)(str.end - str.p), (const char *)str.p);
                    if (num == 2 && wire == 5) { uint32_t b = (uint32_t)v; memcpy(&e->value[e->n], &b, 4); }
                }
                e->n++;
            }
        }
    }
    return !r.bad;
}

/* The records of an event file, each CRC checked; returns the count (-1: a broken record). */
static int read_events(const char *path, event *ev, int max)
{
    FILE *f = fopen(path, "rb");
    if (!t_check(f != NULL, "cannot open %s", path)) return -1;
    static uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f), pos = 0;
    fclose(f);
    int k = 0;
    while (pos < n) {
        if (!t_check(n - pos >= 16, "%s: %zu trailing bytes", path, n - pos)) return -1;
        uint64_t len = get_le(buf + pos, 8);
        if (!t_check(len <= n - pos - 16, "%s: record at %zu longer than the file", path, pos)) return -1;
        t_check(get_le(buf + pos + 8, 4) == ct_crc32c_mask(ct_crc32c(0, buf + pos, 8)), "%s: record %d: bad length CRC", path, k);
        t_check(get_le(buf + pos + 12 + len, 4) == ct_crc32c_mask(ct_crc32c(0, buf + pos + 12, len)), "%s: record %d: bad data CRC", path, k);
        if (k < max && !t_check(decode_event(buf + pos + 12, len, &ev[k]), "%s: record %d does not decode", path, k)) return -1;
        pos += 16 + len;
        k++;
    }
    return k;
}

/* The event files in dir: their count; the first one's path in first. */
static int event_files(const char *dir, char *first, size_t cap)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    first[0] = '\0';
    while (d && (de = readdir(d))) {
        if (strncmp(de->d_name, "events.out.tfevents.", 20) != 0) continue;
        if (!n || strcmp(de->d_name, strrchr(first, '/') + 1) < 0) snprintf(first, cap, "%s/%s", dir, de->d_name);
        n++;
    }
    if (d) closedir(d);
    return n;
}

/* ---- TensorBoard's reader ---- */
static char tb_python[512], tb_why[1024];

/* The python of tests/tensorboard_venv.sh, or "" with the reason in tb_why. */
static const char *tensorboard_python(void)
{
    static int tried;
    if (tried) return tb_python;
    tried = 1;
    FILE *p = popen("sh tests/tensorboard_venv.sh 2>/tmp/ctrain_tbvenv.$$.err; cat /tmp/ctrain_tbvenv.$$.err >&2; "
                    "rm -f /tmp/ctrain_tbvenv.$$.err", "r");
    if (p) {
        if (!fgets(tb_python, sizeof tb_python, p)) tb_python[0] = '\0';
        tb_python[strcspn(tb_python, "\n")] = '\0';
        pclose(p);
    }
    if (!tb_python[0]) snprintf(tb_why, sizeof tb_why, "TensorBoard could not be installed from PyPI (see the line above)");
    return tb_python;
}

/* Runs tests/tensorboard_check.py DIR ARGS with TensorBoard's python; its output to stdout. */
static int tensorboard_check(const char *dir, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' tests/tensorboard_check.py '%s' %s > /tmp/ctrain_tbcheck.%d.log 2>&1", tb_python, dir, args, (int)getpid());
    int st = system(cmd);
    char show[128];
    snprintf(show, sizeof show, "sed 's/^/    /' /tmp/ctrain_tbcheck.%d.log; rm -f /tmp/ctrain_tbcheck.%d.log", (int)getpid(), (int)getpid());
    fflush(stdout);
    if (system(show) != 0) printf("    (no output)\n");
    return st == -1 ? -1 : WEXITSTATUS(st);
}

void suite_tfevents(void)
{
    t_case("tfevents/CRC-32C: RFC 3720's vectors and the 123456789 check value");
    {
        uint8_t zeros[32] = { 0 }, ones[32], up[32], down[32];
        for (int i = 0; i < 32; i++) { ones[i] = 0xff; up[i] = (uint8_t)i; down[i] = (uint8_t)(31 - i); }
        t_check(ct_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c(\"123456789\") = %08x", ct_crc32c(0, "123456789", 9));
        t_check(ct_crc32c(0, zeros, 32) == 0x8A9136AAu, "32 zeros: %08x", ct_crc32c(0, zeros, 32));
        t_check(ct_crc32c(0, ones, 32) == 0x62A8AB43u, "32 x 0xff: %08x", ct_crc32c(0, ones, 32));
        t_check(ct_crc32c(0, up, 32) == 0x46DD794Eu, "0..31: %08x", ct_crc32c(0, up, 32));
        t_check(ct_crc32c(0, down, 32) == 0x113FDB5Cu, "31..0: %08x", ct_crc32c(0, down, 32));
        t_check(ct_crc32c(ct_crc32c(0, "1234", 4), "56789", 5) == 0xE3069283u, "continued CRC differs");
        t_check(ct_crc32c(0, "", 0) == 0, "crc32c of nothing: %08x", ct_crc32c(0, "", 0));
    }

    t_case("tfevents/TFRecord framing matches the bytes of TensorBoard's RecordWriter");
    {
        /* tensorboard.summary.writer.record_writer.RecordWriter(f).write(b"ctrain") wrote these 22 bytes
         * (tensorboard 2.21.0 from PyPI), and masked_crc32c(b"123456789") from
         * tensorboard.compat.tensorflow_stub.pywrap_tensorflow returned 0xc78ab0e5 */
        static const uint8_t want[22] = { 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x73, 0x69, 0xd5, 0x37,
                                          'c', 't', 'r', 'a', 'i', 'n', 0xf1, 0x6d, 0x0a, 0xd3 };
        uint8_t got[22];
        size_t n = ct_tfrecord_frame(got, (const uint8_t *)"ctrain", 6);
        t_check(n == 22 && !memcmp(got, want, 22), "the record of \"ctrain\" differs from TensorBoard's");
        t_check(ct_crc32c_mask(ct_crc32c(0, "123456789", 9)) == 0xc78ab0e5u, "masked crc32c(\"123456789\") = %08x",
                ct_crc32c_mask(ct_crc32c(0, "123456789", 9)));
    }

    char dir[] = "/tmp/ctrain_tfevents_XXXXXX";
    if (!t_check(mkdtemp(dir) != NULL, "mkdtemp failed")) return;
    char sub[128], first[512];

    t_case("tfevents/the writer: version event, SessionLog START, scalars with their tags, steps and values");
    {
        snprintf(sub, sizeof sub, "%s/logs/cpu", dir);   /* parents made too */
        ct_tfevents w;
        const char *tags[3] = { "loss", "accuracy", "learning_rate" };
        float v1[3] = { 0.6931472f, 0.5f, 1e-3f }, v2[3] = { 0.25f, 0.875f, 5e-4f };
        double t0 = ct_tfevents_now();
        ct_status st = ct_tfevents_open(&w, sub, 3);
        if (t_check(st == CT_OK, "open: %s", ct_last_error())) {
            t_check(ct_tfevents_scalars(&w, 3, 1700000000.25, tags, v1, 3) == CT_OK, "write: %s", ct_last_error());
            t_check(ct_tfevents_scalars(&w, 4, 1700000001.5, tags, v2, 3) == CT_OK, "write: %s", ct_last_error());
            t_check(ct_tfevents_flush(&w) == CT_OK, "flush: %s", ct_last_error());
            ct_tfevents_close(&w);
        }
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        t_check(event_files(sub, first, sizeof first) == 1, "expected one event file in %s", sub);
        const char *name = strrchr(first, '/');
        long stamp = name ? atol(name + 21) : 0;
        const char *dot = name ? strchr(name + 21, '.') : NULL;
        t_check(name && stamp >= (long)t0 - 1 && stamp <= (long)t0 + 2 && dot && !strcmp(dot + 1, host),
                "file name %s is not events.out.tfevents.<time>.%s", name ? name + 1 : "(none)", host);
        event ev[4];
        int n = first[0] ? read_events(first, ev, 4) : -1;
        if (t_check(n == 4, "%d records, expected 4", n)) {
            t_check(!strcmp(ev[0].file_version, "brain.Event:2") && ev[0].n == 0, "first event: file_version '%s'", ev[0].file_version);
            t_check(fabs(ev[0].wall_time - t0) < 2, "version event's wall_time %.3f, now %.3f", ev[0].wall_time, t0);
            t_check(ev[1].session_status == 1 && ev[1].step == 3, "second event: session_log status %d at step %ld (START = 1 at 3)",
                    ev[1].session_status, ev[1].step);
            for (int k = 0; k < 2; k++) {
                const event *e = &ev[2 + k];
                const float *v = k ? v2 : v1;
                t_check(e->step == 3 + k && e->wall_time == (k ? 1700000001.5 : 1700000000.25) && e->n == 3,
                        "event %d: step %ld, wall_time %.3f, %d values", k, e->step, e->wall_time, e->n);
                for (int i = 0; i < 3 && i < e->n; i++)
                    t_check(!strcmp(e->tag[i], tags[i]) && e->value[i] == v[i], "event %d value %d: %s = %.9g, wrote %s = %.9g", k, i,
                            e->tag[i], (double)e->value[i], tags[i], (double)v[i]);
            }
        }
        /* a second writer in the same directory and second: a file of its own */
        if (ct_tfevents_open(&w, sub, 1) == CT_OK) ct_tfevents_close(&w);
        if (ct_tfevents_open(&w, sub, 1) == CT_OK) ct_tfevents_close(&w);
        t_check(event_files(sub, first, sizeof first) == 3, "three writers should leave three files in %s", sub);
    }

    t_case("tfevents/an unusable --logdir fails before training, with its name");
    {
        static char out[1 << 16];
        int rc = t_run_ctrain("train small-cnn --samples 64 --val-samples 0 --epochs 1 --threads 1 --no-run-dir --logdir /dev/null/tb",
                              out, sizeof out);
        t_check(rc > 0 && rc < 128 && strstr(out, "/dev/null") && !strstr(out, "Epoch 1/"), "exit %d: %s", rc, out);
    }

    /* ---- TensorBoard's own reader on real runs ---- */
    static char out[1 << 17];
    char args[2048], check[1024];
    if (!tensorboard_python()[0]) {
        t_skip("tfevents/TensorBoard's EventAccumulator reads ctrain's files: %s", tb_why);
    } else {
        t_case("tfevents/TensorBoard reads every tag and value of `ctrain train small-cnn --logdir` back");
        snprintf(args, sizeof args, "train small-cnn --samples 384 --val-samples 128 --epochs 3 --batch 64 --threads 1 --seed 3 "
                 "--optimizer sgd --lr 0.05 --schedule step --step-size 1 --gamma 0.5 --no-run-dir --csv %s/cnn.csv --logdir %s/cnn",
                 dir, dir);
        int rc = t_run_ctrain(args, out, sizeof out);
        if (t_check(rc == 0, "train exited %d: %s", rc, out)) {
            snprintf(sub, sizeof sub, "%s/cnn/cpu", dir);
            snprintf(check, sizeof check, "--csv %s/cnn.csv --n-train 384 --lr 0.05 --gamma 0.5 --step-size 1", dir);
            rc = tensorboard_check(sub, check);
            t_check(rc == 0, "tests/tensorboard_check.py exited %d", rc);
        }

        t_case("tfevents/TensorBoard reads val_eer of `ctrain train siamese-lstm --trials --logdir` back");
        char feats[256], trials[256];
        if (t_speaker_data(dir, feats, trials, sizeof feats)) {
            snprintf(args, sizeof args, "train siamese-lstm --data %s --trials %s --pairs 256 --val-pairs 64 --epochs 2 --batch 32 "
                     "--frames 20 --mels 8 --hidden 8 --embed 4 --threads 1 --schedule constant --lr 0.003 --no-run-dir --csv %s/lstm.csv "
                     "--logdir %s/lstm", feats, trials, dir, dir);
            rc = t_run_ctrain(args, out, sizeof out);
            if (t_check(rc == 0 && strstr(out, "val_eer: "), "train exited %d: %s", rc, out)) {
                snprintf(sub, sizeof sub, "%s/lstm/cpu", dir);
                snprintf(check, sizeof check, "--csv %s/lstm.csv --n-train 256 --lr 0.003 --eer", dir);
                rc = tensorboard_check(sub, check);
                t_check(rc == 0, "tests/tensorboard_check.py exited %d", rc);
            }
        }

        t_case("tfevents/a run resumed from an earlier checkpoint into the same logdir: TensorBoard shows each epoch once, the latest");
        /* 1 epoch (checkpoint kept aside), on to 3 epochs, then again from the epoch-1 checkpoint with another
         * --clip-norm: the third file's SessionLog START at step 2 drops the second run's steps 2 and 3 */
        const char *base = "train small-cnn --samples 256 --val-samples 64 --batch 64 --threads 1 --seed 5 --optimizer sgd --lr 0.05 "
                           "--no-run-dir";
        snprintf(args, sizeof args, "%s --epochs 1 --checkpoint %s/r.h5 --csv %s/r.csv --logdir %s/r && cp %s/r.h5 %s/r1.h5 && "
                 "%s %s --epochs 3 --resume %s/r.h5 --checkpoint %s/r.h5 --csv %s/r.csv --logdir %s/r && "
                 "%s %s --epochs 3 --resume %s/r1.h5 --checkpoint %s/r.h5 --csv %s/r.csv --logdir %s/r --clip-norm 0.01",
                 base, dir, dir, dir, dir, dir, t_ctrain_bin(), base, dir, dir, dir, dir, t_ctrain_bin(), base, dir, dir, dir, dir);
        rc = t_run_ctrain(args, out, sizeof out);
        if (t_check(rc == 0, "the three runs exited %d: %s", rc, out)) {
            snprintf(sub, sizeof sub, "%s/r/cpu", dir);
            t_check(event_files(sub, first, sizeof first) == 3, "three runs should leave three event files in %s", sub);
            snprintf(check, sizeof check, "--csv %s/r.csv --n-train 256 --lr 0.05", dir);
            rc = tensorboard_check(sub, check);
            t_check(rc == 0, "tests/tensorboard_check.py exited %d", rc);
        }

        t_case("tfevents/`ctrain time --logdir DIR` writes DIR/cpu, which TensorBoard reads back");
        snprintf(args, sizeof args, "time small-cnn --protocol smoke --device cpu --threads 1 --epochs 3 --logdir %s/time --json %s/time.json",
                 dir, dir);
        rc = t_run_ctrain(args, out, sizeof out);
        if (t_check(rc == 0, "time exited %d: %s", rc, out)) {
            snprintf(sub, sizeof sub, "%s/time/cpu", dir);
            /* small-cnn's optimizer at its default rate, constant (what `ctrain time` trains with) */
            const char *lr = strstr(out, " lr ");
            snprintf(check, sizeof check, "--time-json %s/time.json --n-train 512 --lr %g", dir, lr ? atof(lr + 4) : -1.0);
            rc = tensorboard_check(sub, check);
            t_check(rc == 0, "tests/tensorboard_check.py exited %d", rc);
            snprintf(sub, sizeof sub, "%s/time/gpu", dir);
            struct stat sb;
            t_check(stat(sub, &sb) != 0, "%s exists, but no GPU run was asked for", sub);
        }
    }
    snprintf(args, sizeof args, "rm -rf '%s'", dir);
    if (system(args) != 0) printf("  note: could not remove %s\n", dir);
}
