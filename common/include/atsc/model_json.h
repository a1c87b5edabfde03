/*
 * atsc/model_json.h — loads a model architecture description (models/<name>.json) into an ats_arch.
 *
 * The JSON keys are those of the model's Hugging Face config.json (hidden_size, num_hidden_layers, …)
 * plus a few ATS keys for architecture specials (qk_norm, sandwich_norm, …), `default_quant` (a
 * recipe name such as "q4_k_m") and a mandatory `source`. models/README.md lists every key.
 * Unknown keys are refused (a typo must not silently become a default).
 */
#ifndef ATSC_MODEL_JSON_H
#define ATSC_MODEL_JSON_H

#include "ats/arch.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Reads `path` and fills `out` (caller-owned). The model's name is the file stem. On failure returns
 * ATS_EINVAL (or ATS_ENOTFOUND for an unreadable file) and writes one line to err of the form
 * "models/x.json: field 'hidden_size': -5 (must be > 0)" or "models/x.json:3:7: JSON syntax error: …".
 * Thread-safe.
 */
enum ats_status atsc_model_load(const char *path, ats_arch *out, ats_err *err);

#ifdef __cplusplus
}
#endif
#endif
