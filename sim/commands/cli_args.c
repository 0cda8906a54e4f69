/* The dtsim commands' one argument parser: getopt_long over each command's table (cli_args.h). */
#include <getopt.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli_args.h"
#include "progress.h"

/* getopt_long returns OPTION_CODE + i for the table's entry i (above every character code). */
enum { OPTION_CODE = 256 };

int cli_parse_int(const char *command, const char *flag, const char *value, long lo, long hi, int *out)
{
    char *end;
    long n = strtol(value, &end, 10);
    if (!*value || *end || n < lo || n > hi) {
        fprintf(stderr, "dtsim %s: %s: '%s' is not a whole number in %ld..%ld\n", command, flag, value, lo, hi);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int cli_parse_choice(const char *command, const char *flag, const char *value, const char *const *choices)
{
    for (int i = 0; choices[i]; i++)
        if (!strcmp(value, choices[i]))
            return i;
    fprintf(stderr, "dtsim %s: %s: '%s' is not one of ", command, flag, value);
    for (int i = 0; choices[i]; i++)
        fprintf(stderr, "%s%s", i ? ", " : "", choices[i]);
    fputc('\n', stderr);
    return -1;
}

static int list_push(cli_list *l, char *copy)
{
    if (!copy)
        return -1;
    if (l->count == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        const char **items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items) {
            free(copy);
            return -1;
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->count++] = copy;
    return 0;
}

int cli_list_add(cli_list *l, const char *s)
{
    return list_push(l, strdup(s));
}

int cli_list_addf(cli_list *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) {
        va_start(ap, fmt);
        vsnprintf(s, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    return list_push(l, s);
}

void cli_list_free(cli_list *l)
{
    for (int i = 0; i < l->count; i++)
        free((void *)l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

/* Whether word ("--NAME" or "--NAME=VALUE") spells name whole: getopt_long also takes an
 * unambiguous prefix (--ste for --steps), which the commands have never accepted. */
static int spells(const char *word, const char *name)
{
    if (strncmp(word, "--", 2) != 0)
        return 0;
    word += 2;
    size_t n = strcspn(word, "=");
    return strlen(name) == n && !strncmp(word, name, n);
}

static int refuse_unknown(const cli_spec *spec, const char *word)
{
    fprintf(stderr, "dtsim %s: unknown option or missing value: %s (see dtsim %s --help)\n", spec->command, word,
            spec->command);
    return 2;
}

static int take_positional(const cli_spec *spec, cli_list *words, const char *word)
{
    if (words)
        return cli_list_add(words, word) == 0 ? CLI_GO_ON : 1;
    if (!spec->positional) {
        fprintf(stderr, "dtsim %s: unexpected argument '%s' (see dtsim %s --help)\n", spec->command, word,
                spec->command);
        return 2;
    }
    if (*spec->positional) {
        fprintf(stderr, "dtsim %s: one %s expected, got '%s' as well\n", spec->command, spec->positional_what, word);
        return 2;
    }
    *spec->positional = word;
    return CLI_GO_ON;
}

/* What the table says to do with the option's value; CLI_GO_ON, or 2 after the reason. */
static int take_option(const cli_spec *spec, const cli_option *o, const char *value)
{
    char flag[128];
    snprintf(flag, sizeof flag, "--%s", o->name);
    int ok = 0;
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->dest = 1;
        break;
    case CLI_STRING:
        *(const char **)o->dest = value;
        break;
    case CLI_INT:
        ok = cli_parse_int(spec->command, flag, value, o->lo, o->hi, o->dest);
        break;
    case CLI_REAL:
    case CLI_POSITIVE: {
        int positive = o->kind == CLI_POSITIVE; /* 0 there means "not given": a 0 given is refused */
        char *end;
        double v = strtod(value, &end);
        if (!*value || *end || !(positive ? v > 0 && isfinite(v) : v >= 0)) {
            fprintf(stderr, "dtsim %s: %s: '%s' is not a %s number\n", spec->command, flag, value,
                    positive ? "positive" : "non-negative");
            ok = -1;
        } else {
            *(double *)o->dest = v;
        }
        break;
    }
    case CLI_CHOICE:
        ok = cli_parse_choice(spec->command, flag, value, o->choices) < 0 ? -1 : 0;
        if (ok == 0)
            *(const char **)o->dest = value;
        break;
    case CLI_APPEND:
        if (cli_list_add(o->dest, value) != 0) {
            fprintf(stderr, "dtsim %s: %s: out of memory\n", spec->command, flag);
            ok = -1;
        }
        break;
    case CLI_CALL:
        ok = o->call(spec->command, flag, value, o->dest);
        break;
    }
    return ok == 0 ? CLI_GO_ON : 2;
}

int cli_parse_args(const cli_spec *spec, int argc, char **argv)
{
    return cli_parse_args_list(spec, argc, argv, NULL);
}

int cli_parse_args_list(const cli_spec *spec, int argc, char **argv, cli_list *words)
{
    int n = 0;
    while (spec->options[n].name)
        n++;
    struct option *longopts = calloc((size_t)n + 2, sizeof *longopts);
    char *given = calloc((size_t)n + 1, 1); /* option i seen already */
    if (!longopts || !given) {
        free(longopts);
        free(given);
        fprintf(stderr, "dtsim %s: out of memory\n", spec->command);
        return 2;
    }
    for (int i = 0; i < n; i++)
        longopts[i] = (struct option){spec->options[i].name,
                                      spec->options[i].kind == CLI_FLAG ? no_argument : required_argument, NULL,
                                      OPTION_CODE + i};
    longopts[n] = (struct option){"help", no_argument, NULL, 'h'};

    /* "-": every word in order, a non-option one as code 1 (so the first problem is reported
     * first, and nothing is permuted); ":": a flag without its value as ':'. opterr 0: the
     * messages are ours. optind 0: a fresh scan, also for a second command in one process. */
    int rc = CLI_GO_ON;
    opterr = 0;
    optind = 0;
    while (rc == CLI_GO_ON) {
        int at = optind > 0 ? optind : 1; /* the word getopt_long reads next */
        int c = getopt_long(argc, argv, "-:h", longopts, NULL);
        if (c == -1)
            break;
        const char *word = at < argc ? argv[at] : "";
        const cli_option *o = NULL;
        if (c >= OPTION_CODE)
            o = &spec->options[c - OPTION_CODE];
        else if ((c == ':' || c == '?') && optopt >= OPTION_CODE && optopt < OPTION_CODE + n)
            o = &spec->options[optopt - OPTION_CODE];
        if (c == 1) {
            rc = take_positional(spec, words, optarg);
        } else if (c == 'h') {
            if (word[1] == '-' && !spells(word, "help")) {
                rc = refuse_unknown(spec, word);
            } else {
                spec->usage(stdout);
                rc = 0;
            }
        } else if (c == ':' && o && spells(word, o->name)) {
            fprintf(stderr, "dtsim %s: missing value for --%s (see dtsim %s --help)\n", spec->command, o->name,
                    spec->command);
            rc = 2;
        } else if (c == '?' && strchr(word, '=') &&
                   ((o && spells(word, o->name)) || (optopt == 'h' && spells(word, "help")))) {
            fprintf(stderr, "dtsim %s: --%s takes no value: %s (see dtsim %s --help)\n", spec->command,
                    o ? o->name : "help", word, spec->command);
            rc = 2;
        } else if (c < OPTION_CODE || !spells(word, o->name)) {
            rc = refuse_unknown(spec, word);
        } else if (given[o - spec->options] && !o->repeatable && o->kind != CLI_APPEND) {
            fprintf(stderr, "dtsim %s: --%s given twice (each option once; see dtsim %s --help)\n", spec->command,
                    o->name, spec->command);
            rc = 2;
        } else {
            given[o - spec->options] = 1;
            rc = take_option(spec, o, optarg);
        }
    }
    /* After "--" every word is positional. */
    for (int i = optind; rc == CLI_GO_ON && i < argc; i++)
        rc = take_positional(spec, words, argv[i]);
    if (rc == CLI_GO_ON && spec->outputs) {
        const char *const *inputs = words ? words->items : (const char *const *)spec->positional;
        int n_inputs = words ? words->count : spec->positional ? 1 : 0;
        if (cli_check_outputs(spec->command, spec->outputs, inputs, n_inputs) != 0)
            rc = 2;
    }
    /* a command that shows progress (it takes --progress) reads $DTSIM_PROGRESS_INTERVAL_S: a bad
     * value is refused here, before the work, as a bad flag would be */
    double interval;
    for (int i = 0; rc == CLI_GO_ON && i < n; i++)
        if (strcmp(spec->options[i].name, "progress") == 0 && progress_interval_env(&interval) != 0) {
            fprintf(stderr, "dtsim %s: $%s: '%s' is not a number of seconds from %g to %g (the least time between "
                    "two progress lines; unset, %g)\n", spec->command, PROGRESS_INTERVAL_ENV,
                    getenv(PROGRESS_INTERVAL_ENV), PROGRESS_INTERVAL_MIN_S, PROGRESS_INTERVAL_MAX_S,
                    PROGRESS_INTERVAL_S);
            rc = 2;
        }
    free(longopts);
    free(given);
    return rc;
}

int cli_load_scenario(const cli_spec *spec, const cli_list *sets, scenario_config *s)
{
    const char *path = spec->positional ? *spec->positional : NULL;
    if (!path) {
        fprintf(stderr, "dtsim %s: no %s given\n", spec->command, spec->positional_what ? spec->positional_what : "scenario file");
        spec->usage(stderr);
        return -1;
    }
    config_error err;
    if (scenario_load(path, (const char *const *)sets->items, sets->count, s, &err) != 0) {
        fprintf(stderr, "dtsim: %s\n", err.msg);
        return -1;
    }
    return 0;
}

int cli_parse_and_load(const cli_spec *spec, int argc, char **argv, const cli_list *sets, scenario_config *s)
{
    int rc = cli_parse_args(spec, argc, argv);
    if (rc != CLI_GO_ON)
        return rc;
    return cli_load_scenario(spec, sets, s) == 0 ? CLI_GO_ON : 2;
}
