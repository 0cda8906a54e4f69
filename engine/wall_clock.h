/* Seconds on the monotonic clock, for durations measured on the host: the engine's (steps, a
 * ZeRO pass's collectives, a checkpoint's write, a run's wall time) and the simulator's own
 * (a replay's wall time, the planner's, the platform's load). The one clock of the project. */
#ifndef DTSIM_ENGINE_WALL_CLOCK_H
#define DTSIM_ENGINE_WALL_CLOCK_H
#include <time.h>

static inline double wall_clock_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
#endif
