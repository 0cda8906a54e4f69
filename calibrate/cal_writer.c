/* Calibration documents; see cal_writer.h. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cal_writer.h"

json_t *cal_new(const char *device, const char *source, int argc, char **argv)
{
    char date[64], host[256] = "unknown", cmd[2048] = "";
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    gethostname(host, sizeof host - 1);
    for (int i = 0; i < argc; i++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", i ? " " : "", argv[i]);
    return json_pack("{s:s,s:s,s:s,s:s,s:s}", "device", device, "source", source, "date", date, "host", host,
                     "command", cmd);
}

int cal_write(json_t *doc, const char *path)
{
    if (!strcmp(path, "-")) {
        json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
        fputc('\n', stdout);
        return 0;
    }
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (json_dump_file(doc, tmp, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        fprintf(stderr, "dtcal: cannot write %s\n", path);
        return -1;
    }
    return 0;
}
