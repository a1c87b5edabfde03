/* cli/cli_out.c — the CLI side of common/outfile: output flags checked before any work (cli.h). */
#include <string.h>

#include "atsc/outfile.h"
#include "cli.h"

int ats_cli_file_value(const char *cmd, const char *flag, const char *value)
{
    if (value && value[0] == '\0') { /* --hw "" looked for sim/hw/.json */
        ats_cli_error(cmd, "%s: empty value (a file name or a name)", flag);
        return ATS_EXIT_USAGE;
    }
    if (!value || value[0] != '-') return ATS_EXIT_OK;
    if (value[1] == '\0') /* no command of ats reads or writes a stream through a file flag */
        ats_cli_error(cmd, "%s: '-' (standard input or output) is not accepted here: give a file name (./- for "
                           "a file named '-')", flag);
    else if (flag[0] != '-') /* a positional argument (quantize's OUT), given after "--" */
        ats_cli_error(cmd, "%s: '%s' looks like an option; a file named like an option needs ./ before it", flag,
                      value);
    else
        ats_cli_error(cmd, "%s: missing value (got the option '%s'); a file named like an option needs ./ before it",
                      flag, value);
    return ATS_EXIT_USAGE;
}

int ats_cli_check_json_out(const char *cmd, const char *flag, const char *path, const char *what)
{
    int rc = ats_cli_check_out(cmd, flag, path);
    if (rc || !path) return rc;
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".json") == 0) return ATS_EXIT_OK;
    ats_cli_error(cmd, "%s: %s: %s is written as JSON: give a file name ending in .json", flag, path, what);
    return ATS_EXIT_USAGE;
}

int ats_cli_check_out(const char *cmd, const char *flag, const char *path)
{
    if (!path) return ATS_EXIT_OK; /* flag not given; "" is refused below */
    if (ats_cli_file_value(cmd, flag, path)) return ATS_EXIT_USAGE;
    ats_err err = {{0}};
    if (atsc_out_check(path, &err) == ATS_OK) return ATS_EXIT_OK;
    ats_cli_error(cmd, "%s: %s", flag, err.msg);
    return ATS_EXIT_USAGE;
}
