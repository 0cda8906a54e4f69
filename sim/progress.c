/* Progress lines of long commands on stderr; see progress.h. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "progress.h"
#include "wall_clock.h"

progress_mode progress_mode_of(int progress_flag, int quiet_flag)
{
    return quiet_flag ? PROGRESS_OFF : progress_flag ? PROGRESS_ON : PROGRESS_AUTO;
}

int progress_interval_env(double *seconds)
{
    *seconds = PROGRESS_INTERVAL_S;
    const char *env = getenv(PROGRESS_INTERVAL_ENV);
    if (!env)
        return 0;
    char *end;
    double v = strtod(env, &end);
    if (end == env || *end || !isfinite(v) || v < PROGRESS_INTERVAL_MIN_S || v > PROGRESS_INTERVAL_MAX_S)
        return -1;
    *seconds = v;
    return 0;
}

void progress_start(progress_meter *p, const char *who, const char *unit, progress_mode mode)
{
    p->who = who;
    p->unit = unit;
    p->out = stderr;
    p->clock = wall_clock_s;
    int tty = isatty(fileno(stderr));
    p->on = mode == PROGRESS_ON || (mode == PROGRESS_AUTO && tty);
    p->in_place = p->on && tty;
    p->pending = 0;
    if (progress_interval_env(&p->interval_s) != 0)
        p->interval_s = PROGRESS_INTERVAL_S;
    p->start_s = p->last_s = p->clock();
}

/* "41 s", "5 min", "2.3 h": as precise as a person reading it needs. */
static void duration_text(char *buf, size_t size, double s)
{
    if (s < 99.5)
        snprintf(buf, size, "%.0f s", s);
    else if (s < 99.5 * 60)
        snprintf(buf, size, "%.0f min", s / 60);
    else
        snprintf(buf, size, "%.1f h", s / 3600);
}

void progress_note(progress_meter *p, double done, double total)
{
    if (!p || !p->on)
        return;
    double now = p->clock();
    if (now - p->last_s < p->interval_s)
        return;
    p->last_s = now;
    double elapsed = now - p->start_s;
    char spent[32], left[48] = "";
    duration_text(spent, sizeof spent, elapsed);
    if (done > 0 && total >= done) {
        char t[32];
        duration_text(t, sizeof t, elapsed * (total - done) / done);
        snprintf(left, sizeof left, ", about %s left", t);
    }
    /* whole percents, rounded down: 100% only once it is all done */
    int pct = total > 0 ? (int)(100 * (done / total)) : 0;
    fprintf(p->out, "%s%s: %s %.0f of %.0f (%d%%), %s elapsed%s%s", p->in_place ? "\r" : "", p->who, p->unit, done,
            total, pct, spent, left, p->in_place ? "\033[K" : "\n");
    fflush(p->out);
    p->pending = p->in_place;
}

void progress_end(progress_meter *p)
{
    if (p && p->pending) {
        fputc('\n', p->out);
        fflush(p->out);
        p->pending = 0;
    }
}
