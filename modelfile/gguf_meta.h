/* gguf_meta.h - metadata built in memory as a struct ns_gguf, for models whose metadata does
 * not come from a GGUF header (a Hugging Face checkpoint's config.json and tokenizer.json,
 * translated into the keys llama.cpp's converter writes).
 *
 * The result is an ordinary struct ns_gguf with n_tensors 0: the typed getters, the
 * tokenizer and ns_gguf_close() work on it as on a parsed file. Values follow gguf.h's
 * conventions (strings NUL-terminated copies, arrays contiguous items), so ns_gguf_close()
 * frees them.
 *
 * Usage:
 *   struct ns_gguf *g = ns_gguf_meta_new(path, file_size);
 *   ns_gguf_meta_u32(g, "qwen35.block_count", 64);
 *   ...
 *   ns_gguf_close(&g);
 *
 * Setting a key twice replaces its value. Every setter returns 0 or -ENOMEM (the metadata is
 * then incomplete; the caller fails the open). */
#ifndef NS_GGUF_META_H
#define NS_GGUF_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* path and file_size describe the file the metadata stands for (messages name it). */
struct ns_gguf *ns_gguf_meta_new(const char *path, uint64_t file_size);

int ns_gguf_meta_u32(struct ns_gguf *g, const char *key, uint32_t v);
int ns_gguf_meta_i32(struct ns_gguf *g, const char *key, int32_t v);
int ns_gguf_meta_f32(struct ns_gguf *g, const char *key, float v);
int ns_gguf_meta_bool(struct ns_gguf *g, const char *key, bool v);
int ns_gguf_meta_str(struct ns_gguf *g, const char *key, const char *s, size_t len);
int ns_gguf_meta_arr_i32(struct ns_gguf *g, const char *key, const int32_t *v, uint64_t n);
/* A string array whose items (malloc'd NUL-terminated copies, as gguf.h's) the metadata takes
 * over, with the items array itself: on success and on failure alike the caller no longer
 * owns them. */
int ns_gguf_meta_take_arr_str(struct ns_gguf *g, const char *key, struct ns_gguf_str *items,
			      uint64_t n);

#endif
