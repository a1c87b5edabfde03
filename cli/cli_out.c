/* cli/cli_out.c — the CLI side of common/outfile: output flags checked before any work (cli.h). */
#include "atsc/outfile.h"
#include "cli.h"

int ats_cli_check_out(const char *cmd, const char *flag, const char *path)
{
    if (!path) return ATS_EXIT_OK; /* flag not given; "" is refused below */
    ats_err err = {{0}};
    if (atsc_out_check(path, &err) == ATS_OK) return ATS_EXIT_OK;
    ats_cli_error(cmd, "%s: %s", flag, err.msg);
    return ATS_EXIT_USAGE;
}
