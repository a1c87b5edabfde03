/*
 * ex/tokenizer.h — SentencePiece-style BPE tokenizer built from a GGUF vocabulary
 * (tokenizer.ggml.tokens / scores / token_type, model "llama"), with byte fallback.
 *
 * Encoding follows llama2.c's encode(): optional BOS, a dummy-prefix space, spaces written as U+2581
 * ("▁"), each UTF-8 character mapped to its token or, when absent, to its bytes' "<0xNN>" tokens,
 * then the pair with the highest merge score is merged until no pair is in the vocabulary.
 * Decoding maps "▁" back to a space, "<0xNN>" to the byte, and drops the leading space of the
 * first piece after BOS. Lifecycle: ex_tokenizer_from_gguf → encode/decode → ex_tokenizer_free.
 * Read-only after construction; thread-safe.
 */
#ifndef EX_TOKENIZER_H
#define EX_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "ats/status.h"
#include "ex/gguf.h"
#include "ex/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Builds the tokenizer from g's metadata (copied; g may be freed afterwards). */
enum ats_status ex_tokenizer_from_gguf(const ex_gguf *g, ex_tokenizer **out, ats_err *err);
void ex_tokenizer_free(ex_tokenizer *t);

int64_t ex_tokenizer_n_vocab(const ex_tokenizer *t);

/** Encodes text (NUL-terminated UTF-8). tokens has room for cap ids; *n_out receives the count.
 *  ATS_ERANGE when cap is too small. */
enum ats_status ex_tokenizer_encode(const ex_tokenizer *t, const char *text, int add_bos,
                                    int32_t *tokens, int64_t cap, int64_t *n_out);

/** The bytes of token `id` as text, given the previous token (for the space after BOS): writes
 *  into buf (NUL-terminated, truncated to cap) and returns the byte count (0 for control tokens). */
size_t ex_tokenizer_decode(const ex_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
