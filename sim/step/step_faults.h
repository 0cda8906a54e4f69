/* The scenario's stragglers and degraded links inside one step, at analytic fidelity: the flow
 * replay simulates them on the real ranks and links (flow/); here they act on the representative
 * replica's task times the way they end up acting there, so that `dtsim plan` and every analytic
 * run see them too:
 *  - a straggler (faults.stragglers: GPU g, slowdown x) makes its replica's pipeline stage
 *    compute x times slower; the other replicas wait for it at the next data-parallel
 *    collective, so the step moves at the slowest GPU of each stage: every compute task of that
 *    stage takes the largest slowdown among its stragglers (as the flow replay slows its
 *    lockstep group);
 *  - a degraded NIC (faults.degraded_links: node, nic, bandwidth_factor f, and for a flapping link
 *    down flap_down_s of every flap_period_s) carries its GPU's rings and transfers at f times
 *    its bandwidth (flapping: at the time-average rate, 1 - d + d f for the fraction d it is
 *    down); a collective waits for its slowest ring, so every collective and pipeline transfer of
 *    that GPU's stage that crosses nodes takes its network time (collective_split's net_s) over
 *    that rate.
 * Applied only by the analytic replay (run.c); the flow replay gets the same faults from its
 * platform. */
#ifndef DTSIM_SIM_STEP_FAULTS_H
#define DTSIM_SIM_STEP_FAULTS_H

#include "config.h"
#include "workload.h"

/* Scales the tasks of w as above. Returns how many tasks changed. */
int step_faults_apply(const scenario_config *s, step_workload *w);

#endif
