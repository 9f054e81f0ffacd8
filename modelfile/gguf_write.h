/* gguf_write.h - GGUF v3 writer: any metadata, any tensors, deterministic bytes.
 *
 * Usage:
 *   struct ns_gguf_writer *w = ns_gguf_writer_new(32);
 *   ns_gguf_writer_set_str(w, "general.architecture", "llama");
 *   ns_gguf_writer_add_tensor(w, "tok_embd.weight", NS_TYPE_F32, 2, ne, data, nbytes);
 *   ns_gguf_writer_write_file(w, "out.gguf", err, sizeof(err));
 *   ns_gguf_writer_destroy(&w);
 *
 * Keys and tensors are written in insertion order; setting a key twice replaces its value in
 * place. Tensor data passed by pointer is copied unless added with _add_tensor_lazy, whose fill
 * callback produces the bytes while the file is written (for multi-GB generated models); a
 * lazy tensor with no fill callback is left a hole of zeros (a sparse file: tests of headers).
 * Writing the same content twice gives byte-identical files. */
#ifndef NS_GGUF_WRITE_H
#define NS_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

struct ns_gguf_writer;

/* Fill dst (n bytes at byte offset off within the tensor) with tensor data. Return 0 or -errno. */
typedef int (*ns_gguf_fill_fn)(void *ctx, uint64_t off, void *dst, size_t n);

struct ns_gguf_writer *ns_gguf_writer_new(uint32_t alignment);
void ns_gguf_writer_destroy(struct ns_gguf_writer **w);

int ns_gguf_writer_set_u32(struct ns_gguf_writer *w, const char *key, uint32_t v);
int ns_gguf_writer_set_i32(struct ns_gguf_writer *w, const char *key, int32_t v);
int ns_gguf_writer_set_u64(struct ns_gguf_writer *w, const char *key, uint64_t v);
int ns_gguf_writer_set_f32(struct ns_gguf_writer *w, const char *key, float v);
int ns_gguf_writer_set_bool(struct ns_gguf_writer *w, const char *key, bool v);
int ns_gguf_writer_set_str(struct ns_gguf_writer *w, const char *key, const char *s);
/* Any value, deep-copied (nested arrays included); lets a tool copy metadata between files. */
int ns_gguf_writer_set_value(struct ns_gguf_writer *w, const char *key,
			     const struct ns_gguf_value *v);
/* Numeric or bool array: n items of item_type, raw little-endian, copied. */
int ns_gguf_writer_set_arr(struct ns_gguf_writer *w, const char *key, uint32_t item_type,
			   const void *items, uint64_t n);
int ns_gguf_writer_set_arr_str(struct ns_gguf_writer *w, const char *key,
			       const char *const *strs, uint64_t n);

/* ne in ggml order (ne[0] = row length). The byte size is derived from type and ne. */
int ns_gguf_writer_add_tensor(struct ns_gguf_writer *w, const char *name, uint32_t type,
			      uint32_t n_dims, const uint64_t *ne, const void *data, size_t nbytes);
int ns_gguf_writer_add_tensor_lazy(struct ns_gguf_writer *w, const char *name, uint32_t type,
				   uint32_t n_dims, const uint64_t *ne, ns_gguf_fill_fn fill,
				   void *ctx);

uint64_t ns_gguf_writer_n_tensors(const struct ns_gguf_writer *w);

/* Write the whole file into a new temporary file beside path ("path.<random>", created
 * O_EXCL, so nothing else is ever truncated), then move it to path: write_file replaces what
 * path names, write_new fails with -EEXIST (and a line in err) when path exists, leaving it
 * untouched (the move is atomic either way: a reader sees the old file or the whole new one).
 * Returns 0 or -errno with a line in err; the temporary file never remains. */
int ns_gguf_writer_write_file(struct ns_gguf_writer *w, const char *path, char *err,
			      size_t errlen);
int ns_gguf_writer_write_new(struct ns_gguf_writer *w, const char *path, char *err,
			     size_t errlen);

#endif
