/* Progress of a long dtsim command on stderr: `dtsim async` counts its steps, `dtsim faults` its
 * Monte Carlo timelines. A line such as
 *     dtsim async: step 120000 of 1000000 (12%), 41 s elapsed, about 5 min left
 * at most every PROGRESS_INTERVAL_S, never on stdout: what a command prints there (its summary,
 * its --json -) is byte for byte the same with progress or without. On a terminal the line is
 * rewritten in place; to a file or a pipe (--progress) each is a line of its own.
 * The commands show it when stderr is a terminal, or with --progress; --quiet turns it off. */
#ifndef DTSIM_SIM_PROGRESS_H
#define DTSIM_SIM_PROGRESS_H

#include <stdio.h>

/* Seconds between two lines at least (a 15-minute run prints ~450 lines to a file), unless
 * $DTSIM_PROGRESS_INTERVAL_S sets another: a number of seconds from PROGRESS_INTERVAL_MIN_S to
 * PROGRESS_INTERVAL_MAX_S (a CI log may want fewer lines; the tests want them sooner). */
#define PROGRESS_INTERVAL_S 2.0
#define PROGRESS_INTERVAL_MIN_S 0.01
#define PROGRESS_INTERVAL_MAX_S 3600.0
#define PROGRESS_INTERVAL_ENV "DTSIM_PROGRESS_INTERVAL_S"

typedef enum {
    PROGRESS_AUTO, /* on when stderr is a terminal */
    PROGRESS_OFF,  /* --quiet */
    PROGRESS_ON,   /* --progress */
} progress_mode;

typedef struct {
    const char *who, *unit;  /* "dtsim async", "step" */
    int on;
    int in_place;            /* out is a terminal: each line replaces the one before */
    int pending;             /* an in-place line is out without its newline */
    double start_s, last_s;  /* when it started, when it last printed */
    double interval_s;       /* seconds between two lines at least */
    double (*clock)(void);   /* seconds; wall_clock_s, or a test's own */
    FILE *out;               /* stderr, or a test's own */
} progress_meter;

/* The mode of a command's --progress and --quiet flags (--quiet wins). */
progress_mode progress_mode_of(int progress_flag, int quiet_flag);
/* $DTSIM_PROGRESS_INTERVAL_S read: 0 and *seconds set (PROGRESS_INTERVAL_S when it is not set), or
 * -1 when it is set to anything but a number of seconds in range. The commands check it when they
 * read their flags (sim/commands/cli_args.c), so a meter only reads a value already checked. */
int progress_interval_env(double *seconds);
/* Starts the clock of a meter printing to stderr. */
void progress_start(progress_meter *p, const char *who, const char *unit, progress_mode mode);
/* done of total units are through: prints a line if the last was the interval ago or more
 * (the first that long after the start). p may be NULL: nothing. */
void progress_note(progress_meter *p, double done, double total);
/* Ends an in-place line with its newline, so that what follows starts a line of its own. */
void progress_end(progress_meter *p);

#endif
