/* Whether a calibration describes this machine: a measured calibration keeps the host it was
 * measured on and the device `dtcal kernels` described ("AMD EPYC (2 threads online)", or a GPU's
 * name, compute capability, driver and runtime); figures measured elsewhere predict this machine
 * only as far as the two are alike. */
#ifndef DTSIM_CALIBRATE_MACHINE_CHECK_H
#define DTSIM_CALIBRATE_MACHINE_CHECK_H
#include <stddef.h>

/* This machine's host name and, for device "cpu" or "cuda", the description `dtcal kernels
 * --device D` writes ("" where that backend is absent). */
void machine_this(const char *device, char *host, size_t hostlen, char *described, size_t describedlen);

/* For a calibration whose source is "measured": 1 with one line in msg (naming the calibration's
 * host and device and this machine's, and the command that measures one here: `dtcal kernels
 * --device KIND --platform PLATFORM -o my-cal.json`) where its host or its device differs from
 * this machine's; 0 otherwise (other sources, or the same machine). An empty host or device, on
 * either side, is not compared. */
int machine_mismatch(const char *cal_path, const char *source, const char *cal_host, const char *cal_device,
                     const char *host, const char *device, const char *kind, const char *platform, char *msg,
                     size_t msglen);
#endif
