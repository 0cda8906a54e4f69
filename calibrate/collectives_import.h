/* dtcal import-nccl-tests, and the filing of a collective fit that it and dtcal collectives
 * share: a log's alpha and bus bandwidth into the calibration's collectives section under its link
 * class (nvlink, network, nvls: sim/config/config.h), refusing what the class cannot hold, and the
 * section written into a new or an existing calibration. */
#ifndef DTSIM_CALIBRATE_COLLECTIVES_IMPORT_H
#define DTSIM_CALIBRATE_COLLECTIVES_IMPORT_H
#include <jansson.h>
#include "nccl_model_check.h"

/* dtcal import-nccl-tests LOG... (argv[1] is the command's name). Returns the exit status. */
int cmd_import_nccl_tests(int argc, char **argv);
/* Fits one log into colls[class][collective]; 0, or 2 with the reason printed. kind: the
 * collective when the log does not say (NULL: from its name); link: the class given on the command
 * line, or NULL: from the hosts the log lists; chk: --platform's comparison and checks, or NULL. */
int collectives_add_fit(json_t *colls, const char *path, const char *kind, const char *link, const char *who,
                        const nccl_model_check_opts *chk);
/* Writes the collectives section: into an existing calibration (into) or a new document of that
 * device and source; 0, 1 when it cannot be written, 2 when `into` cannot be read. */
int collectives_write(json_t *colls, const char *into, const char *out, const char *device, const char *source,
                      int argc, char **argv, const char *who);
#endif
