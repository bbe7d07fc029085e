/* common.c - the options every `ctrain train MODEL` shares (optimizer, schedule,
 * threads, seed, device, checkpoints and callbacks), their help text, what a
 * checkpoint records of them, and --resume's defaults; and the parsing and
 * help of the models' own options from their tables (see common.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/common.h"
#include "core/threads.h"
#include "cuda/device.h"

/* The process's MPI rank and job (one rank without mpirun), set up by main (cli/ctrain.c). */
ct_dist cli_dist = { .size = 1, .local_size = 1, .timeout_s = CT_DIST_TIMEOUT_DEFAULT, .check_every = 1 };
/* argv[0] as the program was run, for the command lines ctrain prints and records. */
const char *cli_program = "ctrain";

void cli_train_defaults(cli_train_opts *o, const ct_model_descriptor *d)
{
    *o = (cli_train_opts){ .data = d->train.data, .device = "cpu", .epochs = d->train.epochs, .batch = d->train.batch,
                           .threads = ct_dist_default_threads(&cli_dist, ct_cpu_count()), .seed = 1,
                           .dist_timeout = (float)CT_DIST_TIMEOUT_DEFAULT, .dist_check_every = 1, .progress = -1, .step_size = 10, .gamma = 0.1f,
                           .schedule = d->train.schedule };
}

int cli_parse_train_opt(ct_args *a, cli_train_opts *o, ct_status *st)
{
    return ct_args_str(a, "--data", &o->data, st) || ct_args_str(a, "--out", &o->out, st)
        || ct_args_str(a, "--device", &o->device, st) || ct_args_str(a, "--optimizer", &o->optimizer, st)
        || ct_args_str(a, "--schedule", &o->schedule, st)
        || ct_args_int(a, "--epochs", &o->epochs, 1, 100000, st) || ct_args_int(a, "--batch", &o->batch, 1, 1 << 20, st)
        || ct_args_int(a, "--threads", &o->threads, 1, 1024, st) || ct_args_long(a, "--seed", &o->seed, 0, 0x7fffffffL, st)
        || ct_args_float(a, "--lr", &o->lr, 1e-12f, 1e3f, st) || ct_args_float(a, "--clip-norm", &o->clip_norm, 0, 1e9f, st)
        || ct_args_float(a, "--weight-decay", &o->weight_decay, 0, 1e3f, st)
        || ct_args_int(a, "--step-size", &o->step_size, 1, 1000000, st) || ct_args_float(a, "--gamma", &o->gamma, 0, 1, st)
        || ct_args_str(a, "--checkpoint", &o->checkpoint, st) || ct_args_long(a, "--checkpoint-every", &o->checkpoint_every, 1, 0x7fffffffL, st)
        || ct_args_str(a, "--resume", &o->resume, st) || ct_args_str(a, "--save-best", &o->save_best, st)
        || ct_args_str(a, "--monitor", &o->monitor, st) || ct_args_int(a, "--early-stopping", &o->early_stopping, 1, 1000000, st)
        || ct_args_str(a, "--csv", &o->csv, st) || ct_args_str(a, "--on-nan", &o->on_nan, st)
        || ct_args_long(a, "--stop-after-steps", &o->stop_after_steps, 1, 0x7fffffffL, st)
        || ct_args_str(a, "--config", &o->config, st) || ct_args_str(a, "--run-dir", &o->run_dir, st)
        || ct_args_str(a, "--logdir", &o->logdir, st) || (ct_args_flag(a, "--no-run-dir") && (o->no_run_dir = 1))
        || ct_args_float(a, "--dist-timeout", &o->dist_timeout, 1, 1e6f, st)
        || ct_args_long(a, "--dist-check-every", &o->dist_check_every, 0, 0x7fffffffL, st)
        || (ct_args_flag(a, "--sync-batchnorm") && (o->sync_batchnorm = 1))
        || (ct_args_flag(a, "--fixed-pairs") && (o->fixed_pairs = 1))
        || (ct_args_flag(a, "--progress") && (o->progress = 1)) || (ct_args_flag(a, "--no-progress") && !(o->progress = 0))
        || (ct_args_flag(a, "--tf32") && (o->tf32 = 1)) || (ct_args_flag(a, "--deterministic") && (o->deterministic = 1));
}

const char *CLI_TRAIN_HELP =
    "  --epochs N            epochs (default %d)\n"
    "  --batch N             batch size (default %d)\n"
    "  --optimizer NAME      sgd, rmsprop, adam or adamw (default %s)\n"
    "  --lr X                learning rate (default %g)\n"
    "  --schedule NAME       constant, step or cosine learning rate over epochs (default %s)\n"
    "  --step-size N --gamma X   step schedule: lr * gamma^(epoch / N) (defaults 10, 0.1)\n"
    "  --weight-decay X      L2 penalty (decoupled for adamw) (default 0)\n"
    "  --clip-norm X         clip the global gradient norm to X (default 0 = off)\n"
    "  --threads N           CPU threads for OpenBLAS (default: all cores; under mpirun, the cores over the\n"
    "                        ranks on the machine)\n"
    "  --seed S              seed of every random stream (default 1)\n"
    CLI_DEVICE_HELP
    "  --out FILE.h5         write the trained weights (HDF5, replaced atomically)\n"
    "  --fixed-pairs         speaker models: draw the training pairs once and reshuffle them every epoch\n"
    "                        (the seed experiment's protocol); default: new pairs every epoch, a function\n"
    "                        of --seed and the epoch\n"
    "  --progress, --no-progress   force the live progress bar (on stderr) on or off (default: when stderr\n"
    "                        is a terminal)\n"
    "checkpoints and callbacks:\n"
    "  --checkpoint FILE.h5  write a checkpoint (weights, optimizer, RNG and data state) after every epoch\n"
    "  --checkpoint-every N  ... and after every N batches\n"
    "  --resume FILE.h5      continue a run exactly where its checkpoint stopped; the model and training\n"
    "                        settings come from the file (flags given override them, e.g. --epochs);\n"
    "                        resumed on a GPU, its --tf32 and --deterministic too\n"
    "  --save-best FILE.h5   checkpoint of the best epoch so far by --monitor\n"
    "  --monitor NAME        val_loss (default), val_accuracy, val_eer, loss or accuracy\n"
    "  --early-stopping N    stop after N epochs without improvement of --monitor; the best weights\n"
    "                        are restored at the end\n"
    "  --csv FILE.csv        one CSV row per epoch (appended on --resume)\n"
    "  --on-nan WHAT         stop (default) or skip-batch: what a non-finite loss or gradient does\n"
    "  --stop-after-steps N  stop after N batches in total, writing the checkpoint (resume it later)\n"
    "SIGINT (Ctrl-C) or SIGTERM stops after the batch in progress: the checkpoint goes to --checkpoint (the run\n"
    "directory's checkpoint.h5 by default), else beside --out (OUT-interrupted.h5), else to\n"
    "ctrain-MODEL-interrupted.h5; one line gives the command that\n"
    "resumes it; exit 130 or 143, --out not written. A second signal exits at once, writing nothing.\n"
    "watching and repeating runs (README.md, \"Watching and repeating runs\"):\n"
    "  --config FILE.yaml    options from a YAML file, one `key: value` per line, keys named after the long\n"
    "                        options (epochs: 6, pool: mean, tf32: true); options on the command line win\n"
    "  --run-dir DIR         the run's directory (default runs/MODEL-YYYYMMDD-HHMMSS): config.yaml (the\n"
    "                        effective configuration: `--config DIR/config.yaml` repeats the run),\n"
    "                        command.txt, version.txt, header.txt, log.csv, checkpoint.h5, weights.h5,\n"
    "                        tensorboard/ and curves.svg (redrawn after every epoch). --out, --csv,\n"
    "                        --checkpoint and --logdir given explicitly write where they say instead.\n"
    "                        --resume of a checkpoint in a run directory continues in that directory\n"
    "  --no-run-dir          no run directory: only the files --out, --csv, --checkpoint, --logdir name\n"
    "  --logdir DIR          TensorBoard event files in DIR/cpu (DIR/gpu on a GPU), flushed after every\n"
    "                        epoch: loss, accuracy, val_loss, val_accuracy, val_eer, learning_rate,\n"
    "                        epoch_seconds, samples_per_second (default: the run directory's tensorboard/)\n"

    "data-parallel training (mpirun -np N ctrain train MODEL ...; docs/distributed.md):\n"
    "                        --batch is the global batch, split evenly over the N ranks (it must divide);\n"
    "                        one all-reduce of the gradients per step; only rank 0 prints and writes files.\n"
    "                        Batchnorm normalises with each rank's own rows' statistics, as PyTorch's\n"
    "                        DistributedDataParallel does, and keeps rank 0's running statistics\n"
    "  --sync-batchnorm      batchnorm statistics over the whole batch, summed across the ranks (as\n"
    "                        PyTorch's SyncBatchNorm): the single-process run's\n"
    "  --dist-timeout S      seconds a rank waits for the others before ending the job (default 300)\n"
    "  --dist-check-every N  compare a hash of the parameters across ranks every N steps (default 1; 0: never)\n";

ct_status cli_finish_train_opts(cli_train_opts *o, ct_fit_config *fit, ct_optim_kind default_opt)
{
    memset(fit, 0, sizeof *fit);
    /* A resumed run computes what the uninterrupted one would: on a GPU it keeps the checkpoint's
     * precision and algorithm choice (without --deterministic, cuDNN may pick convolution
     * algorithms that sum in a different order every run); on the CPU they mean nothing. */
    int gpu_index = -1;
    CT_TRY(ct_gpu_parse_device(o->device, &gpu_index));
    if (gpu_index >= 0) {
        o->tf32 |= o->ckpt_tf32;
        o->deterministic |= o->ckpt_deterministic;
    }
    CT_TRY(cli_open_device(o->device, o->tf32, o->deterministic, &o->be));
    ct_optim_kind kind = default_opt;
    if (o->optimizer) CT_TRY(ct_optim_parse(&kind, o->optimizer));
    fit->optim = ct_optim_defaults(kind);
    if (o->lr > 0) fit->optim.lr = o->lr;
    fit->optim.clip_norm = o->clip_norm;
    if (o->weight_decay > 0 || kind != OPT_ADAMW) fit->optim.weight_decay = o->weight_decay;
    fit->sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = fit->optim.lr, .step_size = o->step_size,
                             .gamma = o->gamma, .t_max = o->epochs, .eta_min = 0 };
    if (o->schedule) {
        if (!strcmp(o->schedule, "step")) fit->sched.kind = SCHED_STEP;
        else if (!strcmp(o->schedule, "cosine")) fit->sched.kind = SCHED_COSINE;
        else if (strcmp(o->schedule, "constant") != 0)
            return ct_fail(CT_EINVAL, "--schedule %s: use constant, step or cosine", o->schedule);
    }
    fit->epochs = o->epochs;
    fit->batch = o->batch;
    fit->progress = o->progress;
    fit->checkpoint = o->checkpoint;
    fit->checkpoint_every = o->checkpoint_every;
    fit->resume = o->resume;
    fit->save_best = o->save_best;
    fit->early_stopping = o->early_stopping;
    fit->csv = o->csv;
    fit->stop_after_steps = o->stop_after_steps;
    if (o->monitor) CT_TRY(ct_monitor_parse(&fit->monitor, o->monitor));
    if (o->on_nan) CT_TRY(ct_on_nan_parse(&fit->on_nan, o->on_nan));
    if (o->checkpoint_every && !o->checkpoint) return ct_fail(CT_EINVAL, "--checkpoint-every needs --checkpoint FILE.h5");
    ct_threads_set(o->threads);
    return CT_OK;
}

void cli_train_to_meta(ct_kv *kv, const cli_train_opts *o, const ct_fit_config *fit)
{
    const ct_optim_config *c = &fit->optim;
    const char *sched[] = { "constant", "step", "cosine" };
    ct_kv_set_str(kv, "optimizer", ct_optim_name(c->kind));
    ct_kv_set_num(kv, "lr", c->lr);
    ct_kv_set_num(kv, "momentum", c->momentum);
    ct_kv_set_int(kv, "nesterov", c->nesterov);
    ct_kv_set_num(kv, "rho", c->rho);
    ct_kv_set_num(kv, "beta1", c->beta1);
    ct_kv_set_num(kv, "beta2", c->beta2);
    ct_kv_set_num(kv, "eps", c->eps);
    ct_kv_set_num(kv, "weight_decay", c->weight_decay);
    ct_kv_set_num(kv, "clip_norm", c->clip_norm);
    ct_kv_set_str(kv, "schedule", sched[fit->sched.kind]);
    ct_kv_set_int(kv, "step_size", fit->sched.step_size);
    ct_kv_set_num(kv, "gamma", fit->sched.gamma);
    ct_kv_set_int(kv, "t_max", fit->sched.t_max);
    ct_kv_set_num(kv, "eta_min", fit->sched.eta_min);
    ct_kv_set_int(kv, "batch", o->batch);
    ct_kv_set_int(kv, "epochs", o->epochs);
    ct_kv_set_int(kv, "seed", o->seed);
    ct_kv_set_str(kv, "data", o->data);
    ct_kv_set_int(kv, "tf32", o->tf32);
    ct_kv_set_int(kv, "deterministic", o->deterministic);
    ct_kv_set_int(kv, "fixed_pairs", o->fixed_pairs);
}

void cli_train_from_meta(const ct_kv *kv, cli_train_opts *o)
{
    ct_kv_str(kv, "optimizer", &o->optimizer);
    ct_kv_float(kv, "lr", &o->lr);
    ct_kv_float(kv, "weight_decay", &o->weight_decay);
    ct_kv_float(kv, "clip_norm", &o->clip_norm);
    ct_kv_str(kv, "schedule", &o->schedule);
    ct_kv_int(kv, "step_size", &o->step_size);
    ct_kv_float(kv, "gamma", &o->gamma);
    ct_kv_int(kv, "batch", &o->batch);
    ct_kv_int(kv, "epochs", &o->epochs);
    ct_kv_long(kv, "seed", &o->seed);
    ct_kv_str(kv, "data", &o->data);
    ct_kv_int(kv, "tf32", &o->ckpt_tf32);   /* older checkpoints have neither: 0 */
    ct_kv_int(kv, "deterministic", &o->ckpt_deterministic);
    /* a speaker model's checkpoint (it records pairs) without fixed_pairs predates pairs drawn every epoch */
    if (!ct_kv_int(kv, "fixed_pairs", &o->fixed_pairs) && ct_kv_get(kv, "pairs")) o->fixed_pairs = 1;
}

/* With --resume anywhere on the command line, read the checkpoint's configuration
 * (it becomes the defaults; the flags parsed afterwards override it). */
ct_status cli_resume_meta(int argc, char **argv, const char *model, ct_ckpt_meta *meta, const char **path)
{
    *path = NULL;
    for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *file = !strncmp(argv[i], "--resume=", 9) ? argv[i] + 9
                         : !strcmp(argv[i], "--resume") && i + 1 < argc ? argv[i + 1] : NULL;
        if (!file) continue;
        CT_TRY(ct_ckpt_read_meta(file, meta));
        if (strcmp(meta->model, model) != 0)
            return ct_fail(CT_EINVAL, "%s is a checkpoint of model %s, not %s: resume it with `ctrain train %s --resume %s`",
                           file, meta->model, model, meta->model, file);
        *path = file;
    }
    return CT_OK;
}

/* ---- a model's options ---- */

static int takes(const ct_opt *o, unsigned cmd) { return cmd == 0 || (o->cmds & cmd); }

int cli_opt_parse(ct_args *a, const ct_opt *opts, unsigned cmd, void *cfg, unsigned long long *given, ct_status *st)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (o->type == CT_OPT_HEADING || o->type == CT_OPT_NOTE || !takes(o, cmd)) continue;
        char *field = (char *)cfg + o->off;
        const char *s = NULL;
        int hit = 0;
        switch (o->type) {
        case CT_OPT_INT:   hit = ct_args_int(a, o->flag, (int *)field, (int)o->lo, (int)o->hi, st); break;
        case CT_OPT_LONG:  hit = ct_args_long(a, o->flag, (long *)field, (long)o->lo, (long)o->hi, st); break;
        case CT_OPT_FLOAT: hit = ct_args_float(a, o->flag, (float *)field, (float)o->lo, (float)o->hi, st); break;
        case CT_OPT_STR:   hit = ct_args_str(a, o->flag, (const char **)field, st); break;
        case CT_OPT_SQUARE:
            if ((hit = ct_args_int(a, o->flag, (int *)field, (int)o->lo, (int)o->hi, st)) && *st == CT_OK)
                *(int *)((char *)cfg + o->off2) = *(int *)field;
            break;
        case CT_OPT_CHOICE:
            if ((hit = ct_args_str(a, o->flag, &s, st)) && *st == CT_OK && !ct_opt_choice_value(o->choices, s, (int *)field)) {
                char list[256];
                ct_opt_choice_list(o->choices, list, sizeof list);
                *st = ct_fail(CT_EINVAL, "%s %s: use %s", o->flag, s, list);
            }
            break;
        default: break;
        }
        if (hit) {
            if (i < 64) *given |= 1ULL << i;
            return 1;
        }
    }
    return 0;
}

void cli_help_line(FILE *out, const char *left, const char *text)
{
    int n = fprintf(out, "  %-21s ", left);
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n') fprintf(out, "%*s", n, "");
    }
    fputc('\n', out);
}

void cli_opt_help(FILE *out, const ct_opt *opts, unsigned cmd, const void *dflt)
{
    for (int i = 0; opts && opts[i].type != CT_OPT_END; i++) {
        const ct_opt *o = &opts[i];
        if (!takes(o, cmd)) continue;
        if (o->type == CT_OPT_HEADING) { fprintf(out, "%s\n", o->flag); continue; }
        char left[64], text[1024], def[64] = "";
        snprintf(left, sizeof left, "%s %s", o->flag, o->arg);
        const char *field = dflt ? (const char *)dflt + o->off : NULL;
        if (field && !strstr(o->help, "(default")) {
            switch (o->type) {
            case CT_OPT_INT: case CT_OPT_SQUARE: snprintf(def, sizeof def, "%d", *(const int *)field); break;
            case CT_OPT_LONG:  snprintf(def, sizeof def, "%ld", *(const long *)field); break;
            case CT_OPT_FLOAT: snprintf(def, sizeof def, "%g", (double)*(const float *)field); break;
            case CT_OPT_STR:   if (*(const char *const *)field) snprintf(def, sizeof def, "%.60s", *(const char *const *)field); break;
            case CT_OPT_CHOICE: {
                const char *name = ct_opt_choice_name(o->choices, *(const int *)field);
                snprintf(def, sizeof def, "%s", name ? name : "");
                break;
            }
            default: break;
            }
        }
        snprintf(text, sizeof text, def[0] ? "%s (default %s)" : "%s", o->help, def);
        cli_help_line(out, left, text);
    }
}

/* ---- the command line, again ---- */

/* Appends word to buf, quoted for a POSIX shell when it needs it. */
static void append_word(char *buf, size_t cap, const char *word)
{
    size_t k = strlen(buf);
    int plain = word[0] != '\0';
    for (const char *p = word; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%", *p)) plain = 0;
    if (k && k + 1 < cap) buf[k++] = ' ';
    if (plain) { snprintf(buf + k, cap - k, "%s", word); return; }
    if (k + 1 < cap) buf[k++] = '\'';
    for (const char *p = word; *p && k + 5 < cap; p++) {
        if (*p == '\'') { memcpy(buf + k, "'\\''", 4); k += 4; }
        else buf[k++] = *p;
    }
    if (k + 1 < cap) buf[k++] = '\'';
    buf[k < cap ? k : cap - 1] = '\0';
}

void cli_command_line(char *buf, size_t cap, const char *command, int argc, char **argv, const char *drop)
{
    buf[0] = '\0';
    append_word(buf, cap, cli_program);
    append_word(buf, cap, command);
    size_t nd = drop ? strlen(drop) : 0;
    for (int i = 0; i < argc; i++) {
        if (drop && !strcmp(argv[i], "--")) drop = NULL;   /* operands from here on */
        if (drop && !strcmp(argv[i], drop)) { i++; continue; }
        if (drop && !strncmp(argv[i], drop, nd) && argv[i][nd] == '=') continue;
        append_word(buf, cap, argv[i]);
    }
}

void cli_interrupt_checkpoint(char *buf, size_t cap, const char *model, const char *out)
{
    if (!out) { snprintf(buf, cap, "ctrain-%s-interrupted.h5", model); return; }
    size_t n = strlen(out);
    if (n > 3 && !strcmp(out + n - 3, ".h5")) n -= 3;
    snprintf(buf, cap, "%.*s-interrupted.h5", (int)n, out);
}
