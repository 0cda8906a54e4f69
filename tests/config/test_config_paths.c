/* Where the loaders look for the files a scenario names (the scenario's folder first, then the
 * repository root, DTSIM_ROOT overriding the root), inline platform and calibration objects,
 * how errors in a referenced file are located, and the size limit on files. Each test builds
 * its own folder under /tmp so it depends on nothing but the shipped platform/calibration. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "config.h"
#include "cost.h"
#include "engine_scenario.h"
#include "params.h"
#include "json_seal.h"

#define ROOT DTSIM_SOURCE_DIR

static const char *MODEL_ETC =
    "\"model\": {\"num_layers\": 8, \"hidden_size\": 1024, \"num_attention_heads\": 16,"
    "           \"seq_length\": 2048, \"vocab_size\": 51200},"
    " \"training\": {\"global_batch_size\": 64},"
    " \"parallel\": {\"tensor_model_parallel_size\": 8, \"data_parallel_size\": 1}";

typedef struct {
    char dir[256];
} tmpdir;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* A copy of the shipped A100 platform with a different name and size, so a test can tell which
 * file was read. */
static void write_platform_copy(const char *path, const char *name, int nodes)
{
    json_error_t je;
    json_t *p = json_load_file(ROOT "/platforms/dgx-a100-superpod.json", 0, &je);
    assert_non_null(p);
    json_object_set_new(p, "name", json_string(name));
    json_object_set_new(json_object_get(p, "network"), "nodes", json_integer(nodes));
    assert_int_equal(json_dump_file(p, path, JSON_INDENT(1)), 0);
    json_decref(p);
}

static int setup_dir(void **state)
{
    tmpdir *t = calloc(1, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/dtsim_paths_XXXXXX");
    if (!mkdtemp(t->dir))
        return -1;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/platforms", t->dir);
    mkdir(sub, 0755);
    snprintf(sub, sizeof sub, "%s/other", t->dir);
    mkdir(sub, 0755);
    *state = t;
    return 0;
}

static int teardown_dir(void **state)
{
    tmpdir *t = *state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir); /* our own mkdtemp folder only */
    int rc = system(cmd);
    (void)rc;
    free(t);
    unsetenv("DTSIM_ROOT");
    return 0;
}

static void scenario_folder_comes_first(void **state)
{
    tmpdir *t = *state;
    char path[512], text[2048];
    snprintf(path, sizeof path, "%s/platforms/dgx-a100-superpod.json", t->dir);
    write_platform_copy(path, "local-copy", 2);
    snprintf(text, sizeof text, "{\"platform\": \"platforms/dgx-a100-superpod.json\", %s}", MODEL_ETC);
    snprintf(path, sizeof path, "%s/s.json", t->dir);
    write_file(path, text);

    scenario_config s;
    config_error err;
    if (scenario_load(path, NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(s.platform.name, "local-copy"); /* not the repository's file */
    assert_int_equal(s.platform.network.nodes, 2);
    /* the copy's calibration is not beside it: found in the repository root */
    assert_string_equal(s.calibration.device, "A100-SXM4-80GB");
    assert_string_equal(s.path, path);
    assert_string_equal(s.name, "unnamed");
    scenario_free(&s);

    /* A scenario in a folder without the file falls back to the repository root. */
    snprintf(path, sizeof path, "%s/other/s.json", t->dir);
    write_file(path, text);
    if (scenario_load(path, NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(s.platform.name, "dgx-a100-superpod");
    scenario_free(&s);

    /* DTSIM_ROOT replaces the repository root (for the platform's calibration too, so this
     * scenario names the shipped calibration by its absolute path). */
    snprintf(text, sizeof text, "{\"platform\": \"platforms/dgx-a100-superpod.json\", \"calibration\": \"%s\", %s}",
             ROOT "/calibrate/data/a100-sxm4-80gb.json", MODEL_ETC);
    write_file(path, text);
    setenv("DTSIM_ROOT", t->dir, 1);
    if (scenario_load(path, NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(s.platform.name, "local-copy");
    scenario_free(&s);
    /* ... and without a calibration the copy's default is looked up under DTSIM_ROOT too */
    snprintf(text, sizeof text, "{\"platform\": \"platforms/dgx-a100-superpod.json\", %s}", MODEL_ETC);
    write_file(path, text);
    assert_int_equal(scenario_load(path, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, ".calibration: 'calibrate/data/a100-sxm4-80gb.json' not found"));
    unsetenv("DTSIM_ROOT");

    /* Not found anywhere: the error says where it looked. */
    snprintf(text, sizeof text, "{\"platform\": \"platforms/nope.json\", %s}", MODEL_ETC);
    write_file(path, text);
    assert_int_equal(scenario_load(path, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "scenario.platform: 'platforms/nope.json' not found"));
    assert_non_null(strstr(err.msg, "/other"));
}

static void inline_platform_and_calibration(void **state)
{
    (void)state;
    char *plat = read_text(ROOT "/platforms/dgx-h100-node.json");
    char *cal = read_text(ROOT "/calibrate/data/h100-sxm5-80gb.json");
    size_t n = strlen(plat) + strlen(cal) + 4096;
    char *text = malloc(n);
    snprintf(text, n, "{\"name\": \"inline\", \"platform\": %s, \"calibration\": %s, %s}", plat, cal, MODEL_ETC);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    assert_non_null(root);
    scenario_config s;
    config_error err;
    if (scenario_load_json(root, "/nonexistent", NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(s.platform.name, "dgx-h100-node");
    assert_string_equal(s.calibration.device, "H100-SXM5-80GB");
    assert_int_equal(scenario_gpus(&s), 8);
    scenario_free(&s);

    /* An error inside an inline platform is located under scenario.platform. */
    json_object_set_new(json_object_get(json_object_get(root, "platform"), "node"), "gpus", json_integer(0));
    assert_int_equal(scenario_load_json(root, "/nonexistent", NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "scenario.platform.node.gpus: 0 is outside"));

    /* An inline platform without a calibration and no scenario calibration: refused. */
    json_object_set_new(json_object_get(json_object_get(root, "platform"), "node"), "gpus", json_integer(8));
    json_object_del(json_object_get(root, "platform"), "calibration");
    json_object_del(root, "calibration");
    assert_int_equal(scenario_load_json(root, "/nonexistent", NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "names no default calibration"));
    json_decref(root);
    free(text);
    free(plat);
    free(cal);
}

static void errors_in_a_referenced_file_name_it(void **state)
{
    tmpdir *t = *state;
    char path[512], text[2048];
    snprintf(path, sizeof path, "%s/platforms/bad.json", t->dir);
    write_platform_copy(path, "bad", 2);
    char *body = read_text(path);
    json_error_t je;
    json_t *p = json_loads(body, 0, &je);
    json_object_set_new(json_object_get(p, "node"), "nics", json_integer(0));
    json_dump_file(p, path, 0);
    json_decref(p);
    free(body);

    snprintf(text, sizeof text, "{\"platform\": \"platforms/bad.json\", %s}", MODEL_ETC);
    snprintf(path, sizeof path, "%s/s.json", t->dir);
    write_file(path, text);
    scenario_config s;
    config_error err;
    assert_int_equal(scenario_load(path, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "platform ("));
    assert_non_null(strstr(err.msg, "platforms/bad.json).node"));
    assert_non_null(strstr(err.msg, "nics >= 1"));

    /* The same through platform_load directly. */
    platform_config pc;
    snprintf(path, sizeof path, "%s/platforms/bad.json", t->dir);
    assert_int_equal(platform_load(path, &pc, &err), -1);
    assert_non_null(strstr(err.msg, "nics >= 1"));

    /* A single node may have no NICs at all. */
    snprintf(path, sizeof path, "%s/platforms/one.json", t->dir);
    write_platform_copy(path, "one", 1);
    body = read_text(path);
    p = json_loads(body, 0, &je);
    json_object_set_new(json_object_get(p, "node"), "nics", json_integer(0));
    json_object_set_new(json_object_get(p, "network"), "topology", json_string("single_switch"));
    json_object_del(json_object_get(p, "network"), "tiers");
    json_dump_file(p, path, 0);
    json_decref(p);
    free(body);
    if (platform_load(path, &pc, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(pc.node.nics, 0);
    assert_int_equal(pc.network.tiers, 1);
}

static void platform_defaults(void **state)
{
    tmpdir *t = *state;
    char path[512];
    snprintf(path, sizeof path, "%s/platforms/minimal.json", t->dir);
    write_file(path, "{\"name\": \"m\", \"gpu\": {\"name\": \"g\", \"memory_gib\": 16, \"hbm_bandwidth_gbs\": 900,"
                     " \"peak_tflops\": {\"fp16\": 100}}, \"node\": {\"gpus\": 4, \"nvlink_bandwidth_gbs\": 100,"
                     " \"nic_bandwidth_gbps\": 100}, \"network\": {\"nodes\": 2}}");
    platform_config p;
    config_error err;
    if (platform_load(path, &p, &err))
        fail_msg("%s", err.msg);
    /* docs/formats.md, Platform table */
    assert_true(p.node.nvlink_latency_us == 1.0);
    assert_int_equal(p.node.nics, 1);
    assert_true(p.node.pcie_bandwidth_gbs == 32);
    assert_int_equal(p.network.topology, TOPO_RAIL_OPTIMIZED_FAT_TREE);
    assert_int_equal(p.network.tiers, 2);
    assert_int_equal(p.network.leaf_radix, 32);
    assert_true(p.network.oversubscription == 1);
    assert_true(p.network.link_latency_us == 0.5 && p.network.switch_latency_us == 0.3);
    assert_true(p.storage.checkpoint_write_gbs == 10 && p.storage.checkpoint_read_gbs == 20);
    assert_string_equal(p.calibration, "");
    assert_true(p.gpu.peak_tflops[PREC_FP16] == 100 && p.gpu.peak_tflops[PREC_BF16] == 0);

    /* A calibration with only a device: everything else empty or default. */
    snprintf(path, sizeof path, "%s/cal.json", t->dir);
    write_file(path, "{\"device\": \"d\"}");
    calibration_config c;
    if (calibration_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_string_equal(c.source, "datasheet");
    assert_int_equal(c.gemm[PREC_BF16].count, 0);
    assert_true(c.launch_overhead_us == 0 && c.attention[ATTN_BACKEND_FLASH].efficiency == 0);
    assert_false(c.collectives[LINK_NVLINK][COLL_ALL_REDUCE].present);
    calibration_free(&c);
}

/* A calibration dtcal wrote carries calibration_crc32 (json_seal over its content, reals at the
 * 6 digits dtcal prints): as written it loads; edited, the loader refuses it naming the seal;
 * without the seal (a hand-written file, or the user's choice after an edit) it loads. */
static void an_edited_sealed_calibration_is_refused(void **state)
{
    tmpdir *t = *state;
    char path[512], crc[9];
    snprintf(path, sizeof path, "%s/sealed.json", t->dir);
    json_t *doc = json_pack("{s:s,s:s,s:f}", "device", "d", "source", "measured", "launch_overhead_us", 3.123456789);
    json_seal_hex(doc, "calibration_crc32", 6, crc);
    json_object_set_new(doc, "calibration_crc32", json_string(crc));
    assert_int_equal(json_dump_file(doc, path, JSON_REAL_PRECISION(6)), 0);
    calibration_config c;
    config_error err;
    if (calibration_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_true(fabs(c.launch_overhead_us - 3.12346) < 1e-9);
    calibration_free(&c);
    json_object_set_new(doc, "launch_overhead_us", json_real(4.5));
    assert_int_equal(json_dump_file(doc, path, JSON_REAL_PRECISION(6)), 0);
    assert_int_equal(calibration_load(path, &c, &err), -1);
    if (!strstr(err.msg, "calibration_crc32: the file does not match its seal"))
        fail_msg("%s", err.msg);
    json_object_del(doc, "calibration_crc32");
    assert_int_equal(json_dump_file(doc, path, JSON_REAL_PRECISION(6)), 0);
    if (calibration_load(path, &c, &err))
        fail_msg("%s", err.msg);
    assert_true(c.launch_overhead_us == 4.5);
    calibration_free(&c);
    json_decref(doc);
}

static void files_over_the_limit_are_refused(void **state)
{
    tmpdir *t = *state;
    char path[512];
    snprintf(path, sizeof path, "%s/huge.json", t->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(truncate(path, 65L * 1024 * 1024), 0); /* sparse: no disk used */
    scenario_config s;
    platform_config p;
    calibration_config c;
    config_error err;
    assert_int_equal(scenario_load(path, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "over the 67108864-byte limit"));
    assert_int_equal(platform_load(path, &p, &err), -1);
    assert_non_null(strstr(err.msg, "limit"));
    assert_int_equal(calibration_load(path, &c, &err), -1);
    assert_non_null(strstr(err.msg, "limit"));
    /* a folder is not a file */
    assert_int_equal(scenario_load(t->dir, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "not a regular file"));
    /* the top level must be an object */
    snprintf(path, sizeof path, "%s/list.json", t->dir);
    write_file(path, "[1, 2]");
    assert_int_equal(scenario_load(path, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "must be an object"));
    /* duplicate keys are an error, not a silent last-one-wins */
    write_file(path, "{\"name\": \"a\", \"name\": \"b\"}");
    assert_int_equal(scenario_load(path, NULL, 0, &s, &err), -1);
    assert_non_null(strstr(err.msg, "duplicate"));
}

/* The shipped scenarios are the published layouts they claim to be. */
static void shipped_scenarios_match_their_papers(void **state)
{
    (void)state;
    scenario_config s;
    config_error err;
    if (scenario_load(ROOT "/scenarios/gpt3-175b-1024-a100.json", NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(scenario_gpus(&s), 1024);
    assert_int_equal(s.parallel.tp, 8);
    assert_int_equal(s.parallel.pp, 8);
    assert_int_equal(s.parallel.dp, 16);
    assert_int_equal(scenario_micro_batches(&s), 1536 / 16);
    assert_int_equal(s.model.ffn_hidden_size, 4 * 12288);
    scenario_free(&s);

    if (scenario_load(ROOT "/scenarios/llama3-405b-16k-h100.json", NULL, 0, &s, &err))
        fail_msg("%s", err.msg);
    assert_int_equal(scenario_gpus(&s), 16384);
    assert_int_equal(s.training.global_batch_size * s.model.seq_length, 2048LL * 8192); /* 16M tokens */
    long long sum = 0;
    for (int i = 0; i < s.parallel.pipeline_layers_count; i++)
        sum += s.parallel.pipeline_layers[i];
    assert_int_equal(sum, 126);
    assert_int_equal(s.model.num_query_groups, 8);
    scenario_free(&s);
}

/* Every shipped platform's calibration is physically possible on it: a ring moves each byte
 * over a GPU's own links, so under NCCL no nvlink fit passes node.nvlink_bandwidth_gbs (each way)
 * and no network fit a NIC's rate (nic_bandwidth_gbps / 8); a faster one-node figure is NVLink
 * SHARP's, filed under nvls (docs/model.md, "NVLS measured"), and only on a node that has it. The
 * H100 calibration held NVLS's 479 GB/s as its ring fit, past the H100's 450, until 2026-11-28. */
static void shipped_calibrations_fit_their_links(void **state)
{
    (void)state;
    static const char *const platforms[] = {"dgx-a100-superpod", "dgx-h100-superpod", "dgx-h100-node"};
    for (size_t i = 0; i < sizeof platforms / sizeof *platforms; i++) {
        char path[4096], cal_path[4096 + CFG_PATH_MAX];
        snprintf(path, sizeof path, "%s/platforms/%s.json", ROOT, platforms[i]);
        platform_config p;
        calibration_config c;
        config_error err;
        if (platform_load(path, &p, &err))
            fail_msg("%s", err.msg);
        assert_int_equal(p.collective_library, COLL_LIBRARY_NCCL);
        snprintf(cal_path, sizeof cal_path, "%s%s%s", p.calibration[0] == '/' ? "" : ROOT,
                 p.calibration[0] == '/' ? "" : "/", p.calibration);
        if (calibration_load(cal_path, &c, &err))
            fail_msg("%s: %s", platforms[i], err.msg);
        int fits = 0;
        for (int k = 0; k < COLL_KIND_COUNT; k++) {
            const coll_fit *nv = &c.collectives[LINK_NVLINK][k], *net = &c.collectives[LINK_NETWORK][k];
            if (nv->present) {
                print_message("%s: nvlink fit %d %.1f GB/s of %.0f\n", platforms[i], k, nv->busbw_gbs,
                              p.node.nvlink_bandwidth_gbs);
                assert_true(nv->busbw_gbs <= p.node.nvlink_bandwidth_gbs);
                fits++;
            }
            if (net->present) {
                assert_true(net->busbw_gbs <= p.node.nic_bandwidth_gbps / 8);
                fits++;
            }
            if (c.collectives[LINK_NVLS][k].present)
                assert_true(p.node.nvls);
        }
        assert_true(fits >= 2);
        calibration_free(&c);
    }
}

/* A dtrain run's scenario on the 2-core cpu-box (node.gpus 2): more ranks than cores grow the
 * node to hold them all and keep the cores as the devices they time-share; no more ranks than
 * cores leave the platform as it is. */
static void engine_runs_share_the_platforms_devices(void **state)
{
    char plat[4096], cal[4096];
    snprintf(plat, sizeof plat, "%s/platforms/cpu-box.json", DTSIM_SOURCE_DIR);
    snprintf(cal, sizeof cal, "%s/calibrate/data/cpu-box-measured.json", DTSIM_SOURCE_DIR);
    static const struct { int tp, dp, gpus, devices; double share; } runs[] = {
        {1, 1, 2, 2, 1.0}, {2, 1, 2, 2, 1.0}, {2, 2, 4, 2, 2.0}, {1, 4, 4, 2, 2.0}, {4, 2, 8, 2, 4.0}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        engine_run_shape r = {.num_layers = 2, .hidden = 128, .heads = 4, .seq_len = 64, .vocab = 512,
                              .micro_batch = 2, .global_batch = 2LL * runs[i].dp, .tp = runs[i].tp, .pp = 1,
                              .dp = runs[i].dp, .vpp = 1, .precision = "fp32"};
        scenario_config s;
        config_error err;
        if (engine_scenario_load(&r, plat, cal, &s, &err) != 0)
            fail_msg("%s", err.msg);
        assert_int_equal(s.platform.node.gpus, runs[i].gpus);
        assert_int_equal(s.platform.node.compute_devices, runs[i].devices);
        assert_true(cost_ranks_per_device(&s) == runs[i].share);
        scenario_free(&s);
    }
}

/* A dtrain run's context parallelism as the engine ran it: ring attention (p2p) unless it says
 * all_gather; none without CP. */
static void engine_runs_carry_their_cp_comm_type(void **state)
{
    (void)state;
    char plat[4096], cal[4096];
    snprintf(plat, sizeof plat, "%s/platforms/cpu-box.json", DTSIM_SOURCE_DIR);
    snprintf(cal, sizeof cal, "%s/calibrate/data/cpu-box-measured.json", DTSIM_SOURCE_DIR);
    static const struct { const char *given; int cp_comm; } runs[] = {
        {NULL, CP_COMM_P2P}, {"p2p", CP_COMM_P2P}, {"all_gather", CP_COMM_ALL_GATHER}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        engine_run_shape r = {.num_layers = 2, .hidden = 128, .heads = 4, .seq_len = 64, .vocab = 512,
                              .micro_batch = 2, .global_batch = 2, .tp = 1, .pp = 1, .dp = 1, .vpp = 1, .cp = 2,
                              .cp_comm_type = runs[i].given, .precision = "fp32"};
        scenario_config s;
        config_error err;
        if (engine_scenario_load(&r, plat, cal, &s, &err) != 0)
            fail_msg("%s", err.msg);
        assert_int_equal(s.parallel.cp, 2);
        assert_int_equal(s.parallel.cp_comm, runs[i].cp_comm);
        scenario_free(&s);
    }
}

/* A dtrain run under a pipeline: dtrain posts its sends and goes on computing (engine/comm.c), so
 * its scenario overlaps them under 1F1B, which framework megatron refuses (Megatron-LM turns it off
 * there) and a scenario naming no framework keeps; nor does dtrain synchronise at an exchange. */
static void engine_runs_overlap_their_pipeline_sends(void **state)
{
    (void)state;
    char plat[4096], cal[4096];
    snprintf(plat, sizeof plat, "%s/platforms/cpu-box.json", DTSIM_SOURCE_DIR);
    snprintf(cal, sizeof cal, "%s/calibrate/data/cpu-box-measured.json", DTSIM_SOURCE_DIR);
    engine_run_shape r = {.num_layers = 2, .hidden = 128, .heads = 4, .seq_len = 64, .vocab = 512,
                          .micro_batch = 2, .global_batch = 8, .tp = 1, .pp = 2, .dp = 1, .vpp = 1,
                          .precision = "fp32"};
    scenario_config s;
    config_error err;
    if (engine_scenario_load(&r, plat, cal, &s, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(s.parallel.pp, 2);
    assert_int_equal(s.parallel.schedule, PIPELINE_1F1B);
    assert_true(s.parallel.overlap_p2p_comm);
    assert_int_equal(s.parallel.framework, FRAMEWORK_UNSET);
    assert_false(params_p2p_drains_device(&s));
    scenario_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(scenario_folder_comes_first, setup_dir, teardown_dir),
        cmocka_unit_test(inline_platform_and_calibration),
        cmocka_unit_test_setup_teardown(errors_in_a_referenced_file_name_it, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(platform_defaults, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(files_over_the_limit_are_refused, setup_dir, teardown_dir),
        cmocka_unit_test(shipped_scenarios_match_their_papers),
        cmocka_unit_test(shipped_calibrations_fit_their_links),
        cmocka_unit_test(engine_runs_share_the_platforms_devices),
        cmocka_unit_test(engine_runs_carry_their_cp_comm_type),
        cmocka_unit_test(engine_runs_overlap_their_pipeline_sends),
        cmocka_unit_test_setup_teardown(an_edited_sealed_calibration_is_refused, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
