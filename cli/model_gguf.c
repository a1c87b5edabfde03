/* The model of a --model value for the commands that build op graphs: a name or JSON file
 * (atsc_model_load + a recipe), or a GGUF file read through the executor's loader, whose per-tensor
 * types go to sched as a tensor-type table (ats_graph_opts.tensor_types). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "atsc/model_json.h"
#include "cli.h"
#include "ex/model.h"

int ats_cli_model_is_gguf(const char *value)
{
    size_t n = strlen(value);
    if (n >= 5 && strcmp(value + n - 5, ".gguf") == 0) return 1;
    struct stat sb;
    if (stat(value, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(value, "rb");
    if (!f) return 0;
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    return got == 4 && memcmp(magic, "GGUF", 4) == 0;
}

const char *ats_cli_quant_name(ats_recipe recipe, const ats_qtype *types)
{
    return types ? "gguf" : ats_recipe_name(recipe);
}

int ats_cli_load_model(const char *cmd, const char *model, const char *quant, char *path, size_t len,
                       ats_arch *arch, ats_recipe *recipe, ats_qtype **types)
{
    ats_err err = {{0}};
    *types = NULL;
    if (!ats_cli_model_is_gguf(model)) {
        ats_cli_model_path(model, path, len);
        if (atsc_model_load(path, arch, &err) != ATS_OK) {
            ats_cli_error(cmd, "%s", err.msg);
            return ATS_EXIT_USAGE;
        }
        *recipe = arch->default_recipe;
        if (quant && ats_recipe_from_name(quant, recipe) != ATS_OK) {
            ats_cli_error(cmd, "--quant: '%s' is not a known quantization (f32 f16 bf16 q8_0 q4_0 q4_k_m mxfp4)", quant);
            return ATS_EXIT_USAGE;
        }
        return ATS_EXIT_OK;
    }
    snprintf(path, len, "%s", model);
    if (quant) {
        ats_cli_error(cmd, "--quant: '%s' given with the GGUF file %s, whose tensors carry their own types "
                      "(drop --quant)", quant, model);
        return ATS_EXIT_USAGE;
    }
    ex_model *m = NULL;
    enum ats_status st = ex_model_load_gguf(model, &m, &err);
    if (st != ATS_OK) {
        if (st == ATS_ENOMEM) ats_cli_error(cmd, "%s: out of memory reading the GGUF header", model);
        else ats_cli_error(cmd, "%s", err.msg);
        return st == ATS_ENOMEM ? ATS_EXIT_FAIL : ATS_EXIT_USAGE;
    }
    *arch = m->arch;
    *recipe = arch->default_recipe;
    st = ex_model_tensor_types(m, types);
    ex_model_free(m);
    if (st != ATS_OK) {
        ats_cli_error(cmd, "%s: out of memory", model);
        return ATS_EXIT_FAIL;
    }
    return ATS_EXIT_OK;
}
