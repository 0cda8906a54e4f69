/* Writing an output file whole or not at all, the one way dtrain, dtsim and dtcal do it: the
 * bytes go to a temporary file beside the target (PATH.tmp.PID), which replaces the target
 * only once everything is written (and, when asked, on disk); on any failure the temporary is
 * removed and the target is left as it was. A target that exists and is not a regular file
 * (/dev/null, a FIFO, a terminal) is written in place: renaming over it would replace the
 * device itself. A symbolic link stays a link: the file it names is replaced whole. Pure C and
 * POSIX. */
#ifndef DTSIM_ENGINE_ATOMIC_FILE_H
#define DTSIM_ENGINE_ATOMIC_FILE_H
#include <stdio.h>

typedef struct {
    FILE *f;         /* write here (fwrite, fprintf, json_dumpf) */
    char path[4096]; /* the target */
    char tmp[4200];  /* the temporary, "" when written in place */
} atomic_file;

/* Opens the temporary for path ("w" mode). 0, or -1 with why (naming the path). */
int atomic_file_open(atomic_file *a, const char *path, char *why, size_t len);
/* Flushes, (durable: fsync), closes and renames over the target. 0, or -1 with why; the
 * temporary is gone either way. */
int atomic_file_commit(atomic_file *a, int durable, char *why, size_t len);
/* Closes and removes the temporary; the target is untouched. */
void atomic_file_abort(atomic_file *a);
/* Whether atomic_file_open would open path, asked before the work that writes it: its
 * temporary is opened and removed (a folder that is absent or read-only fails here, not after an
 * hour's work); a folder at path is refused; a device or pipe is not opened (a FIFO would block).
 * 0, or -1 with why naming path (and errno the cause, but for a folder at path). */
int atomic_file_check(const char *path, char *why, size_t len);
/* The whole of one buffer to path, through the above. */
int atomic_file_write(const char *path, const void *data, size_t n, int durable, char *why, size_t len);

#endif
