/* A small deterministic random number generator (splitmix64) whose whole state is one
 * integer, so checkpoints can save and restore it exactly. */
#ifndef DTSIM_ENGINE_RNG_H
#define DTSIM_ENGINE_RNG_H
#include <stdint.h>

typedef struct {
    uint64_t state;
} rng_t;

void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_next(rng_t *r);
double rng_uniform(rng_t *r);            /* [0, 1) */
double rng_normal(rng_t *r);             /* standard normal (Box-Muller) */
#endif
