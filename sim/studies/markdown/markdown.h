/* The capacity-planning report of `dtsim plan --report FILE.md`: the question, the cluster,
 * the best layouts and why they win (memory, bubble, communication, the effect of each
 * choice), pictures drawn next to the report, what failures cost, and the assumptions with
 * the calibration and platform sources. Markdown, or a self-contained HTML page when FILE
 * ends in .html. */
#ifndef DTSIM_SIM_MARKDOWN_H
#define DTSIM_SIM_MARKDOWN_H

#include <stdio.h>
#include "plan.h"

typedef struct {
    const scenario_config *scenario;   /* the loaded scenario (its own layout) */
    const plan_result *plan;           /* ranked layouts, best first */
    int top;                           /* layouts in the table and the pictures */
    int gpus;                          /* GPUs planned for */
    int confirmed;                     /* the best K re-ranked at flow fidelity (0: none) */
} report_input;

/* Writes the report to path (temp + rename) and its pictures next to it (PATH.breakdown.png,
 * PATH.memory.png, PATH.best-step.png and their SVG/data files). A missing gnuplot leaves
 * the pictures out and says so in the report. 0, or -1 with err. */
int markdown_write(const char *path, const report_input *in, config_error *err);

/* The "sources" and "notes" that the scenario's platform and calibration files carry (the
 * loader skips them), as Markdown list items. Writes nothing when there are none. */
void markdown_sources(FILE *f, const scenario_config *s);

/* Rewrites a Markdown file of the report's subset (headings, paragraphs, lists, tables, code
 * blocks, images, bold) as an HTML page at html_path. 0 or -1. */
int markdown_to_html(const char *md_path, const char *html_path);

#endif
