/* Fuzz target: a checkpoint (manifest.json and one shard) through dtrain's resume path on a
 * one-rank CPU model (1 layer, hidden 4, 2 heads, sequence 4, vocabulary 256). Input: two bytes
 * of manifest length (little-endian), the manifest, then the shard. A load must either succeed
 * with the model's own shapes or refuse; nothing is written. */
#include <sys/stat.h>
#include "checkpoint.h"
#include "fuzz_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    static gpt_model m;
    static comm_ctx c;
    static char dir[512], sdir[600];
    if (!ready) {
        fuzz_quiet();
        gpt_config cfg = {.num_layers = 1, .hidden = 4, .heads = 2, .seq_len = 4, .vocab = 256};
        gpt_init(&m, &cfg, kernels_cpu(), KPREC_FP32, 1, 1);
        comm_start(&c, NULL, NULL);
        char err[256];
        if (comm_layout(&c, 1, 1, 1, err, sizeof err) != 0)
            abort();
        snprintf(dir, sizeof dir, "/tmp/dtsim-fuzz-%d-ckpt", (int)getpid());
        snprintf(sdir, sizeof sdir, "%s/step-00000001", dir);
        mkdir(dir, 0755);
        mkdir(sdir, 0755);
        ready = 1;
    }
    if (size < 2)
        return 0;
    size_t mlen = (size_t)data[0] | (size_t)data[1] << 8;
    if (mlen > size - 2)
        mlen = size - 2;
    char path[700];
    snprintf(path, sizeof path, "%s/manifest.json", sdir);
    FILE *f = fopen(path, "wb");
    fwrite(data + 2, 1, mlen, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/shard-00000.bin", sdir);
    f = fopen(path, "wb");
    fwrite(data + 2 + mlen, 1, size - 2 - mlen, f);
    fclose(f);
    ckpt_layout layout = {.tp = 1, .pp = 1, .dp = 1, .vpp = 1, .zero = 0};
    train_state st;
    char err[9000] = "";
    int rc = checkpoint_load_latest(dir, &m, &st, &c, &layout, err, sizeof err);
    if (rc < 0 && !err[0])
        abort();
    return 0;
}
