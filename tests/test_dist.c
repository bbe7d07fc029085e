/* test_dist.c - data-parallel training (train/dist.h) as a user runs it: ctrain
 * under `mpirun -np 2`, compared with one process.
 *
 *   - every rank holds bit-identical parameters after every step (the run's own
 *     per-step hash comparison, shown to catch a one-ulp difference);
 *   - 2 ranks x batch B/2 give the weights of 1 process x batch B within a stated
 *     tolerance (the order of the gradient sums is the only difference), for the
 *     siamese LSTM and the CNN (whose dropout masks must match too);
 *   - a run resumed under 2 ranks is the straight 2-rank run bit for bit, and a
 *     2-rank checkpoint resumes in one process; a feature store streamed by 2 ranks
 *     (each reading its own pairs' crops) trains the weights it does loaded;
 *   - bad situations end every rank with one line, never a hang: a batch that does
 *     not divide, a rank that cannot read its data, different settings or binaries
 *     on two ranks, a rank killed or stopped in the middle of a run;
 *   - first, the communicator interface itself on 2 ranks (tests/test_comm.c).
 *
 * The cases need a build with MPI (ct_dist_compiled) and Open MPI's mpirun; without
 * them they report SKIP with the reason. mpirun runs with --oversubscribe (2 ranks on
 * any machine) and, as root, --allow-run-as-root. */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/test.h"
#include "io/h5.h"
#include "train/dist.h"

static char mpirun[512];

/* 1 when mpirun is there; its command line with the options the tests need in mpirun[]. */
static int find_mpirun(void)
{
    FILE *p = popen("command -v mpirun 2>/dev/null", "r");
    char path[400] = "";
    if (p) {
        if (!fgets(path, sizeof path, p)) path[0] = '\0';
        pclose(p);
    }
    path[strcspn(path, "\n")] = '\0';
    if (!path[0]) return 0;
    snprintf(mpirun, sizeof mpirun, "%s --oversubscribe%s --mca btl self,vader --mca btl_vader_single_copy_mechanism none",
             path, geteuid() == 0 ? " --allow-run-as-root" : "");
    return 1;
}

/* Runs a shell command line with stderr merged into stdout, captured into out; the exit status. */
static int run_sh(const char *cmd, char *out, size_t n)
{
    char full[8200];
    /* every command's messages, background jobs' too; in the runner's scratch folder, where
     * runs/ (each train's run directory) may appear */
    snprintf(full, sizeof full, "exec 2>&1; cd '%s' && %.7600s", t_scratch_dir(), cmd);
    FILE *p = popen(full, "r");
    if (!p) { out[0] = '\0'; return -1; }
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *ctrain_bin(void) { return t_ctrain_bin(); }   /* absolute: the commands run in the scratch folder */

/* ---- comparing two weights files tensor by tensor ---- */
typedef struct {
    hid_t other;
    double worst;         /* the normalised max error over the whole model: max |a - b| / max |b| over every tensor */
    double emax, rmax;    /* max |a - b| and max |b| so far */
    int tensors, exact;   /* tensors compared, and bit-identical */
    int bad;              /* a tensor missing or of another shape in the other file */
    int verbose;          /* print each tensor's error */
} diff_state;

static herr_t diff_one(hid_t f, const char *name, const H5O_info_t *info, void *ctx)
{
    diff_state *d = ctx;
    if (info->type != H5O_TYPE_DATASET) return 0;
    int nd = 0, nd2 = 0;
    size_t dims[CT_H5_DIMS_MAX], dims2[CT_H5_DIMS_MAX], n = 1;
    if (ct_h5_shape(f, name, &nd, dims) != CT_OK || ct_h5_shape(d->other, name, &nd2, dims2) != CT_OK || nd != nd2) { d->bad++; return 0; }
    for (int k = 0; k < nd; k++) { if (dims[k] != dims2[k]) d->bad++; n *= dims[k]; }
    hid_t ds = H5Dopen2(f, name, H5P_DEFAULT);
    hid_t ty = ds >= 0 ? H5Dget_type(ds) : -1;
    int is_float = ty >= 0 && H5Tget_class(ty) == H5T_FLOAT;
    if (ty >= 0) H5Tclose(ty);
    if (ds >= 0) H5Dclose(ds);
    if (!is_float || d->bad) return 0;
    float *a = t_alloc(n), *b = t_alloc(n);
    if (ct_h5_read_f32(f, name, a, n) == CT_OK && ct_h5_read_f32(d->other, name, b, n) == CT_OK) {
        double m = 1e-6, e = 0;
        for (size_t i = 0; i < n; i++) { double r = b[i] < 0 ? -b[i] : b[i]; if (r > m) m = r; }
        for (size_t i = 0; i < n; i++) { double x = (double)a[i] - b[i]; if (x < 0) x = -x; if (x > e) e = x; }
        if (e > d->emax) d->emax = e;
        if (m > d->rmax) d->rmax = m;
        d->worst = d->emax / d->rmax;
        if (d->verbose) printf("    %-28s max |a - b| %.2e, max |b| %.2e: %.2e\n", name, e, m, e / m);
        d->tensors++;
        d->exact += memcmp(a, b, n * sizeof *a) == 0;
    } else {
        d->bad++;
    }
    free(a); free(b);
    return 0;
}

/* The normalised max error between the weights in files a and b (every float dataset), over
 * the whole model: a tensor whose values are all tiny (a bias whose gradient is zero in exact
 * arithmetic, which holds only rounding noise) is measured against the model's scale. */
static double weights_diff(const char *a, const char *b, diff_state *d, int verbose)
{
    memset(d, 0, sizeof *d);
    d->verbose = verbose;
    hid_t fa, fb;
    if (ct_h5_open(&fa, a) != CT_OK) { d->bad = 1; return 1e9; }
    if (ct_h5_open(&fb, b) != CT_OK) { ct_h5_close(fa); d->bad = 1; return 1e9; }
    d->other = fb;
    H5Ovisit(fa, H5_INDEX_NAME, H5_ITER_NATIVE, diff_one, d);
    ct_h5_close(fa); ct_h5_close(fb);
    return d->bad || !d->tensors ? 1e9 : d->worst;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* Tolerances for 2 ranks x B/2 against 1 process x B at the end of the runs below: the
 * sums of the two halves' gradients round differently from the sums over the whole batch,
 * and every later step carries that on. The comparisons train with SGD: RMSprop and Adam
 * divide each gradient by its running size, which makes the pure rounding noise of a
 * parameter whose true gradient is zero (the embedding's bias before a Euclidean distance)
 * into steps of the full learning rate, so that tensor differs completely (docs/distributed.md
 * has the numbers). Measured here: the PASS lines' "max err". */
#define TOL_LSTM 1e-6
#define TOL_CNN  1e-6

/* Starts `mpirun -np 2 ctrain RUN --csv DIR/TAG.csv` in the background, finds rank 1 by the
 * marker in its command line and its MPI rank, sends it `sig` (-9, -STOP) two seconds after
 * it appears, and waits for the job. Returns the seconds from the signal to the job's end
 * (-1 when not found); out gets the output, with "mpirun exit N" and "found rank 1 (PID)". */
static int signal_rank1(const char *dir, const char *tag, const char *bin, const char *run, const char *sig, char *out, size_t n)
{
    static char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "M=%s/%s.csv; (timeout 120 %s -np 2 %s %s --csv $M; echo \"mpirun exit $?\") & J=$!; "
             "for i in $(seq 100); do sleep 0.2; for p in /proc/[0-9]*; do "
             "if tr '\\0' ' ' 2>/dev/null < $p/cmdline | grep -q \"$M\" && tr '\\0' '\\n' 2>/dev/null < $p/environ | grep -qx OMPI_COMM_WORLD_RANK=1; "
             "then R=${p#/proc/}; break 2; fi; done; done; "
             "sleep 2; echo \"found rank 1 ($R)\"; kill %s $R; S=$(date +%%s); wait $J; echo \"ended $(( $(date +%%s) - S )) s after the signal\"",
             dir, tag, mpirun, bin, run, sig);
    run_sh(cmd, out, n);
    const char *e = strstr(out, "ended ");
    return e && strstr(out, "found rank 1 (") && !strstr(out, "found rank 1 ()") ? atoi(e + 6) : -1;
}

/* NCCL is loaded at run time (ct_comm_nccl_load): a missing or wrong library is one
 * line naming CTRAIN_NCCL, and the real one loads where the CUDA toolkit has it. */
static void nccl_loading(void)
{
    if (!ct_comm_nccl_compiled()) {
        t_skip("mpi/NCCL: this build has no NCCL (it needs MPI, the GPU backend and nccl.h)");
        return;
    }
    char buf[1024];
    const char *real = "/usr/local/cuda/lib64/libnccl.so.2";
    t_case("mpi/NCCL: a missing library is one line saying where to point CTRAIN_NCCL");
    setenv("CTRAIN_NCCL", "/nonexistent/libnccl.so.2", 1);
    ct_status st = ct_comm_nccl_load();
    t_check(st == CT_ENODEV && strstr(ct_last_error(), "/nonexistent/libnccl.so.2") && strstr(ct_last_error(), "CTRAIN_NCCL=")
            && !strchr(ct_last_error(), '\n'), "status %d: %s", (int)st, ct_last_error());
    t_case("mpi/NCCL: a library that is not NCCL is refused, naming the function it lacks");
    setenv("CTRAIN_NCCL", "libz.so.1", 1);
    st = ct_comm_nccl_load();
    t_check(st == CT_ENODEV && strstr(ct_last_error(), "has no ncclGetVersion") && strstr(ct_last_error(), "2.14"),
            "status %d: %s", (int)st, ct_last_error());
    unsetenv("CTRAIN_NCCL");
    if (access(real, R_OK) != 0) {
        t_skip("mpi/NCCL: no %s here to load", real);
        return;
    }
    t_case("mpi/NCCL: the toolkit's libnccl loads, 2.14 or newer, and ctrain info names it");
    st = ct_comm_nccl_load();
    t_check(st == CT_OK, "%s", ct_last_error());
    ct_comm_nccl_describe(buf, sizeof buf);
    t_check(strncmp(buf, "NCCL 2.", 7) == 0 && atoi(buf + 7) >= 14 && strstr(buf, "libnccl.so.2"), "%s", buf);
}

void suite_mpi(void)
{
    static char out[1 << 16];
    char cmd[8192], dir[] = "/tmp/ctrain_mpi_XXXXXX";
    if (t_comm_rank()) return;   /* this process is a rank of t_comm_cases' job: it ran its own cases */
    nccl_loading();
    if (!ct_dist_compiled()) {
        t_comm_without_mpi();
        /* what mpirun -np 2 would start: two copies told their rank by the launcher's variables */
        t_case("mpi/a build without MPI, launched as 2 ranks, says so in one line and exits");
        snprintf(cmd, sizeof cmd, "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 %s train small-cnn --samples 64 --epochs 1; echo \"rank 0 exit $?\"; "
                 "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 %s train small-cnn --samples 64 --epochs 1; echo \"rank 1 exit $?\"",
                 ctrain_bin(), ctrain_bin());
        run_sh(cmd, out, sizeof out);
        t_check(strstr(out, "built without MPI") && strstr(out, "make MPI=1") && count(out, "ctrain train:") == 1, "message: %s", out);
        t_check(strstr(out, "rank 0 exit 2") && strstr(out, "rank 1 exit 2") && !strstr(out, "Epoch"), "exits: %s", out);
        t_skip("mpi: this build has no MPI (apt-get install libopenmpi-dev openmpi-bin, then make; make MPI=1 insists)");
        return;
    }
    if (!find_mpirun()) {
        t_skip("mpi: no mpirun on the PATH (apt-get install openmpi-bin)");
        return;
    }
    if (!mkdtemp(dir)) { t_case("mpi/temporary folder"); t_check(0, "mkdtemp failed"); return; }
    /* Under SAN=1: Open MPI's own allocations, kept until exit, are not ctrain's leaks
     * (tests/lsan-openmpi.supp names its libraries). Many are made by plug-ins that MPI_Finalize
     * unloads, so the leak's stack is followed by the slow unwinder, down into libmpi and
     * libopen-pal, which stay loaded and which the suppressions can name. */
    char cwd[512], env[1400];
    const char *old = getenv("LSAN_OPTIONS"), *asan = getenv("ASAN_OPTIONS");
    if (getcwd(cwd, sizeof cwd)) {
        snprintf(env, sizeof env, "%s%ssuppressions=%s/tests/lsan-openmpi.supp", old ? old : "", old ? ":" : "", cwd);
        setenv("LSAN_OPTIONS", env, 1);
    }
    snprintf(env, sizeof env, "%s%sfast_unwind_on_malloc=0", asan ? asan : "", asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", env, 1);
    t_comm_cases(mpirun);   /* the communicator interface itself, under the same mpirun */
    const char *bin = ctrain_bin();
    /* 16 steps of the siamese LSTM (128 pairs, batch 16, 2 epochs): with its RMSprop for the
     * exactness cases, with SGD where 2 ranks are compared with 1 process (see TOL_LSTM) */
    const char *lstm = "train siamese-lstm --speakers 12 --utts 4 --pairs 128 --val-pairs 32 --epochs 2 --batch 16 "
                       "--frames 20 --mels 8 --hidden 16 --embed 8 --threads 1 --no-progress";
    char lstm_sgd[600];
    snprintf(lstm_sgd, sizeof lstm_sgd, "%s --optimizer sgd --lr 0.1", lstm);
    int rc;
    diff_state ds;
    double err;

    t_case("mpi/siamese-lstm: 2 ranks hold bit-identical parameters after every step");
    snprintf(cmd, sizeof cmd, "%s -np 2 %s %s --dist-check-every 1 --out %s/two.h5 --checkpoint %s/two_ck.h5", mpirun, bin, lstm, dir, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "Ranks: 2") && strstr(out, "batch 16 = 2 x 8 per rank"), "no ranks line: %s", out);
    t_check(count(out, "Epoch 2/2") == 1, "only rank 0 prints (%d 'Epoch 2/2' lines): %s", count(out, "Epoch 2/2"), out);

    t_case("mpi/the per-step comparison catches one rank one ulp apart");
    snprintf(cmd, sizeof cmd, "CT_DIST_TEST_DIVERGE=3 timeout 120 %s -np 2 %s %s", mpirun, bin, lstm);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc != 0 && rc != 124, "a diverged rank must stop the run (exit %d): %s", rc, out);
    t_check(strstr(out, "the parameters' hash after step 3 differs between rank 0 and rank 1") != NULL, "message: %s", out);
    t_check(count(out, "ctrain train:") == 1, "one line, from rank 0 (%d): %s", count(out, "ctrain train:"), out);

    t_case("mpi/siamese-lstm: 2 ranks x batch 8 = 1 process x batch 16");
    snprintf(cmd, sizeof cmd, "%s %s --out %s/one.h5 && %s -np 2 %s %s --out %s/two_sgd.h5 --checkpoint %s/part_sgd.h5 "
             "--stop-after-steps 5 && %s -np 2 %s %s --out %s/two_sgd.h5 --resume %s/part_sgd.h5",
             bin, lstm_sgd, dir, mpirun, bin, lstm_sgd, dir, dir, mpirun, bin, lstm_sgd, dir, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    snprintf(cmd, sizeof cmd, "%s/two_sgd.h5", dir);
    char one[600];
    snprintf(one, sizeof one, "%s/one.h5", dir);
    err = weights_diff(cmd, one, &ds, 1);
    t_check(err <= TOL_LSTM, "%s: normalised max difference %.2e > %.0e", "2 ranks vs 1 process", err, TOL_LSTM);
    t_check(ds.tensors >= 4 && !ds.bad, "%d tensors compared, %d missing or misshapen", ds.tensors, ds.bad);
    printf("  siamese-lstm after 16 steps: max normalised difference %.2e over %d tensors (%d bit-identical)\n", err, ds.tensors, ds.exact);

    t_case("mpi/siamese-lstm: a run resumed under 2 ranks is the straight run, bit for bit");
    snprintf(cmd, sizeof cmd, "%s -np 2 %s %s --checkpoint %s/part.h5 --stop-after-steps 5 && %s -np 2 %s %s --resume %s/part.h5 "
             "--out %s/resumed.h5", mpirun, bin, lstm, dir, mpirun, bin, lstm, dir, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0 && strstr(out, "Resuming from"), "exit %d: %s", rc, out);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/resumed.h5", dir);
    snprintf(b, sizeof b, "%s/two.h5", dir);
    err = weights_diff(a, b, &ds, 0);
    t_check(!ds.bad && ds.tensors >= 4 && ds.exact == ds.tensors, "%d of %d tensors bit-identical (max err %.2e)", ds.exact, ds.tensors, err);

    t_case("mpi/siamese-lstm from a feature store: 2 ranks streaming it (each reads its own pairs' crops) = 2 ranks loading it, bit for bit");
    char fs_dir[600], fs_feats[600], fs_trials[600];
    snprintf(fs_dir, sizeof fs_dir, "%s/fs", dir);   /* its own store: a later case makes dir/feats.h5 */
    if (t_check(mkdir(fs_dir, 0700) == 0, "mkdir %s", fs_dir) && t_speaker_data(fs_dir, fs_feats, fs_trials, sizeof fs_feats)) {
        const char *fs = "train siamese-lstm --pairs 128 --val-pairs 32 --epochs 2 --batch 16 --frames 20 --mels 8 --hidden 16 "
                         "--embed 8 --threads 1 --no-progress";
        snprintf(cmd, sizeof cmd, "%s -np 2 %s %s --data %s --out %s/fs_loaded.h5 && %s -np 2 %s %s --data %s --data-memory 60K "
                 "--out %s/fs_streamed.h5", mpirun, bin, fs, fs_feats, dir, mpirun, bin, fs, fs_feats, dir);
        rc = run_sh(cmd, out, sizeof out);
        t_check(rc == 0 && strstr(out, "loaded into memory") && strstr(out, "half the memory available over 2 ranks")
                && strstr(out, "streamed from the file"), "exit %d: %s", rc, out);
        snprintf(a, sizeof a, "%s/fs_loaded.h5", dir);
        snprintf(b, sizeof b, "%s/fs_streamed.h5", dir);
        err = weights_diff(a, b, &ds, 0);
        t_check(!ds.bad && ds.tensors >= 4 && ds.exact == ds.tensors, "%d of %d tensors bit-identical (max err %.2e)", ds.exact, ds.tensors, err);
    }

    t_case("mpi/siamese-lstm: a 2-rank checkpoint resumes in one process");
    snprintf(cmd, sizeof cmd, "%s %s --resume %s/part_sgd.h5 --out %s/resumed1.h5", bin, lstm_sgd, dir, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    snprintf(a, sizeof a, "%s/resumed1.h5", dir);
    err = weights_diff(a, one, &ds, 0);
    printf("  resumed in 1 process from a 2-rank checkpoint: max normalised difference %.2e\n", err);
    t_check(err <= TOL_LSTM, "%s: normalised max difference %.2e > %.0e", "resumed in 1 process vs 1 process", err, TOL_LSTM);

    /* the Keras mnist_cnn (1.2 M parameters, two dropout layers) on synthetic images: 8 steps */
    const char *cnn = "train cnn --data synthetic --samples 256 --val-samples 64 --batch 32 --epochs 1 --threads 1 --no-progress "
                      "--optimizer sgd --lr 0.05";
    t_case("mpi/cnn with dropout: 2 ranks x batch 16 = 1 process x batch 32");
    snprintf(cmd, sizeof cmd, "%s -np 2 %s %s --out %s/cnn2.h5 && %s %s --out %s/cnn1.h5", mpirun, bin, cnn, dir, bin, cnn, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    snprintf(a, sizeof a, "%s/cnn2.h5", dir);
    snprintf(b, sizeof b, "%s/cnn1.h5", dir);
    err = weights_diff(a, b, &ds, 0);
    t_check(err <= TOL_CNN, "%s: normalised max difference %.2e > %.0e", "2 ranks vs 1 process", err, TOL_CNN);
    t_check(ds.tensors >= 8 && !ds.bad, "%d tensors compared, %d missing or misshapen", ds.tensors, ds.bad);
    printf("  cnn after 8 steps: max normalised difference %.2e over %d tensors (%d bit-identical)\n", err, ds.tensors, ds.exact);

    /* batchnorm: each rank's own statistics by default (DDP's), the whole batch's with --sync-batchnorm */
    const char *cnn_bn = "train cnn --data synthetic --samples 256 --val-samples 64 --batch 32 --epochs 1 --threads 1 --no-progress "
                         "--optimizer sgd --lr 0.05 --arch conv8k3,batchnorm,relu,maxpool2,flatten,dense16,batchnorm,relu,dropout0.3,dense10";
    t_case("mpi/cnn with batchnorm: --sync-batchnorm makes 2 ranks x 16 = 1 process x 32, each rank's own statistics do not");
    snprintf(cmd, sizeof cmd, "%s %s --out %s/bn1.h5 && %s -np 2 %s %s --sync-batchnorm --out %s/bn2s.h5 && %s -np 2 %s %s --out %s/bn2.h5",
             bin, cnn_bn, dir, mpirun, bin, cnn_bn, dir, mpirun, bin, cnn_bn, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    snprintf(a, sizeof a, "%s/bn2s.h5", dir);
    snprintf(b, sizeof b, "%s/bn1.h5", dir);
    err = weights_diff(a, b, &ds, 0);
    t_check(err <= TOL_CNN && ds.tensors >= 8, "synchronised: normalised max difference %.2e > %.0e (%d tensors)", err, TOL_CNN, ds.tensors);
    printf("  cnn with batchnorm, --sync-batchnorm: max normalised difference %.2e (weights and running statistics)\n", err);
    snprintf(a, sizeof a, "%s/bn2.h5", dir);
    double err_own = weights_diff(a, b, &ds, 0);
    t_check(err_own > 100 * TOL_CNN, "each rank's own statistics should differ from the whole batch's: %.2e", err_own);
    printf("  cnn with batchnorm, each rank's own statistics: max normalised difference %.2e\n", err_own);

    /* 4 ranks: parts in the middle of the batch skip dropout numbers on both sides */
    t_case("mpi/cnn with batchnorm and dropout: 4 ranks x 8, --sync-batchnorm = 1 process x 32");
    snprintf(cmd, sizeof cmd, "%s -np 4 %s %s --sync-batchnorm --out %s/bn4s.h5", mpirun, bin, cnn_bn, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0 && strstr(out, "batch 32 = 4 x 8 per rank"), "exit %d: %s", rc, out);
    snprintf(a, sizeof a, "%s/bn4s.h5", dir);
    err = weights_diff(a, b, &ds, 0);
    t_check(err <= TOL_CNN && ds.tensors >= 8, "4 ranks: normalised max difference %.2e > %.0e (%d tensors)", err, TOL_CNN, ds.tensors);
    printf("  cnn with batchnorm and dropout, 4 ranks, --sync-batchnorm: max normalised difference %.2e\n", err);

    t_case("mpi/siamese-cnn (batchnorm over both towers): --sync-batchnorm makes 2 ranks = 1 process");
    const char *scnn = "train siamese-cnn --speakers 12 --utts 4 --pairs 64 --val-pairs 16 --epochs 1 --batch 16 --frames 16 --mels 8 "
                       "--threads 1 --no-progress --optimizer sgd --lr 0.05";
    snprintf(cmd, sizeof cmd, "%s %s --out %s/s1.h5 && %s -np 2 %s %s --sync-batchnorm --out %s/s2.h5", bin, scnn, dir, mpirun, bin, scnn, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    snprintf(a, sizeof a, "%s/s2.h5", dir);
    snprintf(b, sizeof b, "%s/s1.h5", dir);
    err = weights_diff(a, b, &ds, 0);
    t_check(err <= TOL_CNN && ds.tensors >= 8, "normalised max difference %.2e > %.0e (%d tensors)", err, TOL_CNN, ds.tensors);
    printf("  siamese-cnn, --sync-batchnorm: max normalised difference %.2e\n", err);

    t_case("mpi/ctrain time under mpirun: per-rank and total throughput, the ranks in the JSON, the scaling efficiency");
    const char *timed = "time cnn --device cpu --protocol smoke --epochs 2";
    snprintf(cmd, sizeof cmd, "%s %s --threads 2 --json %s/t1.json > /dev/null && %s -np 2 %s %s --threads 1 --json %s/t2.json "
             "--baseline %s/t1.json && grep -c '\"ranks\": 2' %s/t2.json", bin, timed, dir, mpirun, bin, timed, dir, dir, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 0, "exit %d: %s", rc, out);
    t_check(strstr(out, "Ranks: 2") && strstr(out, "cpu: 2 ranks x 1 thread: ") && strstr(out, "per rank"), "no per-rank line: %s", out);
    t_check(strstr(out, "cpu: scaling efficiency ") && strstr(out, "(the same cores)"), "no scaling efficiency: %s", out);
    t_check(count(out, "Protocol: smoke") == 1, "only rank 0 prints: %s", out);

    t_case("mpi/ctrain time --device gpu under mpirun: each rank asks for its own GPU, gpu:LOCAL_RANK");
    snprintf(cmd, sizeof cmd, "timeout 120 %s -np 2 %s time cnn --device gpu --protocol smoke --epochs 2 --threads 1", mpirun, bin);
    rc = run_sh(cmd, out, sizeof out);
    /* no GPU here: rank 0's row names the device it asked for (rank 1 prints nothing); with a GPU, it trains on it */
    if (strstr(out, "are on one GPU"))   /* a machine with one GPU: both ranks on it, refused before NCCL starts */
        t_check(rc != 0 && rc != 124 && count(out, "ranks 0 and 1 are on one GPU") == 1 && strstr(out, "CUDA_VISIBLE_DEVICES")
                && !strstr(out, "MPI_ABORT"), "two ranks on one GPU: exit %d, not one line from rank 0: %s", rc, out);
    else
        t_check(strstr(out, "devices gpu") && strstr(out, "gpu:0") && !strstr(out, "gpu:1"), "rank 0 did not ask for gpu:0: %s", out);

    t_case("mpi/val_eer on a trial list: the ranks share the utterances, the number is one process's");
    {
        /* the 2-rank run's val_eer after its last epoch against `ctrain eval` of the weights it wrote, in one
         * process: the same trials, the same weights, embedded whole in both */
        char feats[600], trials[600];
        if (t_speaker_data(dir, feats, trials, sizeof feats)) {
            snprintf(cmd, sizeof cmd, "timeout 120 %s -np 2 %s train siamese-lstm --data %s --trials %s --pairs 128 --val-pairs 32 "
                     "--epochs 2 --batch 16 --hidden 16 --embed 8 --frames 20 --mels 8 --threads 1 --no-progress --no-run-dir "
                     "--out %s/eer2.h5 --csv %s/eer2.csv > %s/eer2.log 2>&1 && %s eval siamese-lstm --weights %s/eer2.h5 "
                     "--data %s --trials %s --threads 1 --json %s/eer1.json > %s/eer1.log 2>&1 && tail -1 %s/eer2.csv && "
                     "grep '\"eer\"' %s/eer1.json || { cat %s/eer2.log %s/eer1.log; exit 1; }", mpirun, bin, feats, trials, dir,
                     dir, dir, bin, dir, feats, trials, dir, dir, dir, dir, dir, dir);
            rc = run_sh(cmd, out, sizeof out);
            t_check(rc == 0, "exit %d: %s", rc, out);
            /* the CSV's last line: epoch,loss,accuracy,val_loss,val_accuracy,val_eer,...; the JSON: "eer": X */
            double eer2 = -1, eer1 = -2;
            const char *line = out, *js = strstr(out, "\"eer\"");
            for (int f = 0; f < 5 && line; f++) line = strchr(line + 1, ',');
            if (line) eer2 = atof(line + 1);
            if (js && (js = strchr(js, ':'))) eer1 = atof(js + 1);
            t_check(eer2 >= 0 && fabs(eer2 - eer1) < 5e-7, "val_eer of 2 ranks %.6f, eval in one process %.6f: %s", eer2, eer1, out);
            printf("  val_eer with 2 ranks %.6f, ctrain eval in one process %.6f\n", eer2, eer1);
        }
    }

    t_case("mpi/a diverging loss stops every rank alike, with one line");
    snprintf(cmd, sizeof cmd, "timeout 120 %s -np 2 %s train siamese-lstm --speakers 12 --utts 4 --pairs 64 --val-pairs 32 --epochs 3 "
             "--batch 16 --frames 10 --mels 6 --hidden 8 --embed 4 --threads 1 --optimizer sgd --lr 1000 --no-progress", mpirun, bin);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc == 1, "exit %d (want 1): %s", rc, out);
    t_check(strstr(out, "loss became") && count(out, "ctrain train:") == 1 && !strstr(out, "MPI_ABORT"), "message: %s", out);

    t_case("mpi/a batch that does not divide: one line, every rank exits");
    snprintf(cmd, sizeof cmd, "timeout 120 %s -np 2 %s %s --batch 15", mpirun, bin, lstm);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc != 0 && rc != 124, "exit %d: %s", rc, out);
    t_check(strstr(out, "--batch 15 does not divide evenly over 2 ranks") && count(out, "ctrain train:") == 1, "message: %s", out);

    t_case("mpi/a rank that cannot read its data stops every rank with its message");
    snprintf(cmd, sizeof cmd, "timeout 120 %s -np 1 %s %s : -np 1 %s %s --data %s/missing.h5", mpirun, bin, lstm, bin, lstm, dir);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc != 0 && rc != 124, "exit %d: %s", rc, out);
    t_check(strstr(out, "rank 1: ") && strstr(out, "missing.h5") && count(out, "ctrain train:") == 1, "message: %s", out);

    t_case("mpi/different settings on two ranks are refused at the start");
    snprintf(cmd, sizeof cmd, "timeout 120 %s -np 1 %s %s : -np 1 %s %s --lr 0.01", mpirun, bin, lstm, bin, lstm);
    rc = run_sh(cmd, out, sizeof out);
    t_check(rc != 0 && rc != 124, "exit %d: %s", rc, out);
    t_check(strstr(out, "the model or its training settings differs between rank 0 and rank 1") && count(out, "ctrain train:") == 1,
            "message: %s", out);

    t_case("mpi/different binaries on two ranks are refused at the start");
    /* the other binary lies beside the first, so that it finds its libraries as the first does
     * (a relocated build finds them relative to its own folder) */
    char other[700];
    snprintf(other, sizeof other, "%s-other-%d", bin, (int)getpid());
    snprintf(cmd, sizeof cmd, "cp %s %s && printf x >> %s && timeout 120 %s -np 1 %s %s : -np 1 %s %s",
             bin, other, other, mpirun, bin, lstm, other, lstm);
    rc = run_sh(cmd, out, sizeof out);
    unlink(other);
    t_check(rc != 0 && rc != 124, "exit %d: %s", rc, out);
    t_check(strstr(out, "the ctrain binary differs between rank 0 and rank 1") && count(out, "ctrain train:") == 1, "message: %s", out);

    /* A long run, one of whose ranks is killed (or stopped) after its first epoch; the job must
     * end, not wait: rank 1 is found by the marker in its command line and its MPI rank. */
    const char *longrun = "train siamese-lstm --speakers 12 --utts 4 --pairs 64000 --val-pairs 32 --epochs 50 --batch 16 "
                          "--frames 20 --mels 8 --hidden 16 --embed 8 --threads 1 --no-progress --dist-timeout 5";
    t_case("mpi/a rank killed mid-run ends the job (no hang)");
    int secs = signal_rank1(dir, "killed", bin, longrun, "-9", out, sizeof out);
    t_check(secs >= 0, "rank 1 not found: %s", out);
    t_check(strstr(out, "mpirun exit ") && !strstr(out, "mpirun exit 0") && !strstr(out, "mpirun exit 124"), "exit: %s", out);
    t_check(secs <= 30, "the job ended %d s after the kill: %s", secs, out);

    t_case("mpi/a stopped rank: the others give up after --dist-timeout, with one line saying so");
    secs = signal_rank1(dir, "stopped", bin, longrun, "-STOP", out, sizeof out);
    t_check(strstr(out, "no answer from the other ranks for 5 s") && strstr(out, "--dist-timeout"), "message: %s", out);
    t_check(strstr(out, "mpirun exit ") && !strstr(out, "mpirun exit 0") && !strstr(out, "mpirun exit 124"), "exit: %s", out);
    t_check(secs >= 4 && secs <= 40, "the job ended %d s after the stop: %s", secs, out);

    /* With --sync-batchnorm a step holds many collectives (two per batchnorm layer forward,
     * one backward, the loss, the gradients): after the first has timed out, the rest must
     * fail at once with its message, not each wait out --dist-timeout again. */
    const char *longbn = "train cnn --data synthetic --samples 8192 --val-samples 64 --batch 32 --epochs 50 --threads 1 "
                         "--no-progress --optimizer sgd --lr 0.05 --sync-batchnorm --dist-timeout 4 "
                         "--arch conv8k3,batchnorm,relu,maxpool2,flatten,dense16,batchnorm,relu,dropout0.3,dense10";
    t_case("mpi/a stopped rank under --sync-batchnorm: one timeout ends the job, the first failure's message");
    secs = signal_rank1(dir, "stopped_bn", bin, longbn, "-STOP", out, sizeof out);
    t_check(secs >= 0, "rank 1 not found: %s", out);
    t_check(strstr(out, "no answer from the other ranks for 4 s") != NULL, "message: %s", out);
    t_check(strstr(out, "mpirun exit ") && !strstr(out, "mpirun exit 0") && !strstr(out, "mpirun exit 124"), "exit: %s", out);
    t_check(secs >= 3 && secs <= 16, "the job ended %d s after the stop (one timeout is 4 s): %s", secs, out);
    printf("  --sync-batchnorm, rank 1 stopped: the job ended %d s after the stop (--dist-timeout 4)\n", secs);

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
}
