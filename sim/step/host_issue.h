/* The host's side of a pass: a framework that launches every kernel from eager Python cannot run
 * a pass faster than its host issues that pass's kernels. Where a layer's kernels are short (a
 * small model, a micro-batch of one, TP splitting the GEMMs) the GPU drains its queue and waits
 * for the host; where they are long the host runs ahead and costs nothing.
 *
 * The host's time per pass is the kernels the framework launches for it (read from the framework's
 * code, per layer, embedding and head) times the calibration's host_issue_us (measured: the host's
 * time to issue one kernel from eager PyTorch). A pass then takes the longer of its GPU time and
 * its host time (workload.c, add_pass_work): within a pass the host runs ahead across the
 * layers, and between passes nothing stops it (no host synchronisation per micro-batch in the
 * frameworks modelled). Modelled where both are known: framework nanotron, on a calibration with
 * host_issue_us (docs/model.md, "Host issue time"). Elsewhere every figure is 0 and nothing
 * changes. */
#ifndef DTSIM_SIM_STEP_HOST_ISSUE_H
#define DTSIM_SIM_STEP_HOST_ISSUE_H

#include "config.h"

/* The kernels the framework launches per micro-batch, by piece: one layer's forward and backward,
 * the embedding's and the head's (with the final norm and the loss); 0 where not modelled. */
typedef struct {
    int layer_fwd, layer_bwd, embed_fwd, embed_bwd, head_fwd, head_bwd;
} host_launches;

/* Those launches and the host's time to issue one (the calibration's host_issue_us, in seconds). */
typedef struct {
    host_launches launches;
    double launch_s;
} host_issue;

void host_launches_of(const scenario_config *s, host_launches *out);
void host_issue_of(const scenario_config *s, host_issue *out);
/* The host's seconds to issue a pass (fwd: a forward, else a backward) of nl layers, nr of them
 * re-run first by recomputation (a forward's kernels again), with the embedding and the head where
 * the pass meets them: what the replay's passes (workload.c) and the planner's bound
 * (workload_bound.c) both take as a pass's least time. */
double host_issue_pass_s(const host_issue *h, int fwd, double nl, double nr, int with_embed, int with_head);

#endif
