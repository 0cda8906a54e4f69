/* Platform and calibration files: parsed strictly into platform_config / calibration_config. */
#include <stdio.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "config_internal.h"
#include "json_seal.h"

static const char *const precision_names[] = {"fp32", "tf32", "fp16", "bf16", "fp8", NULL};

const char *precision_name(precision_kind p)
{
    return (p >= 0 && p < PREC_COUNT) ? precision_names[p] : "?";
}

int precision_from_name(const char *name)
{
    for (int i = 0; precision_names[i]; i++)
        if (!strcmp(name, precision_names[i]))
            return i;
    return -1;
}

int platform_parse(json_t *root, const char *path, const char *base_dir, int need_calibration, platform_config *p,
                   config_error *err)
{
    static const char *const top[] = {"name", "gpu", "node", "network", "storage", "calibration",
                                      "price_per_gpu_hour", "collective_library", NULL};
    static const char *const libraries[] = {"nccl", "mpi", NULL};
    static const char *const cpu_vendors[] = {"other", "intel", "amd", NULL};
    static const char *const gpu_keys[] = {"name", "memory_gib", "hbm_bandwidth_gbs", "peak_tflops", NULL};
    static const char *const node_keys[] = {"gpus", "compute_devices", "nvlink_bandwidth_gbs", "nvlink_latency_us", "nics",
                                            "nic_bandwidth_gbps", "pcie_bandwidth_gbs", "host_memory_bandwidth_gbs",
                                            "nvme_read_gbs", "nvme_write_gbs", "nvls", "cpu_vendor", NULL};
    static const char *const net_keys[] = {"nodes", "topology", "tiers", "leaf_radix", "oversubscription",
                                           "link_latency_us", "switch_latency_us", "sharp", "adaptive_routing", NULL};
    static const char *const storage_keys[] = {"checkpoint_write_gbs", "checkpoint_read_gbs", "dataset_read_gbs", NULL};
    static const char *const topologies[] = {"rail_optimized_fat_tree", "fat_tree", "single_switch", NULL};
    memset(p, 0, sizeof *p);
    char sub[2 * CFG_PATH_MAX];
    json_t *gpu, *node, *net, *storage, *peaks;
    long long v;
    if (config_check_keys(root, path, top, err) || config_str(root, path, "name", 1, NULL, p->name, sizeof p->name, err) ||
        config_num(root, path, "price_per_gpu_hour", 0, 0, 0, 1e6, 0, &p->price_per_gpu_hour, err))
        return -1;
    int library, vendor;
    if (config_enum(root, path, "collective_library", libraries, COLL_LIBRARY_NCCL, &library, err))
        return -1;
    p->collective_library = (coll_library)library;

    if (config_object(root, path, "gpu", &gpu, err))
        return -1;
    if (!gpu)
        return config_fail(err, "%s.gpu: required (an object)", path);
    snprintf(sub, sizeof sub, "%s.gpu", path);
    if (config_check_keys(gpu, sub, gpu_keys, err) ||
        config_str(gpu, sub, "name", 1, NULL, p->gpu.name, sizeof p->gpu.name, err) ||
        config_num(gpu, sub, "memory_gib", 1, 0, 0, 1e6, 1, &p->gpu.memory_gib, err) ||
        config_num(gpu, sub, "hbm_bandwidth_gbs", 1, 0, 0, 1e6, 1, &p->gpu.hbm_bandwidth_gbs, err) ||
        config_object(gpu, sub, "peak_tflops", &peaks, err))
        return -1;
    if (!peaks)
        return config_fail(err, "%s.peak_tflops: required (an object of precision: TFLOP/s)", sub);
    snprintf(sub, sizeof sub, "%s.gpu.peak_tflops", path);
    if (config_check_keys(peaks, sub, precision_names, err))
        return -1;
    int any = 0;
    for (int i = 0; i < PREC_COUNT; i++) {
        if (config_num(peaks, sub, precision_names[i], 0, 0, 0, 1e6, 0, &p->gpu.peak_tflops[i], err))
            return -1;
        any |= p->gpu.peak_tflops[i] > 0;
    }
    if (!any)
        return config_fail(err, "%s: at least one precision needs a peak above 0", sub);

    if (config_object(root, path, "node", &node, err))
        return -1;
    if (!node)
        return config_fail(err, "%s.node: required (an object)", path);
    snprintf(sub, sizeof sub, "%s.node", path);
    if (config_check_keys(node, sub, node_keys, err) || config_int(node, sub, "gpus", 1, 0, 1, 1024, &v, err))
        return -1;
    p->node.gpus = (int)v;
    if (config_int(node, sub, "compute_devices", 0, p->node.gpus, 1, p->node.gpus, &v, err))
        return -1;
    p->node.compute_devices = (int)v;
    if (config_num(node, sub, "nvlink_bandwidth_gbs", 1, 0, 0, 1e6, 1, &p->node.nvlink_bandwidth_gbs, err) ||
        config_num(node, sub, "nvlink_latency_us", 0, 1.0, 0, 1e6, 0, &p->node.nvlink_latency_us, err) ||
        config_int(node, sub, "nics", 0, 1, 0, 1024, &v, err))
        return -1;
    p->node.nics = (int)v;
    if (config_num(node, sub, "nic_bandwidth_gbps", 0, 0, 0, 1e7, 0, &p->node.nic_bandwidth_gbps, err) ||
        config_num(node, sub, "pcie_bandwidth_gbs", 0, 32, 0, 1e6, 1, &p->node.pcie_bandwidth_gbs, err) ||
        config_num(node, sub, "host_memory_bandwidth_gbs", 0, 0, 0, 1e6, 0, &p->node.host_memory_bandwidth_gbs, err) ||
        config_num(node, sub, "nvme_read_gbs", 0, 0, 0, 1e6, 0, &p->node.nvme_read_gbs, err) ||
        config_num(node, sub, "nvme_write_gbs", 0, 0, 0, 1e6, 0, &p->node.nvme_write_gbs, err) ||
        config_bool(node, sub, "nvls", 0, &p->node.nvls, err) ||
        config_enum(node, sub, "cpu_vendor", cpu_vendors, CPU_VENDOR_OTHER, &vendor, err))
        return -1;
    p->node.cpu_vendor = (cpu_vendor_kind)vendor;

    if (config_object(root, path, "network", &net, err))
        return -1;
    if (!net)
        return config_fail(err, "%s.network: required (an object)", path);
    snprintf(sub, sizeof sub, "%s.network", path);
    int topo;
    if (config_check_keys(net, sub, net_keys, err) || config_int(net, sub, "nodes", 1, 0, 1, 1048576, &v, err))
        return -1;
    p->network.nodes = (int)v;
    if (config_enum(net, sub, "topology", topologies, TOPO_RAIL_OPTIMIZED_FAT_TREE, &topo, err))
        return -1;
    p->network.topology = (topology_kind)topo;
    if (config_int(net, sub, "tiers", 0, p->network.nodes > 1 ? 2 : 1, 1, 3, &v, err))
        return -1;
    p->network.tiers = (int)v;
    if (config_int(net, sub, "leaf_radix", 0, 32, 1, 65536, &v, err))
        return -1;
    p->network.leaf_radix = (int)v;
    if (config_num(net, sub, "oversubscription", 0, 1, 1, 1e3, 0, &p->network.oversubscription, err) ||
        config_num(net, sub, "link_latency_us", 0, 0.5, 0, 1e6, 0, &p->network.link_latency_us, err) ||
        config_num(net, sub, "switch_latency_us", 0, 0.3, 0, 1e6, 0, &p->network.switch_latency_us, err) ||
        config_bool(net, sub, "sharp", 0, &p->network.sharp, err) ||
        config_bool(net, sub, "adaptive_routing", 0, &p->network.adaptive_routing, err))
        return -1;
    if ((long long)p->network.nodes * p->node.gpus > 1048576)
        return config_fail(err, "%s: %d nodes x %d GPUs is over the limit of 1,048,576 GPUs", path, p->network.nodes,
                           p->node.gpus);
    if (p->network.nodes > 1 && (p->node.nics < 1 || p->node.nic_bandwidth_gbps <= 0))
        return config_fail(err, "%s.node: a platform of %d nodes needs nics >= 1 and nic_bandwidth_gbps > 0",
                           path, p->network.nodes);
    if (p->network.topology == TOPO_SINGLE_SWITCH && p->network.tiers != 1 && json_object_get(net, "tiers"))
        return config_fail(err, "%s.tiers: %d, but a single_switch topology has 1 tier", sub, p->network.tiers);
    if (p->network.topology == TOPO_SINGLE_SWITCH)
        p->network.tiers = 1;

    if (config_object(root, path, "storage", &storage, err))
        return -1;
    snprintf(sub, sizeof sub, "%s.storage", path);
    json_t *empty = json_object();
    json_t *st = storage ? storage : empty;
    int rc = config_check_keys(st, sub, storage_keys, err) ||
             config_num(st, sub, "checkpoint_write_gbs", 0, 10, 0, 1e7, 1, &p->storage.checkpoint_write_gbs, err) ||
             config_num(st, sub, "checkpoint_read_gbs", 0, 20, 0, 1e7, 1, &p->storage.checkpoint_read_gbs, err) ||
             config_num(st, sub, "dataset_read_gbs", 0, 0, 0, 1e7, 0, &p->storage.dataset_read_gbs, err);
    if (!rc && p->storage.dataset_read_gbs <= 0) /* not given: the same file system as checkpoints */
        p->storage.dataset_read_gbs = p->storage.checkpoint_read_gbs;
    json_decref(empty);
    if (rc)
        return -1;

    char cal[CFG_PATH_MAX];
    if (config_str(root, path, "calibration", 0, "", cal, sizeof cal, err))
        return -1;
    if (cal[0] && config_resolve_path(cal, base_dir, p->calibration, sizeof p->calibration) != 0) {
        p->calibration[0] = 0;
        if (!need_calibration)
            return 0;
        return config_fail(err, "%s.calibration: '%s' not found (looked in %s and the repository root)", path, cal,
                           base_dir && *base_dir ? base_dir : ".");
    }
    return 0;
}

int platform_load(const char *path, platform_config *out, config_error *err)
{
    return platform_load_ex(path, 1, out, err);
}

int platform_load_ex(const char *path, int need_calibration, platform_config *out, config_error *err)
{
    json_t *root = config_load_file(path, "platform", err);
    if (!root)
        return -1;
    char dir[CFG_PATH_MAX], label[CFG_PATH_MAX + 16];
    config_dirname(path, dir, sizeof dir);
    snprintf(label, sizeof label, "platform (%s)", path);
    int rc = platform_parse(root, label, dir, need_calibration, out, err);
    json_decref(root);
    return rc;
}

static int parse_gemm(json_t *gemm, const char *path, calibration_config *c, config_error *err)
{
    const char *key;
    json_t *list;
    json_object_foreach(gemm, key, list) {
        int p = precision_from_name(key);
        if (p < 0)
            return config_fail(err, "%s.%s: unknown precision (expected fp32, tf32, fp16, bf16 or fp8)", path, key);
        if (!json_is_array(list) || json_array_size(list) == 0)
            return config_fail(err, "%s.%s: expected a non-empty list of {m, n, k, tflops}", path, key);
        if (json_array_size(list) > 100000)
            return config_fail(err, "%s.%s: %zu points, over the limit of 100000", path, key, json_array_size(list));
        gemm_table *t = &c->gemm[p];
        free(t->points);
        free(t->log2_mnk);
        t->log2_mnk = NULL;
        t->id = 0;
        t->count = (int)json_array_size(list);
        t->points = calloc((size_t)t->count, sizeof *t->points);
        if (!t->points)
            return config_fail(err, "%s.%s: out of memory", path, key);
        for (int i = 0; i < t->count; i++) {
            static const char *const keys[] = {"m", "n", "k", "tflops", NULL};
            char sub[2 * CFG_PATH_MAX];
            if (snprintf(sub, sizeof sub, "%s.%s[%d]", path, key, i) >= (int)sizeof sub) /* named whole, or not read */
                return config_fail(err, "%.200s...: path too long", path);
            json_t *pt = json_array_get(list, (size_t)i);
            if (!json_is_object(pt))
                return config_fail(err, "%s: expected an object {m, n, k, tflops}", sub);
            gemm_point *g = &t->points[i];
            if (config_check_keys(pt, sub, keys, err) || config_num(pt, sub, "m", 1, 0, 0, 1e9, 1, &g->m, err) ||
                config_num(pt, sub, "n", 1, 0, 0, 1e9, 1, &g->n, err) ||
                config_num(pt, sub, "k", 1, 0, 0, 1e9, 1, &g->k, err) ||
                config_num(pt, sub, "tflops", 1, 0, 0, 1e6, 1, &g->tflops, err))
                return -1;
        }
        static atomic_ullong tables_parsed;
        t->id = atomic_fetch_add(&tables_parsed, 1) + 1;
        t->log2_mnk = malloc(3 * (size_t)t->count * sizeof *t->log2_mnk);
        if (!t->log2_mnk)
            return config_fail(err, "%s.%s: out of memory", path, key);
        for (int i = 0; i < t->count; i++) {
            t->log2_mnk[3 * i] = log2(t->points[i].m);
            t->log2_mnk[3 * i + 1] = log2(t->points[i].n);
            t->log2_mnk[3 * i + 2] = log2(t->points[i].k);
        }
    }
    return 0;
}

static int parse_collectives(json_t *colls, const char *path, calibration_config *c, config_error *err)
{
    static const char *const classes[] = {"nvlink", "network", "nvls", NULL};
    static const char *const kinds[] = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv", NULL};
    static const char *const fit_keys[] = {"alpha_us", "busbw_gbs", NULL};
    if (config_check_keys(colls, path, classes, err))
        return -1;
    for (int lc = 0; lc < LINK_CLASS_COUNT; lc++) {
        json_t *cls;
        char sub[2 * CFG_PATH_MAX];
        snprintf(sub, sizeof sub, "%s", path);
        if (config_object(colls, sub, classes[lc], &cls, err))
            return -1;
        if (!cls)
            continue;
        if (snprintf(sub, sizeof sub, "%s.%s", path, classes[lc]) >= (int)sizeof sub) /* as parse_gemm's */
            return config_fail(err, "%.200s...: path too long", path);
        if (config_check_keys(cls, sub, kinds, err))
            return -1;
        for (int k = 0; k < COLL_KIND_COUNT; k++) {
            json_t *fit;
            if (config_object(cls, sub, kinds[k], &fit, err))
                return -1;
            if (!fit)
                continue;
            char fp[2 * CFG_PATH_MAX + 64];
            snprintf(fp, sizeof fp, "%s.%s", sub, kinds[k]);
            if (lc == LINK_NVLS && (k == COLL_ALL_TO_ALL || k == COLL_SEND_RECV))
                return config_fail(err, "%s: NVLink SHARP runs all_reduce, all_gather and reduce_scatter only (NCCL's "
                                        "NVLS algorithm); measure %s under nvlink", fp, kinds[k]);
            coll_fit *f = &c->collectives[lc][k];
            if (config_check_keys(fit, fp, fit_keys, err) ||
                config_num(fit, fp, "alpha_us", 1, 0, 0, 1e7, 0, &f->alpha_us, err) ||
                config_num(fit, fp, "busbw_gbs", 1, 0, 0, 1e7, 1, &f->busbw_gbs, err))
                return -1;
            f->present = 1;
        }
    }
    return 0;
}

/* ops.attention / ops.attention_fused: {efficiency} or {table: [{seq, head_dim, tflops[,
 * tflops_backward][, batch][, precision]}]} (efficiency optional beside a table). */
static int parse_attention(json_t *att, const char *op, attention_calibration *a, config_error *err)
{
    static const char *const att_keys[] = {"efficiency", "table", NULL};
    json_t *table = json_object_get(att, "table");
    if (config_check_keys(att, op, att_keys, err) ||
        config_num(att, op, "efficiency", !table, 0, 0, 1, 1, &a->efficiency, err))
        return -1;
    if (!table)
        return 0;
    if (!json_is_array(table) || json_array_size(table) == 0 || json_array_size(table) > ATTENTION_TABLE_MAX)
        return config_fail(err, "%s.table: expected a list of 1..%d {seq, head_dim, tflops}", op, ATTENTION_TABLE_MAX);
    for (size_t i = 0; i < json_array_size(table); i++) {
        static const char *const keys[] = {"seq", "head_dim", "tflops", "tflops_backward", "batch", "precision", NULL};
        char pt[2 * CFG_PATH_MAX + 96];
        snprintf(pt, sizeof pt, "%s.table[%zu]", op, i);
        json_t *e = json_array_get(table, i);
        if (!json_is_object(e))
            return config_fail(err, "%s: expected an object {seq, head_dim, tflops}", pt);
        if (config_check_keys(e, pt, keys, err) || config_num(e, pt, "seq", 1, 0, 0, 1e9, 1, &a->table[i].seq, err) ||
            config_num(e, pt, "head_dim", 1, 0, 0, 1e6, 1, &a->table[i].head_dim, err) ||
            config_num(e, pt, "tflops", 1, 0, 0, 1e6, 1, &a->table[i].tflops, err) ||
            config_num(e, pt, "tflops_backward", 0, 0, 0, 1e6, 1, &a->table[i].tflops_backward, err) ||
            config_num(e, pt, "batch", 0, 0, 0, 1e9, 0, &a->table[i].batch, err))
            return -1;
        int prec = 0;
        a->table[i].tagged = json_object_get(e, "precision") != NULL;
        if (a->table[i].tagged && config_enum(e, pt, "precision", precision_names, 0, &prec, err))
            return -1;
        a->table[i].precision = (precision_kind)prec;
    }
    a->points = (int)json_array_size(table);
    return 0;
}

int calibration_parse(json_t *root, const char *path, calibration_config *c, config_error *err)
{
    static const char *const top[] = {"device", "source", "date", "host", "command", "gemm", "ops",
                                      "launch_overhead_us", "host_issue_us", "collectives", "compute_variability_cv",
                                      "overlap_slowdown", "calibration_crc32", NULL};
    static const char *const sources[] = {"measured", "datasheet", "nccl-tests", "mixed", NULL};
    static const char *const op_keys[] = {"layernorm", "softmax", "gelu", "elementwise", "cross_entropy",
                                          "adamw", "embedding", "rmsnorm", "swiglu", "rope", "attention",
                                          "attention_fused", NULL};
    memset(c, 0, sizeof *c);
    int src;
    /* A file dtcal wrote carries its seal (calibrate/cal_writer.c): one that no longer matches was
     * edited or damaged since. Shipped, hand-written files have none. */
    char crc[9];
    if (!json_seal_matches(root, "calibration_crc32", DTCAL_JSON_REAL_DIGITS, crc)) {
        json_t *seal = json_object_get(root, "calibration_crc32");
        return config_fail(err, "%s.calibration_crc32: the file does not match its seal (%s; its content gives %s): "
                                "edited or damaged since dtcal wrote it; remove calibration_crc32 to use it as it is, "
                                "or measure it again", path, json_is_string(seal) ? json_string_value(seal) : "not a string",
                           crc);
    }
    if (config_check_keys(root, path, top, err) ||
        config_str(root, path, "device", 1, NULL, c->device, sizeof c->device, err) ||
        config_enum(root, path, "source", sources, 1, &src, err) ||
        config_str(root, path, "date", 0, "", c->date, sizeof c->date, err) ||
        config_str(root, path, "host", 0, "", c->host, sizeof c->host, err) ||
        config_num(root, path, "launch_overhead_us", 0, 0, 0, 1e6, 0, &c->launch_overhead_us, err) ||
        config_num(root, path, "host_issue_us", 0, 0, 0, 1e6, 0, &c->host_issue_us, err) ||
        config_num(root, path, "compute_variability_cv", 0, -1, 0, 0.999, 0, &c->compute_variability_cv, err) ||
        config_num(root, path, "overlap_slowdown", 0, 1, 1, 100, 0, &c->overlap_slowdown, err))
        return -1;
    snprintf(c->source, sizeof c->source, "%s", sources[src]);
    json_t *gemm, *ops, *colls;
    char sub[2 * CFG_PATH_MAX];
    if (config_object(root, path, "gemm", &gemm, err))
        return -1;
    snprintf(sub, sizeof sub, "%s.gemm", path);
    if (gemm && parse_gemm(gemm, sub, c, err))
        return -1;
    if (config_object(root, path, "ops", &ops, err))
        return -1;
    if (ops) {
        snprintf(sub, sizeof sub, "%s.ops", path);
        if (config_check_keys(ops, sub, op_keys, err))
            return -1;
        for (int i = 0; i < OPCLASS_COUNT; i++) {
            json_t *o;
            if (config_object(ops, sub, op_class_name((op_class)i), &o, err))
                return -1;
            if (!o)
                continue;
            static const char *const gbs_keys[] = {"gbs", "gbs_backward", NULL};
            char op[2 * CFG_PATH_MAX + 64];
            snprintf(op, sizeof op, "%s.%s", sub, op_class_name((op_class)i));
            if (config_check_keys(o, op, gbs_keys, err) || config_num(o, op, "gbs", 1, 0, 0, 1e7, 1, &c->op_gbs[i], err) ||
                config_num(o, op, "gbs_backward", 0, 0, 0, 1e7, 1, &c->op_gbs_backward[i], err))
                return -1;
        }
        static const char *const att_names[ATTN_BACKENDS] = {"attention", "attention_fused"};
        for (int b = 0; b < ATTN_BACKENDS; b++) {
            json_t *att;
            char op[2 * CFG_PATH_MAX + 64];
            snprintf(op, sizeof op, "%s.%s", sub, att_names[b]);
            if (config_object(ops, sub, att_names[b], &att, err) ||
                (att && parse_attention(att, op, &c->attention[b], err)))
                return -1;
        }
    }
    if (config_object(root, path, "collectives", &colls, err))
        return -1;
    snprintf(sub, sizeof sub, "%s.collectives", path);
    if (colls && parse_collectives(colls, sub, c, err))
        return -1;
    return 0;
}

int calibration_load(const char *path, calibration_config *out, config_error *err)
{
    memset(out, 0, sizeof *out);
    json_t *root = config_load_file(path, "calibration", err);
    if (!root)
        return -1;
    char label[CFG_PATH_MAX + 16];
    snprintf(label, sizeof label, "calibration (%s)", path);
    int rc = calibration_parse(root, label, out, err);
    json_decref(root);
    if (rc)
        calibration_free(out);
    return rc;
}

void calibration_free(calibration_config *c)
{
    for (int i = 0; i < PREC_COUNT; i++) {
        free(c->gemm[i].points);
        free(c->gemm[i].log2_mnk);
        c->gemm[i].points = NULL;
        c->gemm[i].log2_mnk = NULL;
        c->gemm[i].id = 0;
        c->gemm[i].count = 0;
    }
}
