/* time_opts.c - the options of `ctrain time MODEL`, declared once in
 * time_opt_table (catalog/options.h): cli/time.c parses argv and --config from
 * it, cli/time_print.c prints its --help, and tests/test_options.c walks it
 * with the other tables. `time` records none of them in files. */
#include <stddef.h>
#include "cli/time.h"

/* The options of `ctrain time MODEL` (time.h), in the order of --help; the model's own come after. */
#define T(field) offsetof(time_opts, field)
#define TIME CT_CMD_TIME
const ct_opt time_opt_table[] = {
    { CT_OPT_HEADING, "\noptions:", 0, 0, 0, 0, 0, NULL, TIME, NULL, .store = CT_IN_NONE },
    { CT_OPT_STR, "--device", "LIST", T(devices), 0, 0, 0, NULL, TIME, "comma-separated: cpu, gpu, gpu:N (default cpu,gpu; a device that "
      "cannot run\nsays why and its columns read n/a); --devices is the old spelling", .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--tf32", "", T(tf32), 0, 0, 0, NULL, TIME, "GPU: allow TensorFloat-32 matrix products and convolutions (default: "
      "pure FP32)", .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--deterministic", "", T(deterministic), 0, 0, 0, NULL, TIME, "GPU: deterministic cuDNN convolution algorithms only",
      .store = CT_IN_NONE },
    { CT_OPT_STR, "--precision", "LIST", T(precisions), 0, 0, 0, NULL, TIME, "comma-separated: fp32, bf16 (default fp32): each on every "
      "device, side by side\n(bf16: docs/precision.md; a device without it says why)", .store = CT_IN_NONE },
    { CT_OPT_STR, "--protocol", "NAME", T(protocol), 0, 0, 0, NULL, TIME,
      "seed:  speaker models 300,000 + 120,000 pairs, 20 epochs; image models 60,000 +\n"
      "       10,000 images, 12 epochs (the blog's experiment; hours on a CPU)\n"
      "bench: 3,072 + 1,024 pairs or 6,000 + 1,000 images, 4 epochs (about a minute\n"
      "       per model on 2 cores; the default)\n"
      "smoke: a few seconds (tests)\n"
      "all with batch 128 (smoke 64); the options below override the protocol", .store = CT_IN_NONE },
    { CT_OPT_INT, "--epochs", "N", T(epochs), 0, 1, 100000, NULL, TIME, "epochs (the first is the warm-up, left out of the statistics)",
      .store = CT_IN_NONE },
    { CT_OPT_INT, "--batch", "N", T(batch), 0, 1, 1 << 16, NULL, TIME, "batch size (pairs or images)", .store = CT_IN_NONE },
    { CT_OPT_LONG, "--pairs", "N", T(pairs), 0, 1, 100000000L, NULL, TIME, "training pairs per epoch (speaker models)", .store = CT_IN_NONE },
    { CT_OPT_LONG, "--val-pairs", "N", T(val_pairs), 0, 0, 100000000L, NULL, TIME, "validation pairs per epoch (speaker models)",
      .store = CT_IN_NONE },
    { CT_OPT_LONG, "--samples", "N", T(samples), 0, 1, 100000000L, NULL, TIME, "training images per epoch (image models)",
      .store = CT_IN_NONE },
    { CT_OPT_LONG, "--val-samples", "N", T(val_samples), 0, 0, 100000000L, NULL, TIME, "validation images per epoch (image models)",
      .store = CT_IN_NONE },
    { CT_OPT_STR, "--data", "WHAT", T(data), 0, 0, 0, NULL, TIME, "synthetic (default: generated from the seed, no dataset needed); "
      "speaker models:\na feature store from `ctrain prep voxceleb`; cnn: fashion-mnist or an IDX directory", .store = CT_IN_NONE },
    { CT_OPT_INT, "--threads", "N", T(threads), 0, 1, 1024, NULL, TIME, "CPU threads for training and for both peaks (default: all cores; "
      "under mpirun,\nthe cores over the ranks on the machine)", .store = CT_IN_NONE },
    { CT_OPT_LONG, "--seed", "S", T(seed), 0, 0, 0x7fffffffL, NULL, TIME, "seed of the data, the weights and dropout (default 1)",
      .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--per-layer", "", T(layers), 0, 0, 0, NULL, TIME, "also time every layer's forward and backward pass (ms per batch, "
      "share of\nthe step, GFLOP/s), measured inside the same training steps (--layers is\nthe old spelling)", .store = CT_IN_NONE },
    { CT_OPT_STR, "--json", "FILE.json", T(json), 0, 0, 0, NULL, TIME, "write the results (one file per device when several: "
      "FILE-DEVICE.json) and\na picture of the per-epoch seconds and loss curves next to it (FILE.svg)", .store = CT_IN_NONE },
    { CT_OPT_FLOAT, "--sample-hz", "HZ", T(sample_hz), 0, 0, 100, NULL, TIME, "how often the power, energy and temperature counters are "
      "read during the\ntimed epochs (default 4; 0: not at all): RAPL and hwmon for the CPU, NVML\nfor a GPU; a counter that is not "
      "there reads n/a with the reason", .store = CT_IN_NONE },
    { CT_OPT_STR, "--price", "LIST", T(price), 0, 0, 0, NULL, TIME, "DEVICE=PER_HOUR,...: what renting each device costs an hour "
      "(e.g.\ncpu=0.10,gpu=2.50, any currency): the cost per epoch and per whole run of the\nprotocol", .store = CT_IN_NONE },
    { CT_OPT_STR, "--electricity", "PER_KWH", T(electricity), 0, 0, 0, NULL, TIME, "the price of a kWh: each epoch's and run's "
      "electricity from the measured\njoules", .store = CT_IN_NONE },
    { CT_OPT_STR, "--hardware-cost", "LIST", T(hardware_cost), 0, 0, 0, NULL, TIME, "DEVICE=PRICE,...: what buying each device costs: "
      "the break-even, the\nhours of training after which owning it beats renting it at --price (less\nits electricity)",
      .store = CT_IN_NONE },
    { CT_OPT_STR, "--html", "FILE.html", T(html), 0, 0, 0, NULL, TIME, "a report page: the table and charts in one self-contained "
      "file (also with\n--compare A.json B.json --html FILE.html)", .store = CT_IN_NONE },
    { CT_OPT_BOOL, "--verbose", "", T(verbose), 0, 0, 0, NULL, TIME, "show the Keras-style training log", .store = CT_IN_NONE },
    { CT_OPT_STR, "--logdir", "DIR", T(logdir), 0, 0, 0, NULL, TIME, "TensorBoard event files of each device's run in DIR/cpu, DIR/gpu "
      "(TensorBoard\noverlays them): loss, accuracy, val_loss, val_accuracy, learning_rate,\nepoch_seconds, samples_per_second per "
      "epoch, flushed after every epoch", .store = CT_IN_NONE },
    { CT_OPT_STR, "--config", "FILE.yaml", T(config), 0, 0, 0, NULL, TIME, "options from a YAML file, keys named after the long options "
      "(protocol: bench,\nper_layer: true); options on the command line win", .store = CT_IN_NONE },
    { CT_OPT_HEADING, "  --compare A.json B.json ...   print runs written by --json side by side (e.g. two machines)\n"
      "data-parallel (mpirun -np N ctrain time MODEL ...; docs/distributed.md): the table is the whole job's,\n"
      "a line gives samples/s per rank, the JSON records the ranks; --threads is per rank", 0, 0, 0, 0, 0, NULL, TIME, NULL,
      .store = CT_IN_NONE },
    { CT_OPT_STR, "--baseline", "FILE.json", T(baseline), 0, 0, 0, NULL, TIME, "the scaling efficiency against that run of the same "
      "workload (normally one\nrank with as many cores): this run's samples/s over its", .store = CT_IN_NONE },
    { CT_OPT_HEADING, "SIGINT or SIGTERM stops the run after the training step in progress, writing nothing (exit 130, 143).",
      0, 0, 0, 0, 0, NULL, TIME, NULL, .store = CT_IN_NONE },
    { CT_OPT_END, 0, 0, 0, 0, 0, 0, NULL, 0, NULL, .store = CT_IN_NONE }
};
#undef T
#undef TIME
