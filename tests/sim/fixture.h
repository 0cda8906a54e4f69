/* The test fixtures the simulator's tests share (tests/sim, tests/flow, tests/memory,
 * tests/faults): a valid scenario built in memory (no JSON), so the model's tests do not depend
 * on the file readers, an idealised GPU cluster whose every figure the test controls; the
 * settings tests change on it; running it at either fidelity; and small step graphs built by
 * hand and replayed. The helpers that run or replay fail the calling cmocka test with the
 * simulator's error message, so a test only states what it checks. */
#ifndef DTSIM_TESTS_SIM_FIXTURE_H
#define DTSIM_TESTS_SIM_FIXTURE_H
#include <math.h>
#include "config.h"
#include "flow/flow.h"
#include "replay.h"
#include "run.h"
#include "workload.h"

/* got agrees with want within rel of want: |got - want| <= rel x want. A macro, so that a
 * failure names the test's own line (the test includes cmocka.h). */
#define assert_within(got, want, rel) assert_true(fabs((got) - (want)) <= (rel) * (want))

/* ---- scenarios */

/* 8 GPUs per node, 128 nodes, 100 TFLOP/s bf16 with a flat 100% GEMM efficiency, no launch
 * overhead, 1 GPT-like model of `layers` layers (h 1024, 16 heads, f 4096, sequence 1024,
 * vocabulary 32,000); tp = pp = dp = 1, 1F1B, ZeRO-0, global batch 8. */
void fixture_scenario(scenario_config *s, int layers);
/* Makes every communication and memory-bound op (nearly) free, so only GEMMs cost time. */
void fixture_free_communication(scenario_config *s);
void fixture_free(scenario_config *s);
/* The model's shape: layers, hidden size, attention heads (and as many query groups: MHA),
 * FFN hidden size. */
void fixture_model(scenario_config *s, long long layers, long long hidden, long long heads, long long ffn);
/* One micro-batch of one sequence, bf16, no recomputation, on one GPU: tp = pp = dp = cp = ep =
 * vpp = 1, 1F1B, 40 MB gradient buckets (what fixture_scenario and hand-filled scenarios share). */
void fixture_single_gpu(scenario_config *s);
/* The rank grid tp x pp x dp (cp and ep as they are) and the global batch size. */
void fixture_layout(scenario_config *s, int tp, int pp, int dp, int global_batch_size);
/* Megatron-LM's TP communication overlap: sequence parallelism, each SP all-gather and
 * reduce-scatter in `chunks` beside its GEMM, which runs at 1/slowdown beside it. */
void fixture_tp_comm_overlap(scenario_config *s, int chunks, double slowdown);
/* Host links for ZeRO-Offload: host DRAM 400 GB/s, PCIe 32 GB/s, NVMe read 50 / write 25 GB/s
 * per node. */
void fixture_host_links(scenario_config *s);
/* Degrades the one link *d (the test's own: fixture_free does not free it), or none for NULL. */
void fixture_degrade(scenario_config *s, degraded_link *d);

/* cmocka setup and teardown of a test (cmocka_unit_test_setup_teardown): *state is a
 * fixture_scenario of one layer of its own, which the test may change; then it is freed. */
int fixture_setup(void **state);
int fixture_teardown(void **state);

/* ---- running a scenario (a failure fails the test with the error message) */

/* run_scenario at s's fidelity (s->run.fidelity_flow). */
run_result fixture_run(const scenario_config *s);
/* At fidelity `flow` (0 analytic, 1 flow), which s keeps. */
run_result fixture_run_at(scenario_config *s, int flow);
/* fixture_run, then fixture_free(s): for a scenario built only to be run once. */
run_result fixture_run_free(scenario_config *s);
/* The analytic replay, then the flow replay; s is left at flow fidelity. */
void fixture_run_both(scenario_config *s, run_result *analytic, run_result *flow);

/* ---- step graphs */

/* workload_build of s into w (workload_free after). */
void fixture_build(const scenario_config *s, step_workload *w);
/* The index of w's first task named `name`, or -1. */
int fixture_find_task(const step_workload *w, const char *name);
/* Copies the first task named `name` of the scenario's workload into *out, and its communication
 * by kind into *parts when not NULL: 0, or -1 when the workload cannot be built (the reason on
 * stderr) or has no such task. */
int fixture_first_task(const scenario_config *s, const char *name, sim_task *out, task_comm_parts *parts);

/* A hand-built graph: empty, of `stages` pipeline stages (workload_free after). */
void fixture_graph(step_workload *w, int stages);
/* Tasks for it (workload_task's blank task, filled in): compute on the compute lane; a pipeline
 * transfer from `stage` to `peer` (COMM_PP send/receive between 2 ranks on 2 nodes); a
 * collective of `comm` on the comm lane over `group` ranks on as many nodes. */
sim_task fixture_compute(int stage, const char *name, double duration_s);
sim_task fixture_transfer(int stage, int peer, const char *name, double bytes, double duration_s);
sim_task fixture_collective(int stage, const char *name, comm_class comm, coll_kind coll, int group, double bytes,
                            double duration_s);
/* Adds t to w, depending on task `dep` (none when dep < 0); returns its index. */
int fixture_add(step_workload *w, sim_task t, int dep);

/* ---- ZeRO-3 (tests/sim/test_zero3*.c) */

/* The fixture (h 1024, f 4h, MHA, 32,000-token vocabulary, learned positions) of `layers` layers
 * on DP 8 with ZeRO-3, two micro-batches of one sequence. */
void fixture_zero3(scenario_config *s, int layers);
/* Of the scenario's workload: the bytes its ZeRO-3 parameter gathers move and how many tasks they
 * are, and the bytes its gradient reduce-scatters move. */
void fixture_zero3_bytes(const scenario_config *s, double *gathered, double *reduced, int *gathers);
/* The compute time of the passes named `name` ("fwd", "bwd") on each of two stages, and their
 * tasks. */
void fixture_pass_s_by_stage(const scenario_config *s, const char *name, double sum[2], int tasks[2]);

/* ---- replays of a graph (a failure fails the test with the error message) */

/* The analytic replay of w into t, allocated here (replay_times_free after). */
void fixture_replay_analytic(const step_workload *w, replay_times *t);
/* The flow replay of w with options o (NULL: replay_flow's defaults) into t, allocated here
 * (replay_times_free after); rep may be NULL. */
void fixture_replay_flow(const scenario_config *s, const step_workload *w, const flow_options *o, replay_times *t,
                         flow_report *rep);
/* The latest finish time of t's n tasks: the step's end. */
double fixture_end(const replay_times *t, int n);
/* Replays w on flows (o as fixture_replay_flow) and frees it; returns task `task`'s finish
 * time, or the step's end when task < 0. */
double fixture_flow_finish(const scenario_config *s, step_workload *w, const flow_options *o, int task);
#endif
