/* ctrain.h - the public API of libctrain: what a program needs to train a model.
 *
 *   #include <ctrain.h>
 *   cc prog.c $(pkg-config --cflags --libs ctrain)
 *
 * (examples/train_small.c; docs/library.md, "Installing the library"). In layer order,
 * core <- layers <- models <- train, io on core only, cuda beside layers:
 *
 *   errors         ct_status, ct_last_error                     core/error.h
 *   set-up         threads, random streams, SIGINT/SIGTERM      core/threads.h, core/rng.h, core/interrupt.h
 *   parameters     one buffer of named views; activation arena  core/params.h, core/arena.h
 *   devices        the backend a model runs on: the CPU's       layers/ops.h (ct_cpu_backend),
 *                  or a GPU's from ct_backend_open_gpu          cuda/device.h, cuda/ops_gpu.h
 *   optimizers     SGD, Adam, ..., clipping, lr schedules       layers/optim.h
 *   models         cnn from a spec (seq_cnn), small-cnn,        models/seq_cnn.h, models/small_cnn.h,
 *                  siamese-lstm, siamese-cnn, and the           models/siamese_lstm.h, models/siamese_cnn.h,
 *                  speaker-model table they share               models/speaker_model.h
 *   data           images: synthetic or IDX (MNIST);            io/images.h, io/idx.h,
 *                  speakers: a feature store, its corpus,       io/featstore.h, io/corpus.h,
 *                  pairs, trial lists                           io/trials.h
 *   training       the task a model plugs in, ct_fit and its    train/task.h, train/train.h,
 *                  configuration, the image and speaker tasks   train/image_task.h, train/speaker_task.h
 *   files          checkpoints (exact resume), weights files    train/checkpoint.h, io/weights.h
 *   metrics        EER, minDCF, scoring a trial list            train/verify.h
 *
 * The headers these include are public too, as far as they reach (the layers'
 * dimension structs in layers/ops.h's signatures, io/kv.h's named values,
 * models/profile.h, io/prefetch.h held by the speaker task): `make install`
 * installs exactly that closure beside this file (scripts/public-headers.sh
 * computes it) under PREFIX/include/ctrain, and `pkg-config --cflags ctrain`
 * gives -IPREFIX/include/ctrain, so a program may also include one of them
 * ("core/params.h") with the same flags.
 *
 * Everything else is private to libctrain and not installed: the kernels inside
 * layers (layers/gemm_packed.h, ...), the GPU twins of the layers (reached only
 * through the GPU backend's table), cuDNN's weight map (cuda/lstm_map.h), HDF5's child-process
 * probe (io/h5probe.h), and what only the commands use (the table of models,
 * options, run directories, export, data-parallel ranks, reports).
 * scripts/private-headers.txt lists them; scripts/check-deps.sh (make check-deps,
 * make test) fails when this header reaches one of them, or when a header of the
 * tree is neither reached nor listed there.
 *
 * Naming: every exported function and variable starts with ct_; the types of
 * models and tasks keep their short names (seq_cnn, image_task, siamese_lstm, ...).
 */
#ifndef CTRAIN_H
#define CTRAIN_H

#ifdef __cplusplus   /* C++ programs may include it too: every function has C linkage */
extern "C" {
#endif

/* core: errors, parameters, activation memory, random streams, threads, SIGINT/SIGTERM, data types */
#include "core/error.h"
#include "core/params.h"
#include "core/arena.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/interrupt.h"
#include "core/dtype.h"

/* layers: the backends every model calls through (ct_backend: a table of operations, its math
 * settings and its device; ct_cpu_backend), the optimizers */
#include "layers/ops.h"
#include "layers/optim.h"

/* cuda: opening the GPU backend (ct_backend_open_gpu). In every build: one without CUDA
 * fails with CT_ENODEV and says so */
#include "cuda/device.h"
#include "cuda/ops_gpu.h"

/* io: training data and weights files */
#include "io/images.h"
#include "io/idx.h"
#include "io/corpus.h"
#include "io/featstore.h"
#include "io/trials.h"
#include "io/weights.h"

/* models: written once for every device, each layer called through the table */
#include "models/seq_cnn.h"
#include "models/seq_cnn_spec.h"
#include "models/small_cnn.h"
#include "models/siamese_lstm.h"
#include "models/siamese_cnn.h"
#include "models/speaker_model.h"

/* train: the training loop and what plugs into it, checkpoints, speaker-verification metrics */
#include "train/task.h"
#include "train/train.h"
#include "train/image_task.h"
#include "train/speaker_task.h"
#include "train/checkpoint.h"
#include "train/verify.h"

#ifdef __cplusplus
}
#endif

#endif
