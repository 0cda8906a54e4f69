/* dtrain-supervise: runs a dtrain job (usually `mpirun ... dtrain ...`) and relaunches it from
 * its newest complete checkpoint when it fails, up to --max-restarts times (DESIGN.md, Engine:
 * Failure). Each failure and restart is logged as a JSON line in the simulator's terms
 * (docs/faults.md):
 *   detect_s    from the job's last sign of life (the last write to its --log-json file, one
 *               line per completed step) to the job's exit: how long the failure went unnoticed
 *               (the launcher noticing a dead rank, or --comm-timeout for a hung one);
 *   restart_s   from the relaunch to the first step the new attempt completes (start-up,
 *               checkpoint load and one step: the step is part of it, as on a real cluster);
 *   lost work   the steps completed after the newest complete checkpoint (they are redone), and
 *               their logged step time.
 * The job's command must carry --ckpt-dir (where to restart from) and --log-json FILE (how the
 * supervisor sees progress); restarts add --resume. Each failed attempt's log is kept as
 * FILE.attempt-K. SIGTERM is passed on to the job (which then checkpoints and exits 0). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    char **argv;          /* the job's command, NULL-terminated, with room for --resume */
    int argc;
    const char *ckpt_dir, *log_json;
    int max_restarts;
    FILE *log;            /* the supervisor's own JSON lines */
} supervisor;

/* The job's pid, for the SIGTERM handler: a handler reaches only process state. */
static volatile sig_atomic_t g_child_pid;

static void forward_term(int sig)
{
    (void)sig;
    if (g_child_pid > 0)
        kill((pid_t)g_child_pid, SIGTERM);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: dtrain-supervise [--max-restarts N] [--log FILE|-] -- COMMAND [ARGS...]\n"
               "Runs a dtrain job and relaunches it with --resume from its newest complete checkpoint when\n"
               "it fails (non-zero exit other than 2 and 3), up to N times (default 3). COMMAND must pass dtrain\n"
               "--ckpt-dir DIR and --log-json FILE. Failures and restarts are logged as JSON lines to --log\n"
               "(default -, standard output): detect_s, restart_s, lost steps and lost work seconds.\n"
               "exit: 0 the job finished, 1 it failed more than N times, 2 bad input (or the job's own 2),\n"
               "3 the job's loss diverged (its own 3: not restarted)\n");
}

/* Newest step-N folder of dir that has a manifest (a complete checkpoint), or 0. */
static int newest_checkpoint(const char *dir)
{
    DIR *d = opendir(dir);
    int best = 0;
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int step;
        char tail, man[8192];
        if (sscanf(e->d_name, "step-%d%c", &step, &tail) != 1 || step <= best)
            continue;
        snprintf(man, sizeof man, "%s/%s/manifest.json", dir, e->d_name);
        if (access(man, F_OK) == 0)
            best = step;
    }
    closedir(d);
    return best;
}

typedef struct {
    int last_step;          /* last step the log shows completed (0: none) */
    double seconds_after;   /* sum of step_time_s of steps after `after` */
    int lines;
} log_summary;

static log_summary read_job_log(const char *path, int after)
{
    log_summary s = {0, 0, 0};
    FILE *f = fopen(path, "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        if (!j)
            continue; /* a line cut short by the failure */
        json_t *step = json_object_get(j, "step");
        if (json_is_integer(step) && !json_object_get(j, "final")) {
            int k = (int)json_integer_value(step);
            s.last_step = k;
            s.lines++;
            if (k > after)
                s.seconds_after += json_number_value(json_object_get(j, "step_time_s"));
        }
        json_decref(j);
    }
    if (f)
        fclose(f);
    return s;
}

static double mtime_of(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    return st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

static void event(supervisor *sv, json_t *obj)
{
    json_dumpf(obj, sv->log, JSON_COMPACT | JSON_REAL_PRECISION(6));
    fputc('\n', sv->log);
    fflush(sv->log);
    json_decref(obj);
}

/* Runs one attempt; returns its wait status. *first_step_at gets when the first step line of
 * this attempt appeared in the job's log (0 if none). */
static int run_attempt(supervisor *sv, double started, double *first_step_at)
{
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "dtrain-supervise: fork failed: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        execvp(sv->argv[0], sv->argv);
        fprintf(stderr, "dtrain-supervise: cannot run %s: %s\n", sv->argv[0], strerror(errno));
        _exit(127);
    }
    g_child_pid = pid;
    *first_step_at = 0;
    int status = 0;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid)
            break;
        if (got < 0 && errno != EINTR) {
            status = -1;
            break;
        }
        if (*first_step_at == 0) {
            struct stat st;
            if (stat(sv->log_json, &st) == 0 && st.st_size > 0 && mtime_of(sv->log_json) >= started)
                *first_step_at = now_s();
        }
        struct timespec nap = {0, 20000000};
        nanosleep(&nap, NULL);
    }
    g_child_pid = 0;
    return status;
}

static int supervise(supervisor *sv)
{
    int restarts = 0, resumed_from = -1;
    double failed_at = 0;
    for (;;) {
        double started = now_s(), first_step_at = 0;
        int status = run_attempt(sv, started, &first_step_at);
        if (restarts > 0) {
            json_t *e = json_pack("{s:s,s:i,s:i}", "event", "restarted", "attempt", restarts + 1, "resumed_from_step",
                                  resumed_from);
            json_object_set_new(e, "restart_s", first_step_at > 0 ? json_real(first_step_at - started) : json_null());
            json_object_set_new(e, "down_s", first_step_at > 0 ? json_real(first_step_at - failed_at) : json_null());
            event(sv, e);
        }
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            event(sv, json_pack("{s:s,s:i,s:i}", "event", "finished", "attempts", restarts + 1, "restarts", restarts));
            return 0;
        }
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 2) {
            fprintf(stderr, "dtrain-supervise: the job rejected its input (exit 2); not restarting\n");
            return 2;
        }
        if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 3) {
            /* training is deterministic: from its checkpoint the job would diverge again */
            fprintf(stderr, "dtrain-supervise: the job's loss diverged (exit 3); a restart from its checkpoint "
                            "would repeat it: not restarting\n");
            return 3;
        }
        failed_at = now_s();
        int ckpt = newest_checkpoint(sv->ckpt_dir);
        log_summary ls = read_job_log(sv->log_json, ckpt);
        double last_life = mtime_of(sv->log_json);
        json_t *e = json_pack("{s:s,s:i,s:i,s:i,s:i,s:f}", "event", "failure", "attempt", restarts + 1, "last_step",
                              ls.last_step, "checkpoint_step", ckpt, "lost_steps",
                              ls.last_step > ckpt ? ls.last_step - ckpt : 0, "lost_work_s", ls.seconds_after);
        json_object_set_new(e, "exit_code", status != -1 && WIFEXITED(status) ? json_integer(WEXITSTATUS(status))
                                                                              : json_null());
        json_object_set_new(e, "signal", status != -1 && WIFSIGNALED(status) ? json_integer(WTERMSIG(status))
                                                                             : json_null());
        json_object_set_new(e, "detect_s", last_life >= started ? json_real(failed_at - last_life) : json_null());
        event(sv, e);
        char kept[8192];
        snprintf(kept, sizeof kept, "%s.attempt-%d", sv->log_json, restarts + 1);
        rename(sv->log_json, kept);
        if (restarts >= sv->max_restarts) {
            event(sv, json_pack("{s:s,s:i}", "event", "gave_up", "restarts", restarts));
            fprintf(stderr, "dtrain-supervise: the job failed %d times; giving up\n", restarts + 1);
            return 1;
        }
        restarts++;
        resumed_from = ckpt;
        fprintf(stderr, "dtrain-supervise: attempt %d failed after step %d; restarting from checkpoint step %d "
                        "(%d steps to redo)\n", restarts, ls.last_step, ckpt, ls.last_step > ckpt ? ls.last_step - ckpt : 0);
        int has_resume = 0;
        for (int i = 0; i < sv->argc; i++)
            has_resume |= !strcmp(sv->argv[i], "--resume");
        if (!has_resume) {
            sv->argv[sv->argc++] = "--resume";
            sv->argv[sv->argc] = NULL;
        }
    }
}

int main(int argc, char **argv)
{
    supervisor sv = {.max_restarts = 3, .log = stdout};
    int i = 1;
    const char *log_path = "-";
    for (; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--max-restarts") && i + 1 < argc) {
            char *end;
            long n = strtol(argv[++i], &end, 10);
            if (*end || n < 0 || n > 1000000) {
                fprintf(stderr, "dtrain-supervise: --max-restarts: '%s' is not a count\n", argv[i]);
                return 2;
            }
            sv.max_restarts = (int)n;
        } else if (!strcmp(argv[i], "--log") && i + 1 < argc) {
            log_path = argv[++i];
        } else {
            fprintf(stderr, "dtrain-supervise: unknown option %s (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc - 1) {
        fprintf(stderr, "dtrain-supervise: no command after -- (see --help)\n");
        return 2;
    }
    sv.argc = argc - i - 1;
    sv.argv = calloc((size_t)sv.argc + 2, sizeof *sv.argv);
    for (int k = 0; k < sv.argc; k++) {
        sv.argv[k] = argv[i + 1 + k];
        if (k + 1 < sv.argc && !strcmp(sv.argv[k], "--ckpt-dir"))
            sv.ckpt_dir = argv[i + 2 + k];
        if (k + 1 < sv.argc && !strcmp(sv.argv[k], "--log-json"))
            sv.log_json = argv[i + 2 + k];
    }
    if (!sv.ckpt_dir || !sv.log_json || !strcmp(sv.log_json, "-")) {
        fprintf(stderr, "dtrain-supervise: the job needs --ckpt-dir DIR (to restart from) and --log-json FILE (not -: "
                        "the supervisor reads it to see progress)\n");
        free(sv.argv);
        return 2;
    }
    if (strcmp(log_path, "-") && !(sv.log = fopen(log_path, "w"))) {
        fprintf(stderr, "dtrain-supervise: --log %s: cannot open for writing\n", log_path);
        free(sv.argv);
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_term;
    sigaction(SIGTERM, &sa, NULL);
    int rc = supervise(&sv);
    if (sv.log != stdout)
        fclose(sv.log);
    free(sv.argv);
    return rc;
}
