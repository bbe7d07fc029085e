/* ctrain.c - entry point of bin/ctrain: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>
#include "cli/cli.h"
#include "core/blas_select.h"
#include "layers/gemm_packed.h"
#include "core/threads.h"
#include "cuda/device.h"

static void usage(FILE *out)
{
    fprintf(out,
        "ctrain " CTRAIN_VERSION " - a small deep-learning training engine in C (CPU on OpenBLAS, GPU on cuBLAS and cuDNN)\n"
        "\n"
        "usage: ctrain COMMAND [options]\n"
        "\n"
        "commands:\n"
        "  prep voxceleb compute log-mel features of a VoxCeleb audio tree into an HDF5 feature store\n"
        "  train MODEL   train a model and print a Keras-style per-epoch log\n"
        "                (siamese-lstm, siamese-cnn on a feature store or synthetic speakers; cnn on IDX\n"
        "                images such as Fashion-MNIST; small-cnn on synthetic images)\n"
        "  eval MODEL    evaluate trained weights (siamese-lstm, siamese-cnn: EER and minDCF on a trial\n"
        "                list; cnn: test accuracy and confusion matrix)\n"
        "  time MODEL    time training per epoch on each device (table, JSON, SVG; --compare runs side by side)\n"
        "  export        write a checkpoint's weights for Keras (save_weights h5) or PyTorch (state_dict)\n"
        "  import        read Keras or PyTorch weights into a ctrain weights file\n"
        "  info          print the hardware and software ctrain runs on\n"
        "\n"
        "`ctrain COMMAND --help` describes a command's options. Every command reads them the same way:\n"
        "--name VALUE or --name=VALUE, a switch alone (--tf32), and -- ends the options (every word after\n"
        "it is a file name, even one that begins with '-'). Progress bars go to stderr, only when it is a\n"
        "terminal. SIGINT (Ctrl-C) or SIGTERM stops train, time and eval cleanly (train writes a checkpoint\n"
        "and says how to resume; exit 130 or 143); a second signal stops at once.\n");
}

static int run(int argc, char **argv)
{
    if (argc > 0 && argv[0] && argv[0][0]) cli_program = argv[0];
    ct_blas_select(argv);   /* may execute the program again, with OpenBLAS on better kernels */
    if (ct_kernels_init() != CT_OK) { fprintf(stderr, "ctrain: %s\n", ct_last_error()); return 2; }
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "--version")) { printf("ctrain %s\ncommit %s\n", CTRAIN_VERSION, cli_commit()); return 0; }
    if (!strcmp(cmd, "train") || !strcmp(cmd, "time")) {   /* the commands that run as MPI ranks */
        if (ct_dist_start(&cli_dist) != CT_OK) {   /* every rank joins the job, or none */
            if (cli_reports()) fprintf(stderr, "ctrain %s: %s\n", cmd, ct_last_error());
            return 2;
        }
    }
    if (!strcmp(cmd, "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 2, argv + 2);
    if (!strcmp(cmd, "prep")) return cmd_prep(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "time")) return cmd_time(argc - 2, argv + 2);
    if (!strcmp(cmd, "export")) return cmd_export(argc - 2, argv + 2);
    if (!strcmp(cmd, "import")) return cmd_import(argc - 2, argv + 2);
    fprintf(stderr, "ctrain: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}

int main(int argc, char **argv)
{
    int rc = run(argc, argv);
    cli_close_device();   /* the command's backend (--device) stays open until here; NCCL's communicator,
                             which belongs to its GPU, closed with the training session (catalog/session.h) */
    ct_dist_finalize(&cli_dist, rc != 0, rc);   /* MPI's end; a rank that failed alone ends the whole job */
    return rc;
}
