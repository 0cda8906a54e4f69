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

/* An output a command will write, checked before its work starts (cli_check_outputs). */
typedef struct {
    const char *flag;   /* "--json": named in the message */
    const char *path;   /* NULL: not asked for */
    int folder;         /* a folder the command makes or fills (sweep --out, faults --plot) */
    int stdout_ok;      /* "-" means the standard output */
} cli_output;

/* Every output of a command, checked up front so that a bad path fails in milliseconds, before
 * the work, with nothing written: a file's folder must take a new file (atomic_file_check), a
 * folder must be one or be makeable in a writable folder, "-" only where stdout_ok, and no two
 * outputs may name the same path. 0, or 2 after "dtsim COMMAND: FLAG PATH: why" on stderr. */
int cli_check_outputs(const char *command, const cli_output *outs, int n);

#endif
