/* See machine_check.h. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "kernels.h"
#include "machine_check.h"

void machine_this(const char *device, char *host, size_t hostlen, char *described, size_t describedlen)
{
    snprintf(host, hostlen, "%s", "");
    if (hostlen > 1 && gethostname(host, hostlen - 1) != 0)
        host[0] = 0;
    if (hostlen)
        host[hostlen - 1] = 0;
    snprintf(described, describedlen, "%s", "");
    char why[256];
    const kernels_backend *k = !strcmp(device, "cpu") ? kernels_cpu()
                               : !strcmp(device, "cuda") ? kernels_cuda(why, sizeof why) : NULL;
    if (k && describedlen)
        k->describe(described, describedlen);
}

int machine_mismatch(const char *cal_path, const char *source, const char *cal_host, const char *cal_device,
                     const char *host, const char *device, const char *kind, const char *platform, char *msg,
                     size_t msglen)
{
    if (strcmp(source, "measured"))
        return 0;
    int host_differs = cal_host[0] && host[0] && strcmp(cal_host, host);
    int device_differs = cal_device[0] && device[0] && strcmp(cal_device, device);
    if (!host_differs && !device_differs)
        return 0;
    snprintf(msg, msglen,
             "warning: calibration %s was measured on another machine (%s%s): host '%s', device '%s'; this machine: "
             "host '%s', device '%s'. Its figures may not describe this machine; measure one here with "
             "`build/bin/dtcal kernels --device %s --platform %s -o my-cal.json`, then run with "
             "`--calibration my-cal.json`",
             cal_path, host_differs ? "host" : "", host_differs && device_differs ? " and device" :
                                                   device_differs ? "device" : "",
             cal_host, cal_device, host, device, kind, platform);
    return 1;
}
