/* gguf.h - bounded, validating reader of one GGUF file (v2 and v3).
 *
 * The reader parses the header (metadata and tensor infos) with bounded preads; it never maps
 * or reads the tensor data. Every count, length, offset and size product is checked for
 * overflow and against the file size before use, so a hostile file yields one error line
 * ("FILE: offset N: problem") and never a crash or an allocation larger than the header.
 *
 * Ownership: ns_gguf_open() returns a struct the caller frees with ns_gguf_close(&g), which
 * nulls the pointer. Every string and array reachable from it lives exactly as long as it. */
#ifndef NS_GGUF_H
#define NS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NS_GGUF_MAX_DIMS 4
#define NS_GGUF_DEFAULT_ALIGNMENT 32
/* Refuse headers larger than this: a real tokenizer is a few MiB; a bigger header is an attack. */
#define NS_GGUF_MAX_HEADER_BYTES (1ull << 30)

enum ns_gguf_vtype {
	NS_GGUF_U8 = 0,
	NS_GGUF_I8 = 1,
	NS_GGUF_U16 = 2,
	NS_GGUF_I16 = 3,
	NS_GGUF_U32 = 4,
	NS_GGUF_I32 = 5,
	NS_GGUF_F32 = 6,
	NS_GGUF_BOOL = 7,
	NS_GGUF_STRING = 8,
	NS_GGUF_ARRAY = 9,
	NS_GGUF_U64 = 10,
	NS_GGUF_I64 = 11,
	NS_GGUF_F64 = 12,
	NS_GGUF_VTYPE_COUNT = 13,
};

struct ns_gguf_str {
	uint64_t len;
	char *s; /* NUL-terminated copy; may contain embedded NULs, trust len */
};

/* A metadata value. Arrays hold their items contiguously:
 * numeric and bool items as the little-endian values of their width (bool: 1 byte),
 * STRING items as struct ns_gguf_str, ARRAY items as struct ns_gguf_value. */
struct ns_gguf_value {
	uint32_t type;
	union {
		uint64_t u64; /* U8, U16, U32, U64 */
		int64_t i64;  /* I8, I16, I32, I64 */
		double f64;   /* F32 (widened), F64 */
		bool b;
		struct ns_gguf_str str;
		struct {
			uint32_t item_type;
			uint64_t n;
			void *items;
		} arr;
	} v;
};

struct ns_gguf_kv {
	struct ns_gguf_str key;
	struct ns_gguf_value value;
	uint64_t file_offset; /* where the key starts, for messages */
};

struct ns_gguf_tensor {
	struct ns_gguf_str name;
	uint32_t n_dims;
	uint64_t ne[NS_GGUF_MAX_DIMS]; /* ggml order: ne[0] is the row length; unused dims are 1 */
	uint32_t type;                 /* ggml type id; may be one we cannot compute */
	uint64_t offset;               /* relative to the data section, as stored */
	uint64_t file_offset;          /* absolute: data_offset + offset */
	uint64_t n_elems;
	uint64_t n_rows;    /* ne[1] * ne[2] * ne[3] */
	uint64_t row_bytes; /* bytes of one row of ne[0] elements */
	uint64_t n_bytes;   /* row_bytes * n_rows */
};

struct ns_gguf {
	char *path;
	uint64_t file_size;
	uint32_t version;
	uint32_t alignment;
	uint64_t data_offset; /* absolute offset of the tensor data section */
	uint64_t n_kv;
	struct ns_gguf_kv *kv;
	uint64_t n_tensors;
	struct ns_gguf_tensor *tensors;
};

/* Open and validate path. On failure returns a negative errno-style code (-EINVAL for a
 * malformed file, -errno for I/O) and writes one line naming the file, the byte offset and the
 * problem into err. */
int ns_gguf_open(const char *path, struct ns_gguf **out, char *err, size_t errlen);
void ns_gguf_close(struct ns_gguf **g);

const struct ns_gguf_kv *ns_gguf_find(const struct ns_gguf *g, const char *key);
/* Index of the tensor of that name, or -1. Linear: models use ns_model's hash index. */
int64_t ns_gguf_find_tensor(const struct ns_gguf *g, const char *name);

/* Typed getters: return true and store the value if key exists with a compatible type
 * (any integer type for the integer getters when the value fits; F32/F64 for floats). */
bool ns_gguf_get_u64(const struct ns_gguf *g, const char *key, uint64_t *out);
bool ns_gguf_get_i64(const struct ns_gguf *g, const char *key, int64_t *out);
bool ns_gguf_get_f64(const struct ns_gguf *g, const char *key, double *out);
bool ns_gguf_get_bool(const struct ns_gguf *g, const char *key, bool *out);
const char *ns_gguf_get_str(const struct ns_gguf *g, const char *key); /* NULL if absent */
/* Array value of that key (any item type), or NULL. */
const struct ns_gguf_value *ns_gguf_get_arr(const struct ns_gguf *g, const char *key);

const char *ns_gguf_vtype_name(uint32_t type);
/* Size of one array item of a numeric/bool type, 0 for STRING/ARRAY/unknown. */
size_t ns_gguf_vtype_size(uint32_t type);
/* Numeric array item i as double / int64 (bounds unchecked: caller checks arr.n). */
double ns_gguf_arr_f64(const struct ns_gguf_value *arr, uint64_t i);
int64_t ns_gguf_arr_i64(const struct ns_gguf_value *arr, uint64_t i);

#endif
