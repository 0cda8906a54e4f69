/* dtsim import's readers (cli_import.c: Megatron-LM arguments; cli_import_files.c: Hugging Face
 * and DeepSpeed files), each returning a new JSON document in *out (0), or 2 after naming the
 * argument or key at fault on stderr. */
#ifndef DTSIM_SIM_CLI_IMPORT_H
#define DTSIM_SIM_CLI_IMPORT_H

#include <jansson.h>

int import_megatron_args(int argc, char **argv, const char *platform, long long gpus, json_t **out);
/* A Hugging Face config.json to a model file ({"source", "model"}); seq_length: max_position_
 * embeddings unless seq (> 0) says otherwise. */
int import_hf(const char *path, long long seq, json_t **out);
/* A DeepSpeed ds_config.json with a model (a model file's path) to a scenario on gpus GPUs. */
int import_deepspeed(const char *path, const char *model, const char *platform, long long gpus, json_t **out);

/* "dtsim import WHAT: ..." on stderr; returns 2. */
int import_fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The comma-separated list of what an import leaves out (arguments, keys), grown as needed: never
 * cut, however many there are. */
typedef struct {
    char *s;
    size_t len;
} import_list;
void import_list_add(import_list *l, const char *prefix, const char *what);
/* "dtsim import WHAT: ignored (not modelled): ..." on stderr when the list has any; frees it. */
void import_list_print(const char *what, import_list *l);
/* A whole number lo..hi, or 2 after naming it. */
int import_int(const char *what, const char *name, const char *v, long long lo, long long hi, long long *out);

#endif
