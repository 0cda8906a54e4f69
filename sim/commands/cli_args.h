/* The command line of every dtsim command, parsed one way: getopt_long over a table of the
 * command's options.
 *
 * A command declares what each flag does (store a string, a whole number in a range, a
 * non-negative number, one of a few words, append to a list, set a flag, or call the command's
 * own function), where its one positional word goes (the scenario path), and its usage text.
 * cli_parse_args() then reads argv in order: -h/--help prints the usage on stdout; an unknown
 * option, a flag without its value, a bad value and a second positional word are refused with
 * "dtsim COMMAND: ..." on stderr. A value follows its flag as the next word (--steps 2) or after
 * '=' (--steps=2); long names are matched whole, never abbreviated; "--" ends the options. An
 * option given twice is refused unless it appends (--set, --vary): a repeated --json or
 * --max-seconds would otherwise keep the last silently, which a user who wrote both did not mean.
 * Last, the outputs the spec names are checked (cli_check_outputs). */
#ifndef DTSIM_SIM_CLI_ARGS_H
#define DTSIM_SIM_CLI_ARGS_H

#include <stdio.h>
#include "config.h"

/* A growing list of strings (repeated --set, --fidelity/--steps as overrides); it owns copies. */
typedef struct {
    const char **items;
    int count, cap;
} cli_list;

typedef enum {
    CLI_FLAG,   /* no value: *(int *)dest = 1 */
    CLI_STRING, /* *(const char **)dest = the value (argv's own string) */
    CLI_INT,    /* a whole number in lo..hi: *(int *)dest */
    CLI_REAL,   /* a non-negative number: *(double *)dest */
    CLI_POSITIVE, /* a finite number above 0: *(double *)dest (0 there means "not given") */
    CLI_CHOICE, /* one of choices (NULL-terminated): *(const char **)dest */
    CLI_APPEND, /* appended to *(cli_list *)dest; repeatable */
    CLI_CALL,   /* call(command, "--NAME", value, dest): 0, or -1 after saying why on stderr */
} cli_kind;

typedef struct {
    const char *name; /* the long name without "--"; NULL ends a table */
    cli_kind kind;
    void *dest;
    long lo, hi;                /* CLI_INT: the range */
    const char *const *choices; /* CLI_CHOICE */
    int (*call)(const char *command, const char *flag, const char *value, void *dest); /* CLI_CALL */
    int repeatable;             /* may be given more than once (CLI_APPEND always may) */
} cli_option;

/* A table's rows, one per option, and its end. */
#define CLI_OPT_FLAG(n, d) {.name = (n), .kind = CLI_FLAG, .dest = (d)}
#define CLI_OPT_STRING(n, d) {.name = (n), .kind = CLI_STRING, .dest = (d)}
#define CLI_OPT_INT(n, d, l, h) {.name = (n), .kind = CLI_INT, .dest = (d), .lo = (l), .hi = (h)}
#define CLI_OPT_REAL(n, d) {.name = (n), .kind = CLI_REAL, .dest = (d)}
#define CLI_OPT_POSITIVE(n, d) {.name = (n), .kind = CLI_POSITIVE, .dest = (d)}
#define CLI_OPT_CHOICE(n, d, c) {.name = (n), .kind = CLI_CHOICE, .dest = (d), .choices = (c)}
#define CLI_OPT_APPEND(n, list) {.name = (n), .kind = CLI_APPEND, .dest = (list)}
#define CLI_OPT_CALL(n, fn, d) {.name = (n), .kind = CLI_CALL, .dest = (d), .call = (fn)}
#define CLI_OPT_CALL_REPEATABLE(n, fn, d) {.name = (n), .kind = CLI_CALL, .dest = (d), .call = (fn), .repeatable = 1}
#define CLI_OPT_END {.name = NULL}

/* An output a command writes: checked once its options are parsed, before any work
 * (cli_check_outputs), so that a bad path fails in milliseconds with nothing written. */
typedef struct {
    const char *flag;           /* "--json": named in the message; NULL ends a list */
    const char *const *path;    /* the variable the option fills (NULL there: not asked for) */
    int folder;                 /* a folder the command makes or fills (sweep --out, faults --plot) */
    int stdout_ok;              /* "-" means the standard output */
} cli_output;
#define CLI_OUT_FILE(flag, path) {(flag), (path), 0, 0}
#define CLI_OUT_FILE_OR_STDOUT(flag, path) {(flag), (path), 0, 1}
#define CLI_OUT_FOLDER(flag, path) {(flag), (path), 1, 0}
#define CLI_OUT_END {NULL, NULL, 0, 0}

typedef struct {
    const char *command;        /* "run": messages read "dtsim run: ..." */
    void (*usage)(FILE *f);     /* the command's help text; -h/--help prints it on stdout */
    const cli_option *options;  /* ends with {NULL} */
    const char **positional;    /* receives the one word that is not an option (NULL: left as is) */
    const char *positional_what; /* its name in "one scenario file expected" */
    const cli_output *outputs;  /* ends with CLI_OUT_END; NULL: the command writes none */
} cli_spec;

/* Every output of outs (ending with CLI_OUT_END), as the parser checks them: a file's folder
 * must take a new file (atomic_file_check), a folder must be one or be makeable in a writable
 * folder, "-" only where stdout_ok, no two outputs may name one file, and no output file may be
 * one of the n_inputs files the command reads (its positional words; two spellings of one file,
 * or a link to it, count as one). 0, or 2 after "dtsim COMMAND: FLAG PATH: why" on stderr. (In
 * cli_io.c, with the writers.) */
int cli_check_outputs(const char *command, const cli_output *outs, const char *const *inputs, int n_inputs);

/* cli_parse_args()'s answer when the command goes on with what it parsed. */
#define CLI_GO_ON (-1)

/* Parses argv[1..argc-1] (argv[0] is the command's name) into the table's destinations, in
 * order, so that the first problem is the one reported. Returns CLI_GO_ON, or the exit code the
 * command returns at once: 0 after --help, 2 after bad input (the reason on stderr). */
int cli_parse_args(const cli_spec *spec, int argc, char **argv);
/* The same for a command that takes any number of positional words (dtsim compare): each is
 * appended to words, in order. */
int cli_parse_args_list(const cli_spec *spec, int argc, char **argv, cli_list *words);

/* A flag's whole-number value in lo..hi; -1 with "dtsim COMMAND: FLAG: 'VALUE' is not a whole
 * number in lo..hi" on stderr. */
int cli_parse_int(const char *command, const char *flag, const char *value, long lo, long hi, int *out);
/* value's index in the NULL-terminated choices; -1 with "dtsim COMMAND: FLAG: 'VALUE' is not
 * one of A, B" on stderr. */
int cli_parse_choice(const char *command, const char *flag, const char *value, const char *const *choices);

/* A copy of s, or the printf-formatted string, appended to l. 0, or -1 out of memory. */
int cli_list_add(cli_list *l, const char *s);
int cli_list_addf(cli_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_list_free(cli_list *l);

/* The scenario the command names (*spec->positional) with its --set overrides, loaded once for
 * every command alike: 0, or -1 after saying why on stderr (none given: which and the usage; a
 * bad one: the loader's reason). The caller frees it with scenario_free. */
int cli_load_scenario(const cli_spec *spec, const cli_list *sets, scenario_config *s);
/* Both in turn, as every command that simulates one scenario begins: CLI_GO_ON with *s loaded
 * (the caller frees it), or the exit code to return at once (0 after --help, 2 after bad input,
 * the reason said). */
int cli_parse_and_load(const cli_spec *spec, int argc, char **argv, const cli_list *sets, scenario_config *s);

#endif
