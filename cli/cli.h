/* cli.h - the ctrain command-line program: subcommands and shared helpers. */
#ifndef CT_CLI_H
#define CT_CLI_H
#include <stdio.h>

#define CTRAIN_VERSION "0.1.0"

int  cmd_train(int argc, char **argv);   /* ctrain train MODEL [options] */
int  cmd_info(int argc, char **argv);    /* ctrain info */
/* The hardware/software header printed before training: CPU model, cores, threads, BLAS. */
void cli_print_header(FILE *out, int threads);

#endif
