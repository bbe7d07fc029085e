/* train_speakers.c - train the siamese LSTM speaker model through libctrain, from
 * outside ctrain, with a checkpoint and a weights file.
 *
 * Synthetic speakers (each a pattern of log-mel frames of its own, with noise:
 * io/corpus.h), a quarter of them held out for validation; the siamese LSTM
 * (models/siamese_lstm.h) on the CPU's table of operations (layers/ops.h); the
 * speaker task (train/speaker_task.h), which draws pairs of utterances and crops
 * and prepares each batch on a background thread; and ct_fit (train/train.h),
 * which writes a checkpoint after every epoch (train/checkpoint.h). The trained
 * weights are saved (io/weights.h), loaded into a second model built alike, and
 * must come back bit for bit.
 *
 * Exits 0 when the held-out pair accuracy of the last epoch reaches PASS_ACCURACY
 * and the weights file round-trips, 1 when not, 2 on an error.
 *
 *   cc -O2 -o train_speakers examples/train_speakers.c $(pkg-config --cflags --libs ctrain)
 *   ./train_speakers [DIR]     (DIR: where checkpoint.h5 and weights.h5 go; default .)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctrain.h>

#define SPEAKERS  64
#define UTTS      6                     /* utterances per speaker */
#define MELS      8                     /* features per frame */
#define FRAMES    20                    /* frames per training crop */
#define PAIRS     2048                  /* training pairs per epoch, half of them same-speaker */
#define VAL_PAIRS 512                   /* pairs of the held-out speakers */
#define BATCH     32
#define EPOCHS    3
#define PASS_ACCURACY 0.85              /* chance is 0.5; 0.94 here after 3 epochs */

#define TRY(call) do { if ((call) != CT_OK) { \
        fprintf(stderr, "train_speakers: %s: %s\n", #call, ct_last_error()); exit(2); } } while (0)

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    char checkpoint[4096], weights[4096];
    snprintf(checkpoint, sizeof checkpoint, "%s/checkpoint.h5", dir);
    snprintf(weights, sizeof weights, "%s/weights.h5", dir);

    ct_threads_set(ct_cpu_count());
    ct_rngs rngs;
    ct_rngs_seed(&rngs, 11);

    ct_corpus corpus;
    ct_synth_config synth = { .speakers = SPEAKERS, .utts_per_speaker = UTTS, .min_frames = FRAMES,
                              .max_frames = FRAMES + 10, .n_mels = MELS, .noise = 0.5f, .seed = 11 };
    TRY(ct_corpus_synthetic(&corpus, &synth));

    /* The model: a small LSTM and embedding, on the CPU, planned for BATCH pairs. */
    siamese_lstm_config cfg = ct_siamese_lstm_defaults();
    cfg.n_mels = MELS;
    cfg.frames = FRAMES;
    cfg.hidden = 16;
    cfg.embed = 8;
    static siamese_lstm model;
    TRY(ct_siamese_lstm_build(&model, &cfg));
    ct_siamese_lstm_init_weights(&model, &rngs.init);
    TRY(ct_siamese_lstm_set_device(&model, &ct_cpu_backend));
    TRY(ct_siamese_lstm_plan(&model, BATCH));
    printf("Model: siamese-lstm, %zu parameters\n", ct_params_count(&model.params));

    /* The task: pairs of the training speakers, validated on the held-out ones. */
    speaker_task_config tc = { .pairs = PAIRS, .val_pairs = VAL_PAIRS, .batch = BATCH,
                               .val_split = CT_VAL_SPEAKERS, .val_fraction = 0.25, .seed = 11 };
    speaker_model sm = ct_speaker_model_lstm(&model);
    static speaker_task data;
    TRY(ct_speaker_task_init(&data, &tc, &corpus, &sm, &rngs, stderr));
    ct_task task = ct_speaker_task_ops(&data);

    /* A checkpoint records what the run is (its model and settings) beside the weights. */
    ct_ckpt_meta meta = { .model = "siamese-lstm" };
    ct_kv_set_int(&meta.model_cfg, "hidden", cfg.hidden);
    ct_kv_set_int(&meta.model_cfg, "embed", cfg.embed);
    ct_fit_config fit = {
        .epochs = EPOCHS,
        .batch = BATCH,
        .optim = ct_optim_defaults(OPT_RMSPROP),
        .progress = 0,
        .meta = &meta,
        .rngs = &rngs,
        .checkpoint = checkpoint,
    };
    fit.optim.lr = 3e-3f;
    fit.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = fit.optim.lr };

    ct_epoch_log hist[EPOCHS];
    TRY(ct_fit(&task, &fit, hist, stdout));

    int epoch;
    long step;
    TRY(ct_ckpt_verify(checkpoint, &epoch, &step));
    printf("checkpoint %s: after epoch %d\n", checkpoint, epoch);

    /* The weights file, read back into a second model of the same configuration. */
    TRY(ct_siamese_lstm_to_host(&model));
    TRY(ct_weights_save(weights, "siamese-lstm", &model.params, NULL));
    static siamese_lstm again;
    TRY(ct_siamese_lstm_build(&again, &cfg));
    TRY(ct_weights_load(weights, "siamese-lstm", &again.params, NULL));
    int same = again.params.numel == model.params.numel
               && memcmp(again.params.data, model.params.data, model.params.numel * sizeof *model.params.data) == 0;
    printf("weights %s: %s\n", weights, same ? "read back bit for bit" : "DIFFER from the trained ones");

    double acc = hist[EPOCHS - 1].val_accuracy;
    int learned = acc >= PASS_ACCURACY;
    printf("final held-out pair accuracy %.4f: %s (threshold %.2f)\n", acc,
           learned ? "learned" : "did NOT learn", PASS_ACCURACY);

    ct_siamese_lstm_free(&again);
    ct_speaker_task_free(&data);
    ct_siamese_lstm_free(&model);
    ct_corpus_free(&corpus);
    return learned && same ? 0 : 1;
}
