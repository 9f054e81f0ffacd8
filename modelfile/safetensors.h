/* safetensors.h - bounded, validating reader of one safetensors file's header.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
 * ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then
 * the tensor data; offsets are relative to the data (8 + N). The reader reads the header with
 * one bounded pread (never the data), parses it with jansson and checks every entry: a known
 * dtype, a shape whose byte size (overflow-checked) is exactly end - begin, a range inside
 * the file, no two tensors overlapping. A bad file gives one line "FILE: offset N: problem".
 *
 * Ownership: ns_st_open() returns a struct the caller frees with ns_st_close(&f), which nulls
 * the pointer; names live as long as it. */
#ifndef NS_SAFETENSORS_H
#define NS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

/* The format allows headers up to 100 MB (the reference implementation's limit). */
#define NS_ST_MAX_HEADER_BYTES (100ull << 20)
#define NS_ST_MAX_DIMS 8

enum ns_st_dtype {
	NS_ST_BOOL, NS_ST_U8, NS_ST_I8, NS_ST_F8_E4M3, NS_ST_F8_E5M2, NS_ST_I16, NS_ST_U16,
	NS_ST_F16, NS_ST_BF16, NS_ST_I32, NS_ST_U32, NS_ST_F32, NS_ST_I64, NS_ST_U64, NS_ST_F64,
	NS_ST_DTYPE_COUNT
};

struct ns_st_tensor {
	char *name;
	enum ns_st_dtype dtype;
	uint32_t n_dims;                /* 0 for a scalar */
	uint64_t shape[NS_ST_MAX_DIMS]; /* row-major, as written: shape[n_dims - 1] varies fastest */
	uint64_t n_elems;
	uint64_t file_offset;           /* absolute: data start + begin */
	uint64_t n_bytes;               /* end - begin */
};

struct ns_st_file {
	char *path;
	uint64_t file_size;
	uint64_t data_offset;           /* 8 + header length */
	uint64_t n_tensors;
	struct ns_st_tensor *tensors;   /* in the header's order */
};

int ns_st_open(const char *path, struct ns_st_file **out, char *err, size_t errlen);
void ns_st_close(struct ns_st_file **f);

/* Index of the tensor of that name, or -1 (linear). */
int64_t ns_st_find(const struct ns_st_file *f, const char *name);

const char *ns_st_dtype_name(enum ns_st_dtype t);
/* Bytes per element (1 for BOOL and the FP8 types). */
uint32_t ns_st_dtype_size(enum ns_st_dtype t);

#endif
