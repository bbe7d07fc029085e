/* train_small.c - train an image classifier through libctrain, from outside ctrain.
 *
 * Synthetic images (each class a bar of its own orientation and position, with
 * jitter and noise: io/images.h), a small CNN built from a spec (models/seq_cnn.h),
 * put on the CPU backend (layers/ops.h), wrapped in an image task
 * (train/image_task.h) and trained by the same loop as `ctrain train` (ct_fit,
 * train/train.h), which prints Keras's per-epoch log. Exits 0 when the held-out
 * accuracy of the last epoch reaches PASS_ACCURACY, 1 when it does not, 2 on an error.
 *
 * Against an installed ctrain (docs/library.md, "Installing the library"):
 *
 *   cc -O2 -o train_small examples/train_small.c $(pkg-config --cflags --libs ctrain)
 *   ./train_small
 */
#include <stdio.h>
#include <stdlib.h>
#include <ctrain.h>

#define SPEC     "conv8k3p1,relu,maxpool2,conv16k3p1,relu,maxpool2,flatten,dense4"
#define CLASSES  4                      /* the spec's last layer has as many units */
#define SIZE     16                     /* images are 1 x SIZE x SIZE */
#define NOISE    1.0f                   /* pixel noise: at 1.0 the first epoch ends near 0.7 */
#define N_TRAIN  2048
#define N_VAL    512
#define BATCH    32
#define EPOCHS   4
#define PASS_ACCURACY 0.90              /* chance is 1 / CLASSES = 0.25 */

/* Every ctrain function that can fail returns a ct_status and leaves a message
 * saying what went wrong (core/error.h). */
#define TRY(call) do { if ((call) != CT_OK) { \
        fprintf(stderr, "train_small: %s: %s\n", #call, ct_last_error()); exit(2); } } while (0)

int main(void)
{
    ct_threads_set(ct_cpu_count());     /* once, before any model is planned */

    ct_rngs rngs;                       /* three streams: initial weights, dropout, data order */
    ct_rngs_seed(&rngs, 1);

    ct_images train, val;
    TRY(ct_images_synthetic(&train, N_TRAIN, CLASSES, SIZE, SIZE, NOISE, 1));
    TRY(ct_images_synthetic(&val, N_VAL, CLASSES, SIZE, SIZE, NOISE, 2));

    /* The model: parse the spec for 1 x SIZE x SIZE images, draw the weights, put it on
     * the CPU backend (a GPU backend from ct_backend_open_gpu would do the same on a GPU),
     * and plan its activations for batches of up to BATCH images. */
    static seq_cnn model;               /* static: the layer table is large */
    TRY(ct_seq_cnn_build(&model, SPEC, 1, SIZE, SIZE, CLASSES));
    ct_seq_cnn_init_weights(&model, &rngs.init);
    TRY(ct_seq_cnn_set_device(&model, &ct_cpu_backend));
    TRY(ct_seq_cnn_plan(&model, BATCH));
    printf("Model: %s, %zu parameters\n", model.spec, ct_params_count(&model.params));

    /* The task: what ct_fit asks of a model (load a batch, forward, backward) and the
     * model's training state (weights, gradients, optimizer) on its device. */
    image_task data;
    TRY(ct_image_task_init(&data, &model, &train, &val, N_TRAIN, N_VAL, BATCH, &rngs));
    ct_task task = ct_image_task_ops(&data);

    ct_fit_config fit = {
        .epochs = EPOCHS,
        .batch = BATCH,
        .optim = ct_optim_defaults(OPT_ADAM),   /* lr 1e-3, betas 0.9 / 0.999 */
        .progress = 0,                          /* the per-epoch log only, no live bar */
    };
    fit.sched = (ct_sched){ .kind = SCHED_CONSTANT, .base_lr = fit.optim.lr };

    ct_epoch_log hist[EPOCHS];
    TRY(ct_fit(&task, &fit, hist, stdout));

    double acc = hist[EPOCHS - 1].val_accuracy;
    int learned = acc >= PASS_ACCURACY;
    printf("final held-out accuracy %.4f: %s (threshold %.2f)\n", acc,
           learned ? "learned" : "did NOT learn", PASS_ACCURACY);

    ct_image_task_free(&data);
    ct_seq_cnn_free(&model);
    ct_images_free(&train);
    ct_images_free(&val);
    return learned ? 0 : 1;
}
