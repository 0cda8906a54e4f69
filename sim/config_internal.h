/* Shared between the config loaders (not part of the public config API). */
#ifndef DTSIM_SIM_CONFIG_INTERNAL_H
#define DTSIM_SIM_CONFIG_INTERNAL_H
#include "config_json.h"

/* need_calibration: 0 when the scenario names its own calibration, so that a platform's
 * default calibration that cannot be found is not an error (p->calibration is left ""). */
int platform_parse(json_t *root, const char *path, const char *base_dir, int need_calibration, platform_config *p,
                   config_error *err);
int platform_load_ex(const char *path, int need_calibration, platform_config *out, config_error *err);
int calibration_parse(json_t *root, const char *path, calibration_config *c, config_error *err);
#endif
