/* Shared between the config loaders (not part of the public config API). */
#ifndef DTSIM_SIM_CONFIG_INTERNAL_H
#define DTSIM_SIM_CONFIG_INTERNAL_H
#include "config_json.h"

int platform_parse(json_t *root, const char *path, const char *base_dir, platform_config *p, config_error *err);
int calibration_parse(json_t *root, const char *path, calibration_config *c, config_error *err);
#endif
