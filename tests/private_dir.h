/* A folder of the test process's own to work in: relative file names then never meet another
 * suite's (two builds' tests at once, or a test's cpu and gpu variants). */
#ifndef DTSIM_TESTS_PRIVATE_DIR_H
#define DTSIM_TESTS_PRIVATE_DIR_H
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* dir: a mkdtemp template, "/tmp/NAME_XXXXXX", filled in; makes it and enters it. 0 or -1. */
static inline int enter_private_dir(char *dir)
{
    if (!mkdtemp(dir) || chdir(dir) != 0) {
        perror("a private scratch folder");
        return -1;
    }
    return 0;
}

/* Leaves the folder and removes it with what it holds. */
static inline void leave_private_dir(const char *dir)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (chdir("/") != 0 || system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
#endif
