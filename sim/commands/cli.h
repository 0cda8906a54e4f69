/* dtsim subcommands. Each returns the process exit code: 0 success, 2 bad input (reason on
 * stderr), 1 runtime failure. */
#ifndef DTSIM_SIM_CLI_H
#define DTSIM_SIM_CLI_H

int cli_run(int argc, char **argv);
int cli_validate(int argc, char **argv);
int cli_faults(int argc, char **argv);
int cli_sweep(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_report(int argc, char **argv); /* a measured dtrain run beside its simulation */
int cli_async(int argc, char **argv);
int cli_compare(int argc, char **argv); /* scenarios and variants side by side */
int cli_import(int argc, char **argv);  /* Megatron-LM arguments, Hugging Face and DeepSpeed configs in */
int cli_export(int argc, char **argv);  /* a scenario as Megatron-LM arguments */

/* Writes a JSON document (json_t*) to path, or stdout for "-"; files are written to a
 * temporary name and renamed, so a failed run leaves nothing half-written. 0 or -1. */
int cli_write_json(void *json, const char *path);

#endif
