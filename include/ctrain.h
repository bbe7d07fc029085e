/* ctrain.h - the whole public API of libctrain in one include, in layer order:
 *
 *   core  <-  layers  <-  models  <-  train        io on core only; cuda beside layers
 *
 * `make install` puts it at PREFIX/include/ctrain/ctrain.h, beside the headers it
 * includes (core/, layers/, io/, models/, train/, cuda/, as in the source tree), and
 * `pkg-config --cflags ctrain` gives -IPREFIX/include/ctrain, so a program writes
 *
 *   #include <ctrain.h>
 *
 * and builds with `cc prog.c $(pkg-config --cflags --libs ctrain)`
 * (examples/train_small.c; README.md, "Installing the library"). A program may also
 * include single headers ("core/params.h") with the same flags.
 *
 * Installed but not included here: core/hot.h (a compiler attribute for ctrain's own
 * hot loops), cuda/check.h (error macros for .cu files; needs CUDA's headers) and
 * cuda/counter_rng.h (the dropout kernel's random numbers). Every other installed
 * header is, and `make test` checks that none is missing.
 *
 * Naming: every exported function and variable starts with ct_; the types of models
 * and tasks keep their short names (seq_cnn, image_task, siamese_lstm, ...).
 */
#ifndef CTRAIN_H
#define CTRAIN_H

#ifdef __cplusplus   /* C++ programs may include it too: every function has C linkage */
extern "C" {
#endif

/* core: errors, memory, parameters, random numbers, threads, clocks, peaks, SIGINT/SIGTERM, data types */
#include "core/error.h"
#include "core/arena.h"
#include "core/params.h"
#include "core/rng.h"
#include "core/threads.h"
#include "core/blas_select.h"
#include "core/clock.h"
#include "core/peak.h"
#include "core/interrupt.h"
#include "core/bytes.h"
#include "core/half.h"
#include "core/dtype.h"

/* layers: forward and backward of each layer on the CPU, the losses, the optimizers,
 * and the backends every model calls through (ct_backend, ct_ops_cpu) */
#include "layers/ops.h"
#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/conv2d_winograd.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/gemm_packed.h"
#include "layers/loss.h"
#include "layers/lstm.h"
#include "layers/lstm_fused.h"
#include "layers/optim.h"
#include "layers/pair.h"
#include "layers/pool.h"

/* cuda: the GPU backend. ct_backend_open_gpu and ct_gpu_open are in every build (one
 * without CUDA fails with CT_ENODEV and says so); the GPU twins of the layers, which
 * models reach through the GPU backend's table, are linked in only when libctrain was
 * built with CUDA */
#include "cuda/device.h"
#include "cuda/ops_gpu.h"
#include "cuda/activation.h"
#include "cuda/batchnorm.h"
#include "cuda/conv2d.h"
#include "cuda/dense.h"
#include "cuda/kernels.h"
#include "cuda/lstm.h"
#include "cuda/lstm_map.h"
#include "cuda/pool.h"

/* io: HDF5 files, weights, images, audio and features, trial lists, JSON, SVG, TensorBoard events, YAML */
#include "io/h5.h"
#include "io/h5atomic.h"
#include "io/h5probe.h"
#include "io/kv.h"
#include "io/lock.h"
#include "io/weights.h"
#include "io/images.h"
#include "io/idx.h"
#include "io/audio.h"
#include "io/audio_m4a.h"
#include "io/fbank.h"
#include "io/featstore.h"
#include "io/corpus.h"
#include "io/prefetch.h"
#include "io/trials.h"
#include "io/json.h"
#include "io/svg.h"
#include "io/files.h"
#include "io/tfevents.h"
#include "io/yamlmap.h"

/* models: written once for every device, each layer called through the table */
#include "models/profile.h"
#include "models/seq_cnn.h"
#include "models/small_cnn.h"
#include "models/siamese_head.h"
#include "models/siamese_lstm.h"
#include "models/siamese_cnn.h"
#include "models/speaker_model.h"

/* train: the training loop (ct_fit), the tasks that plug models into it,
 * checkpoints, speaker-verification metrics, and the table of models the
 * commands use (descriptors, their options, Keras/PyTorch export) */
#include "train/task.h"
#include "train/train.h"
#include "train/checkpoint.h"
#include "train/image_task.h"
#include "train/speaker_task.h"
#include "train/model_desc.h"
#include "train/verify.h"
#include "train/verify_report.h"
#include "train/options.h"
#include "train/model_table.h"
#include "train/model_image.h"
#include "train/model_speaker.h"
#include "train/export.h"
#include "train/profile_fit.h"
#include "train/run_dir.h"
#include "train/dist.h"

#ifdef __cplusplus
}
#endif

#endif
