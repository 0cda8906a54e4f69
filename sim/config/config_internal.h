/* Shared between the config loaders (not part of the public config API). */
#ifndef DTSIM_SIM_CONFIG_INTERNAL_H
#define DTSIM_SIM_CONFIG_INTERNAL_H
#include "config_json.h"

/* need_calibration: 0 when the scenario names its own calibration, so that a platform's
 * default calibration that cannot be found is not an error (p->calibration is left ""). */
int platform_parse(json_t *root, const char *path, const char *base_dir, int need_calibration, platform_config *p,
                   config_error *err);
int platform_load_ex(const char *path, int need_calibration, platform_config *out, config_error *err);
/* config_playbook.c: compression, offload, data loader, parameter servers. The parallel part
 * runs after the layout is parsed (its rules depend on zero_stage). */
int config_parse_parallel_playbook(json_t *par, scenario_config *s, config_error *err);
int config_validate_playbook(const scenario_config *s, config_error *err);
int config_parse_data_loader(json_t *training, scenario_config *s, config_error *err);
int config_parse_parameter_server(json_t *root, scenario_config *s, config_error *err);
int calibration_parse(json_t *root, const char *path, calibration_config *c, config_error *err);
#endif
