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

typedef struct {
    /* seconds of host time per micro-batch: one layer's forward and backward, the embedding's
     * and the head's (with the final norm and the loss) */
    double layer_fwd_s, layer_bwd_s, embed_fwd_s, embed_bwd_s, head_fwd_s, head_bwd_s;
} host_issue;

/* The kernels the framework launches per micro-batch, by piece (0 where not modelled). */
typedef struct {
    int layer_fwd, layer_bwd, embed_fwd, embed_bwd, head_fwd, head_bwd;
} host_launches;

void host_launches_of(const scenario_config *s, host_launches *out);
void host_issue_of(const scenario_config *s, host_issue *out);

#endif
