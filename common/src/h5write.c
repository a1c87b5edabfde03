/* HDF5 writers' failure handling: the errno of a failed write, discarding the file (h5write.h). */
#include "h5write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static herr_t find_errno(unsigned n, const H5E_error2_t *e, void *user)
{
    (void)n;
    int *out = user;
    const char *p = e->desc ? strstr(e->desc, "errno = ") : NULL;
    int v;
    if (!*out && p && sscanf(p + 8, "%d", &v) == 1 && v > 0) *out = v;
    return 0;
}

int atsc_h5_errno(void)
{
    int v = 0;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, find_errno, &v);
    return v;
}

/* Where a discarded file's writes go: an anonymous in-memory file, which takes pwrite and ftruncate as
 * a regular file does (HDF5 truncates while closing), or else /dev/null (writes only). */
static int sink_fd(void)
{
    int fd = memfd_create("ats-discarded-hdf5", MFD_CLOEXEC);
    return fd >= 0 ? fd : open("/dev/null", O_WRONLY | O_CLOEXEC);
}

void atsc_h5_discard(hid_t file)
{
    if (file < 0 || H5Iis_valid(file) <= 0) return;
    hid_t fapl = H5Fget_access_plist(file);
    int sec2 = fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2;
    int *fd = NULL;
    if (sec2 && H5Fget_vfd_handle(file, fapl, (void **)&fd) >= 0 && fd && *fd >= 0) {
        int sink = sink_fd();
        if (sink >= 0) {
            dup3(sink, *fd, O_CLOEXEC); /* *fd keeps its number: HDF5 goes on using it */
            close(sink);
        }
    }
    if (fapl >= 0) H5Pclose(fapl);
}

void atsc_h5_no_atexit(void) { H5dont_atexit(); }
