/*
 * ex/gguf.h — GGUF (version 2 and 3) reader, memory-mapped, and a small writer.
 *
 * Layout: ../shared/models/QUANT_FORMATS.md §1 (ggml docs/gguf.md). ex_gguf_open() maps the file,
 * parses header, metadata and tensor infos, and checks every field against the file: counts fit the
 * bytes left, strings and arrays stay inside the file, types are known, n_dims <= 4, each row width
 * divides into blocks, each tensor's offset is aligned and offset + size lies inside the data
 * section. Any failure returns ATS_EINVAL with one line in `err` naming the file, the field (key or
 * tensor name and index) and the offending value; it never crashes on any input (fuzzed:
 * exec/fuzz/). Tensor data pointers then point into the mapping.
 *
 * Lifecycle: ex_gguf_open (or ex_gguf_open_mem over a caller buffer) → queries → ex_gguf_free.
 * A handle is immutable after opening; concurrent readers are fine.
 */
#ifndef EX_GGUF_H
#define EX_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "ats/quant.h"
#include "ats/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** GGUF metadata value types (spec ids). */
typedef enum ex_gguf_vtype {
    EX_GGUF_U8 = 0, EX_GGUF_I8 = 1, EX_GGUF_U16 = 2, EX_GGUF_I16 = 3, EX_GGUF_U32 = 4,
    EX_GGUF_I32 = 5, EX_GGUF_F32 = 6, EX_GGUF_BOOL = 7, EX_GGUF_STRING = 8, EX_GGUF_ARRAY = 9,
    EX_GGUF_U64 = 10, EX_GGUF_I64 = 11, EX_GGUF_F64 = 12
} ex_gguf_vtype;

#define EX_GGUF_NAME_MAX 64 /* bytes of a tensor name (spec limit) */

/** One tensor info, validated. data points into the mapping (borrowed from the handle). */
typedef struct ex_gguf_tensor {
    char name[EX_GGUF_NAME_MAX + 1];
    uint32_t n_dims;
    int64_t ne[4];   /* ne[0] contiguous; unused dims are 1 */
    ats_qtype type;
    uint64_t offset; /* relative to the data section [bytes] */
    uint64_t bytes;  /* exact size [bytes] */
    const void *data;
} ex_gguf_tensor;

typedef struct ex_gguf ex_gguf;

/** Opens and validates `path` (mmap, read-only). *out is new (free with ex_gguf_free).
 *  ATS_EINVAL (message in err) on any malformed content; ATS_ENOTFOUND when it cannot be opened. */
enum ats_status ex_gguf_open(const char *path, ex_gguf **out, ats_err *err);

/** Same over a caller buffer of `len` bytes (borrowed; must outlive the handle). `name` is used
 *  in messages. */
enum ats_status ex_gguf_open_mem(const void *buf, size_t len, const char *name, ex_gguf **out,
                                 ats_err *err);

void ex_gguf_free(ex_gguf *g);

uint32_t ex_gguf_version(const ex_gguf *g);
uint64_t ex_gguf_alignment(const ex_gguf *g);   /* [bytes] */
uint64_t ex_gguf_data_offset(const ex_gguf *g); /* start of the data section in the file [bytes] */
const char *ex_gguf_path(const ex_gguf *g);

int64_t ex_gguf_n_tensors(const ex_gguf *g);
const ex_gguf_tensor *ex_gguf_tensor_at(const ex_gguf *g, int64_t i);
/** Tensor by name, NULL when absent. */
const ex_gguf_tensor *ex_gguf_find_tensor(const ex_gguf *g, const char *name);

int64_t ex_gguf_n_kv(const ex_gguf *g);
const char *ex_gguf_kv_key(const ex_gguf *g, int64_t i);
ex_gguf_vtype ex_gguf_kv_type(const ex_gguf *g, int64_t i);
/** Index of a key, or ATS_ENOTFOUND. */
enum ats_status ex_gguf_find_kv(const ex_gguf *g, const char *key, int64_t *index);
/** The raw bytes of KV i in the file (key, type and value), for copying it to another file. */
void ex_gguf_kv_raw(const ex_gguf *g, int64_t i, const void **bytes, size_t *len);

/** Scalar getters by key: any integer type converts to int64 (bool too), any float or integer to
 *  double. ATS_ENOTFOUND when absent, ATS_EINVAL (message) when the type does not convert. */
enum ats_status ex_gguf_get_int(const ex_gguf *g, const char *key, int64_t *out, ats_err *err);
enum ats_status ex_gguf_get_double(const ex_gguf *g, const char *key, double *out, ats_err *err);
/** String value: *s points into the mapping (not NUL-terminated), *len bytes. */
enum ats_status ex_gguf_get_str(const ex_gguf *g, const char *key, const char **s, size_t *len,
                                ats_err *err);
/** Array value: element type and count. */
enum ats_status ex_gguf_get_arr(const ex_gguf *g, const char *key, ex_gguf_vtype *elem_type,
                                uint64_t *count, ats_err *err);
/** Element i of an array of strings (pointer into the mapping, len bytes). */
enum ats_status ex_gguf_arr_str(const ex_gguf *g, const char *key, uint64_t i, const char **s,
                                size_t *len);
/** Element i of a numeric array as double. */
enum ats_status ex_gguf_arr_num(const ex_gguf *g, const char *key, uint64_t i, double *out);

/* ---- writer ------------------------------------------------------------------------------ */

/** One tensor to write: name, shape (n_dims, ne), type and its bytes (borrowed). */
typedef struct ex_gguf_out_tensor {
    const char *name;
    uint32_t n_dims;
    int64_t ne[4];
    ats_qtype type;
    const void *data;
    uint64_t bytes;
} ex_gguf_out_tensor;

/** Writes a GGUF v3 file: the raw KV entries `kv_raw[i]` (kv_len[i] bytes each, as returned by
 *  ex_gguf_kv_raw, or built with ex_gguf_kv_u32), then the tensor infos and the data aligned to
 *  `alignment` bytes. Written through atsc/outfile.h (checked
 *  path, "<path>.tmp.<pid>", fsync, rename; special files refused). ATS_EINVAL (message) on I/O errors. */
enum ats_status ex_gguf_write(const char *path, int64_t n_kv, const void *const *kv_raw,
                              const size_t *kv_len, int64_t n_tensors, const ex_gguf_out_tensor *t,
                              uint64_t alignment, ats_err *err);

/** Fills tensor i's bytes (bytes of them) into dst for ex_gguf_write_fill; ATS_OK, or a status with
 *  err set (the write then stops and nothing is left at the path). */
typedef enum ats_status (*ex_gguf_fill_fn)(void *ctx, int64_t i, void *dst, uint64_t bytes, ats_err *err);

/** ex_gguf_write with each tensor's data made when it is written: t[i].data is ignored and fill(ctx,
 *  i, buf, t[i].bytes) writes it into one buffer of the largest tensor's size, so a file far larger
 *  than memory can be written (`ats quantize --dummy-weights`). Tensors are filled in order 0..n-1,
 *  each once. Statuses: ex_gguf_write's, ATS_ENOMEM for the buffer, or fill's. */
enum ats_status ex_gguf_write_fill(const char *path, int64_t n_kv, const void *const *kv_raw,
                                   const size_t *kv_len, int64_t n_tensors, const ex_gguf_out_tensor *t,
                                   uint64_t alignment, ex_gguf_fill_fn fill, void *fill_ctx, ats_err *err);

/** Encodes a uint32 KV entry into buf (needs 8 + strlen(key) + 8 bytes); returns its length. */
size_t ex_gguf_kv_u32(void *buf, const char *key, uint32_t value);

#ifdef __cplusplus
}
#endif
#endif
