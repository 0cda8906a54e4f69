/* The scenario / platform / calibration readers: every validation rule has a rejecting case
 * whose error names the JSON path and the rule; defaults; --set overrides; path resolution;
 * and every shipped file loads. */
#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "config.h"

/* A valid scenario on the shipped A100 platform: 64 GPUs of 8-GPU nodes. */
static const char *BASE =
    "{\"name\": \"t\", \"platform\": \"platforms/dgx-a100-superpod.json\","
    " \"model\": {\"num_layers\": 8, \"hidden_size\": 1024, \"num_attention_heads\": 16,"
    "             \"seq_length\": 2048, \"vocab_size\": 51200},"
    " \"training\": {\"global_batch_size\": 64, \"micro_batch_size\": 1, \"precision\": \"bf16\"},"
    " \"parallel\": {\"tensor_model_parallel_size\": 2, \"pipeline_model_parallel_size\": 2,"
    "              \"data_parallel_size\": 16}}";

static int load_with(const char *const *sets, int n, scenario_config *s, config_error *err)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    assert_non_null(root);
    int rc = scenario_load_json(root, DTSIM_SOURCE_DIR, sets, n, s, err);
    json_decref(root);
    return rc;
}

static void base_is_valid_and_defaults_apply(void **state)
{
    scenario_config s;
    config_error err;
    int rc = load_with(NULL, 0, &s, &err);
    if (rc)
        fail_msg("%s", err.msg);
    assert_int_equal(s.model.ffn_hidden_size, 4096);   /* 4 x hidden */
    assert_int_equal(s.model.num_query_groups, 16);    /* = heads */
    assert_int_equal(s.parallel.vpp, 1);
    assert_int_equal(s.parallel.cp, 1);
    assert_int_equal(s.parallel.zero_stage, 1);
    assert_int_equal(s.parallel.schedule, PIPELINE_1F1B);
    assert_false(s.parallel.overlap_grad_reduce); /* Megatron-LM's default */
    assert_true(s.parallel.bucket_size_mb == 40);
    assert_int_equal(s.training.recompute, RECOMPUTE_NONE);
    assert_int_equal(s.run.steps, 1);
    assert_int_equal(s.run.fidelity_flow, 0);
    assert_true(s.faults.detect_s == 120 && s.faults.restart_s == 600);
    assert_int_equal(scenario_gpus(&s), 64);
    assert_int_equal(scenario_micro_batches(&s), 4);
    /* The platform's default calibration was loaded. */
    assert_string_equal(s.calibration.device, "A100-SXM4-80GB");
    scenario_free(&s);
}

typedef struct {
    const char *set[3];
    const char *expect[2]; /* fragments the error must contain */
} reject_case;

static const reject_case REJECTS[] = {
    /* model */
    {{"model.num_layers=0"}, {"scenario.model.num_layers", "range"}},
    {{"model.hidden_size=1000"}, {"scenario.model.hidden_size", "num_attention_heads"}},
    {{"model.num_query_groups=3"}, {"scenario.model.num_query_groups", "does not divide"}},
    {{"model.num_experts=8", "model.moe_router_topk=9"}, {"scenario.model.moe_router_topk", "num_experts"}},
    {{"model.moe_router_topk=2"}, {"scenario.model.moe_router_topk", "without num_experts"}},
    {{"model.attention=\"sparse\""}, {"scenario.model.attention", "not one of"}},
    {{"model.swiglu=1"}, {"scenario.model.swiglu", "true or false"}},
    {{"model.hidden_sise=1024"}, {"scenario.model.hidden_sise", "did you mean 'hidden_size'"}},
    {{"model.num_layers=200000"}, {"scenario.model.num_layers", "range"}},
    /* training */
    {{"training.precision=\"fp8\""}, {"scenario.training.precision", "not supported"}},
    {{"training.precision=\"fp64\""}, {"scenario.training.precision", "not one of"}},
    {{"training.global_batch_size=60"}, {"scenario.training.global_batch_size", "multiple"}},
    {{"training.recompute_granularity=\"some\""}, {"scenario.training.recompute_granularity", "not one of"}},
    {{"training.micro_batch_size=\"one\""}, {"scenario.training.micro_batch_size", "integer"}},
    /* parallel */
    {{"parallel.tensor_model_parallel_size=3"}, {"scenario.parallel.tensor_model_parallel_size", "does not divide num_attention_heads=16"}},
    {{"model.num_query_groups=2", "parallel.tensor_model_parallel_size=4"}, {"tensor_model_parallel_size", "num_query_groups=2"}},
    {{"model.ffn_hidden_size=4097"}, {"tensor_model_parallel_size", "ffn_hidden_size=4097"}},
    {{"model.vocab_size=51201"}, {"tensor_model_parallel_size", "vocab_size=51201"}},
    {{"parallel.pipeline_model_parallel_size=3", "parallel.data_parallel_size=8"}, {"pipeline_model_parallel_size", "does not divide num_layers=8"}},
    {{"parallel.context_parallel_size=3"}, {"context_parallel_size", "seq_length"}},
    {{"parallel.data_parallel_size=100000"}, {"data_parallel_size", "platform"}},
    {{"parallel.schedule=\"interleaved\""}, {"scenario.parallel.schedule", "virtual_pipeline_model_parallel_size > 1"}},
    {{"parallel.schedule=\"interleaved\"", "parallel.virtual_pipeline_model_parallel_size=2", "training.global_batch_size=48"}, {"scenario.parallel.schedule", "multiple"}},
    {{"parallel.virtual_pipeline_model_parallel_size=2"}, {"virtual_pipeline_model_parallel_size", "interleaved"}},
    {{"parallel.zero_stage=4"}, {"scenario.parallel.zero_stage", "range"}},
    {{"parallel.pipeline_layers=[3,3]"}, {"scenario.parallel.pipeline_layers", "sum to 6"}},
    {{"parallel.pipeline_layers=[8]"}, {"scenario.parallel.pipeline_layers", "2 layer counts"}},
    {{"parallel.pipeline_layers=[0,8]"}, {"scenario.parallel.pipeline_layers[0]", ">="}},
    {{"parallel.expert_model_parallel_size=2"}, {"expert_model_parallel_size", "num_experts"}},
    {{"parallel.bucket_size_mb=0"}, {"scenario.parallel.bucket_size_mb", "greater than 0"}},
    {{"parallel.sequence_parallel=true", "model.seq_length=2047"}, {"scenario.parallel.sequence_parallel", "multiple of TP"}},
    {{"parallel.schedul=\"1f1b\""}, {"scenario.parallel.schedul", "did you mean 'schedule'"}},
    /* faults */
    {{"faults.degraded_links=[{\"node\":1,\"nic\":0,\"bandwidth_factor\":1.5}]"}, {"scenario.faults.degraded_links[0].bandwidth_factor", "range"}},
    {{"faults.degraded_links=[{\"node\":99,\"nic\":0,\"bandwidth_factor\":0.5}]"}, {"scenario.faults.degraded_links[0].node", "range"}},
    {{"faults.degraded_links=[{\"node\":1,\"nic\":8,\"bandwidth_factor\":0.5}]"}, {"scenario.faults.degraded_links[0].nic", "range"}},
    {{"faults.stragglers=[{\"gpu\":64,\"slowdown\":1.3}]"}, {"scenario.faults.stragglers[0].gpu", "range"}},
    {{"faults.stragglers=[{\"gpu\":3,\"slowdown\":0.5}]"}, {"scenario.faults.stragglers[0].slowdown", "range"}},
    {{"faults.gpu_mtbf_hours=-1"}, {"scenario.faults.gpu_mtbf_hours", "range"}},
    {{"faults.checkpoint_interval_s=0"}, {"scenario.faults.checkpoint_interval_s", "greater than 0"}},
    {{"faults.checkpoint_write=\"lazy\""}, {"scenario.faults.checkpoint_write", "not one of"}},
    /* run */
    {{"run.fidelity=\"exact\""}, {"scenario.run.fidelity", "not one of"}},
    {{"run.steps=0"}, {"scenario.run.steps", "range"}},
    /* top level and --set syntax */
    {{"platfrom=\"x\""}, {"scenario.platfrom", "did you mean 'platform'"}},
    {{"platform=\"platforms/none.json\""}, {"scenario.platform", "not found"}},
    {{"calibration=\"calibrate/data/none.json\""}, {"scenario.calibration", "not found"}},
    {{"model.num_layers.x=3"}, {"model.num_layers", "not an object"}},
    {{"noequals"}, {"--set", "PATH=VALUE"}},
    /* platform (through --set, which inlines the file first) */
    {{"platform.node.gpus=0"}, {"platform.node.gpus", "range"}},
    {{"platform.network.topology=\"torus\""}, {"platform.network.topology", "not one of"}},
    {{"platform.network.oversubscription=0.5"}, {"platform.network.oversubscription", "range"}},
    {{"platform.gpu.peak_tflops.fp64=10"}, {"platform.gpu.peak_tflops.fp64", "unknown key"}},
    {{"platform.gpu.memory_gib=0"}, {"platform.gpu.memory_gib", "greater than 0"}},
    {{"platform.node.nics=0"}, {"platform.node", "nics >= 1"}},
    {{"platform.network.nodes=2000000"}, {"platform.network.nodes", "range"}},
    /* calibration (inlined likewise) */
    {{"calibration.gemm.bf16=[{\"m\":1,\"n\":1,\"k\":1,\"tflops\":-5}]"}, {"calibration.gemm.bf16[0].tflops", "range"}},
    {{"calibration.gemm.int4=[{\"m\":1,\"n\":1,\"k\":1,\"tflops\":5}]"}, {"calibration.gemm.int4", "unknown precision"}},
    {{"calibration.ops.layernorm={\"gbs\":0}"}, {"calibration.ops.layernorm.gbs", "greater than 0"}},
    {{"calibration.ops.attention={\"efficiency\":1.5}"}, {"calibration.ops.attention.efficiency", "range"}},
    {{"calibration.collectives.infiniband={}"}, {"calibration.collectives.infiniband", "unknown key"}},
    {{"calibration.collectives.nvlink.all_reduce={\"alpha_us\":1}"}, {"busbw_gbs", "required"}},
    {{"calibration.source=\"guess\""}, {"calibration.source", "not one of"}},
};

static void every_rule_rejects(void **state)
{
    for (size_t i = 0; i < sizeof REJECTS / sizeof REJECTS[0]; i++) {
        const reject_case *c = &REJECTS[i];
        int n = 0;
        while (n < 3 && c->set[n])
            n++;
        scenario_config s;
        config_error err;
        int rc = load_with(c->set, n, &s, &err);
        if (rc == 0) {
            scenario_free(&s);
            fail_msg("case %zu (%s) was accepted", i, c->set[0]);
        }
        for (int k = 0; k < 2; k++)
            if (c->expect[k] && !strstr(err.msg, c->expect[k]))
                fail_msg("case %zu (%s): error '%s' lacks '%s'", i, c->set[0], err.msg, c->expect[k]);
    }
}

static void overrides_apply_like_the_file(void **state)
{
    const char *sets[] = {"parallel.pipeline_model_parallel_size=4", "parallel.data_parallel_size=8",
                          "faults.degraded_links=[{\"node\":5,\"nic\":0,\"bandwidth_factor\":0.5}]",
                          "platform.node.nvlink_bandwidth_gbs=150", "name=renamed"};
    scenario_config s;
    config_error err;
    if (load_with(sets, 5, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.parallel.pp, 4);
    assert_int_equal(s.faults.degraded_count, 1);
    assert_int_equal(s.faults.degraded[0].node, 5);
    assert_true(s.faults.degraded[0].bandwidth_factor == 0.5);
    assert_true(s.platform.node.nvlink_bandwidth_gbs == 150);
    assert_string_equal(s.name, "renamed"); /* not JSON: taken as a string */
    assert_string_equal(s.calibration.device, "A100-SXM4-80GB"); /* still found after inlining */
    scenario_free(&s);
}

static void data_parallel_size_is_derived(void **state)
{
    json_error_t je;
    json_t *root = json_loads(BASE, 0, &je);
    json_object_del(json_object_get(root, "parallel"), "data_parallel_size");
    const char *sets[] = {"training.global_batch_size=6144"};
    scenario_config s;
    config_error err;
    if (scenario_load_json(root, DTSIM_SOURCE_DIR, sets, 1, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(s.parallel.dp, 12288 / 4); /* all the platform's GPUs */
    scenario_free(&s);
    json_decref(root);
}

static void files_load_from_disk_and_bad_json_is_located(void **state)
{
    char path[] = "/tmp/dtsim_cfg_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"name\": \"x\",\n \"model\": {,}}\n", f);
    fclose(f);
    scenario_config s;
    config_error err;
    assert_int_not_equal(scenario_load(path, NULL, 0, &s, &err), 0);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, ":2:")); /* line number of the syntax error */
    remove(path);
    assert_int_not_equal(scenario_load("/nonexistent/s.json", NULL, 0, &s, &err), 0);
    assert_non_null(strstr(err.msg, "cannot read"));
}

static void load_dir(const char *sub, int kind)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", DTSIM_SOURCE_DIR, sub);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        config_error err;
        int rc;
        if (kind == 0) {
            platform_config p;
            rc = platform_load(path, &p, &err);
        } else if (kind == 1) {
            calibration_config c;
            rc = calibration_load(path, &c, &err);
            if (rc == 0)
                calibration_free(&c);
        } else {
            scenario_config s;
            rc = scenario_load(path, NULL, 0, &s, &err);
            if (rc == 0)
                scenario_free(&s);
        }
        if (rc)
            fail_msg("%s: %s", path, err.msg);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

static void shipped_files_load(void **state)
{
    load_dir("platforms", 0);
    load_dir("calibrate/data", 1);
    load_dir("scenarios", 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(base_is_valid_and_defaults_apply),
        cmocka_unit_test(every_rule_rejects),
        cmocka_unit_test(overrides_apply_like_the_file),
        cmocka_unit_test(data_parallel_size_is_derived),
        cmocka_unit_test(files_load_from_disk_and_bad_json_is_located),
        cmocka_unit_test(shipped_files_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
