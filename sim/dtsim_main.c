/* dtsim: simulates large-model training steps and long runs on GPU clusters. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: dtsim COMMAND [ARGS]\n\n"
            "commands:\n"
            "  run SCENARIO.json       simulate training steps; report step time, MFU, bubbles,\n"
            "                          communication and memory per GPU\n"
            "  validate CASES.json     compare predictions with published or measured results\n"
            "  faults SCENARIO.json    failures, checkpoints and goodput over a long run (Monte Carlo)\n"
            "  sweep SCENARIO.json     vary values and simulate every combination\n"
            "  plan SCENARIO.json      search the parallel layouts for the fastest that fits\n"
            "  compare A.json B.json.. scenarios (and --variant's of the first) side by side: step\n"
            "                          time, MFU, memory, communication, bubble, days and cost\n"
            "  import megatron|hf|deepspeed ...  Megatron-LM arguments, a Hugging Face config.json or a\n"
            "                          DeepSpeed ds_config.json to a scenario or model file\n"
            "  export megatron SCENARIO.json  the scenario as Megatron-LM arguments\n"
            "  report SCENARIO.json --measured RUN_DIR  a measured dtrain run (--run-dir) beside its\n"
            "                          simulation: step time, tokens/s, TFLOP/s, MFU, with the error\n"
            "  async SCENARIO.json     asynchronous data parallelism with parameter servers beside\n"
            "                          synchronous all-reduce: throughput, server load, staleness\n\n"
            "Run 'dtsim COMMAND --help' for a command's options. Formats: docs/formats.md.\n"
            "exit: 0 ok, 2 bad input, 1 runtime failure\n");
}

static int dispatch(int argc, char **argv);

/* What a command printed reached its reader, or the run failed: a full disk or a closed pipe on
 * the standard output is an error (exit 1), never a silent success. */
int main(int argc, char **argv)
{
    int rc = dispatch(argc, argv);
    errno = 0;
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) { /* a failed command said why already */
        fprintf(stderr, "dtsim: writing the standard output: %s\n", errno ? strerror(errno) : "failed");
        return rc ? rc : 1;
    }
    return rc;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "run"))
        return cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "validate"))
        return cli_validate(argc - 1, argv + 1);
    if (!strcmp(cmd, "faults"))
        return cli_faults(argc - 1, argv + 1);
    if (!strcmp(cmd, "sweep"))
        return cli_sweep(argc - 1, argv + 1);
    if (!strcmp(cmd, "plan"))
        return cli_plan(argc - 1, argv + 1);
    if (!strcmp(cmd, "report"))
        return cli_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "async"))
        return cli_async(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare"))
        return cli_compare(argc - 1, argv + 1);
    if (!strcmp(cmd, "import"))
        return cli_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "export"))
        return cli_export(argc - 1, argv + 1);
    fprintf(stderr, "dtsim: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
