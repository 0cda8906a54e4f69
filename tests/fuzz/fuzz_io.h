/* Helpers for the fuzz targets: the readers under test take file paths, so each input is
 * written to a per-process scratch file first. */
#ifndef DTSIM_TESTS_FUZZ_IO_H
#define DTSIM_TESTS_FUZZ_IO_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes data to a scratch file named after `name` (the extension matters to some readers)
 * and returns its path (a static buffer). */
static inline const char *fuzz_write_file(const char *name, const uint8_t *data, size_t size)
{
    static char path[512];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/dtsim-fuzz-%d-%s", tmp, (int)getpid(), name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    return path;
}

/* Keeps the readers' messages out of the fuzzer's output. */
static inline void fuzz_quiet(void)
{
    if (!getenv("DTSIM_FUZZ_VERBOSE")) {
        if (!freopen("/dev/null", "w", stdout))
            abort();
    }
}

/* Once per process: quiet output (stderr too when asked), and, when repo_paths, relative
 * platform and calibration paths resolved against the repository as for files in it. */
static inline void fuzz_setup(int repo_paths, int quiet_stderr)
{
    static int done;
    if (done)
        return;
    done = 1;
    if (repo_paths)
        setenv("DTSIM_ROOT", DTSIM_SOURCE_DIR, 1);
    fuzz_quiet();
    if (quiet_stderr && !freopen("/dev/null", "w", stderr))
        abort();
}
#endif
