/* A valid scenario built in memory (no JSON), so the model's tests do not depend on the
 * file readers: an idealised GPU cluster whose every figure the test controls. */
#ifndef DTSIM_TESTS_SIM_FIXTURE_H
#define DTSIM_TESTS_SIM_FIXTURE_H
#include "config.h"
#include "workload.h"

/* 8 GPUs per node, 128 nodes, 100 TFLOP/s bf16 with a flat 100% GEMM efficiency, no launch
 * overhead, 1 GPT-like model of `layers` layers; tp = pp = dp = 1, 1F1B, ZeRO-0. */
void fixture_scenario(scenario_config *s, int layers);
/* Makes every communication and memory-bound op (nearly) free, so only GEMMs cost time. */
void fixture_free_communication(scenario_config *s);
void fixture_free(scenario_config *s);
/* Copies the first task named `name` of the scenario's workload into *out: 0, or -1 when the
 * workload cannot be built (the reason on stderr) or has no such task. */
int fixture_first_task(const scenario_config *s, const char *name, sim_task *out);
#endif
