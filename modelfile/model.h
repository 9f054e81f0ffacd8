/* model.h - a model as one tensor index over one or more files: a GGUF (single or split) or a
 * Hugging Face safetensors checkpoint.
 *
 * ns_model_open() accepts a single GGUF or any shard of a split one
 * (NAME-0000K-of-0000N.gguf with split.count / split.no / split.tensors.count): it opens every
 * shard, checks that they belong together, and builds one index whose entries know their shard
 * and absolute offset. Metadata comes from shard 1 (split.no = 0), which carries it all.
 *
 * It also accepts a checkpoint directory, its model.safetensors, its
 * model.safetensors.index.json or any shard it names (hf_model.h): the shards are the
 * safetensors files, the metadata is config.json and tokenizer.json translated into the keys
 * llama.cpp's converter writes, and the tensors carry the converter's names, shapes and types.
 * Tensors the converter rewrites say how (struct ns_tensor_src): their rows are read through
 * ns_model_read_rows(), never as the bytes at file_offset.
 *
 * Ownership: the model owns its shards, names and index; ns_model_close(&m) frees them all and
 * nulls the pointer. Tensor pointers die with the model. */
#ifndef NS_MODEL_H
#define NS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

/* Rows row0 .. row0 + n_rows of a tensor lie one after another in one file from file_offset. */
struct ns_row_run {
	uint64_t row0, n_rows;
	uint32_t shard;
	uint64_t file_offset;
};

/* What a value of the file becomes (the converter's arithmetic, done in float32 as it does for
 * BF16 sources, in half precision for F16 ones). */
enum ns_src_op {
	NS_SRC_COPY = 0, /* the bytes as stored: the tensor's type is the file's */
	NS_SRC_WIDEN,    /* to F32 */
	NS_SRC_ADD_ONE,  /* 1 + w, to F32 (RMSNorm weights stored as offsets) */
	NS_SRC_NEG_EXP,  /* -exp(w), to F32 (A_log -> ssm_a) */
};

/* How the rows of a tensor the converter rewrites are found and made. The rows of the tensor
 * come from the runs (a row mapping: a permutation of whole rows costs no copy); within each
 * row, col_group > 0 reorders its elements in groups of col_group (group g of the tensor's row
 * is group col_from[g] of the file's row); then op turns the file's values into the tensor's. */
struct ns_tensor_src {
	uint32_t type;          /* element type in the file: F32, F16 or BF16 */
	uint64_t row_bytes;     /* bytes of one row in the file */
	enum ns_src_op op;
	uint32_t n_runs;        /* >= 1, in row order, covering every row */
	const struct ns_row_run *runs;
	uint32_t col_group;     /* 0: elements in file order */
	uint32_t n_col_groups;
	const uint32_t *col_from;
};

enum ns_model_format {
	NS_MODEL_GGUF = 0,
	NS_MODEL_SAFETENSORS,
};

struct ns_model_tensor {
	const char *name;    /* points into the owning shard's header (GGUF) or the model (HF) */
	uint32_t type;
	uint32_t n_dims;
	uint64_t ne[NS_GGUF_MAX_DIMS];
	uint32_t shard;      /* index into ns_model.shards */
	uint64_t file_offset; /* absolute offset inside that shard */
	uint64_t n_elems;
	uint64_t n_rows;     /* ne[1]*ne[2]*ne[3]: rows counted over all leading dims */
	uint64_t row_bytes;
	uint64_t n_bytes;
	/* NULL: n_bytes at file_offset in shard, as stored (every GGUF tensor). Else the rows
	 * are made as src says; shard/file_offset then name where row 0 starts in the file. */
	const struct ns_tensor_src *src;
};

struct ns_hf_store;

struct ns_model {
	enum ns_model_format format;
	uint32_t n_shards;
	struct ns_gguf **shards;   /* shards[0] holds the metadata */
	uint64_t n_tensors;
	struct ns_model_tensor *tensors; /* in shard order, then file order */
	uint64_t total_file_bytes;       /* sum of shard sizes */
	uint64_t total_tensor_bytes;
	/* open-addressing name index: slots hold tensor index + 1, 0 = empty */
	uint64_t n_slots;
	uint64_t *slots;
	struct ns_hf_store *hf;          /* a checkpoint's names and tensor sources; NULL for GGUF */
};

int ns_model_open(const char *path, struct ns_model **out, char *err, size_t errlen);

/* A process that builds no tokenizer (nsio, nsplan, nscompute, nsrouter) opens a checkpoint
 * without reading its tokenizer.json (Qwen3's 152k tokens and 151k merges take 0.4-0.8 s of
 * JSON parsing here, test_tok_json; Qwen3.5 has 248k tokens), so the model has no tokenizer.*
 * keys. GGUF models open whole either way. */
#define NS_MODEL_OPEN_NO_VOCAB 1u
int ns_model_open_flags(const char *path, unsigned flags, struct ns_model **out, char *err,
			size_t errlen);
/* The index over tensors already filled in (m->tensors, m->n_tensors): used by the readers of
 * both formats. -EINVAL with one line for a name that appears twice. */
int ns_model_build_index(struct ns_model *m, char *err, size_t errlen);
void ns_model_close(struct ns_model **m);

/* Append the tensors of *extra (a GGUF: a second file served beside the model, such as a
 * vision tower's mmproj) to m: its shards after m's, its tensors after m's (indices of m's own
 * tensors unchanged), one name index over both. On success *extra is consumed (freed, NULL)
 * and m owns its files; metadata stays m's (shard 0). On failure m and *extra are unchanged:
 * -EINVAL when extra is not a GGUF or a name appears in both (one line naming it), -ENOMEM,
 * -EOVERFLOW. */
int ns_model_append(struct ns_model *m, struct ns_model **extra, char *err, size_t errlen);

const struct ns_model_tensor *ns_model_find(const struct ns_model *m, const char *name);
/* Index of a tensor, or -1. */
int64_t ns_model_find_index(const struct ns_model *m, const char *name);

/* A vocabulary of n_tokens tokens against the tensors it indexes: token_embd.weight and
 * output.weight (where present) must have exactly n_tokens rows, as llama.cpp requires. With
 * fewer tokens the model samples ids no token spells; with more, prompt ids past the rows.
 * Returns 0, or -EINVAL with one line in err naming the file and the tensor. */
int ns_model_check_vocab(const struct ns_model *m, uint64_t n_tokens, char *err, size_t errlen);

/* Read rows [row0, row0 + nrows) of tensor t as the model presents them (its type and
 * row_bytes: nrows * row_bytes bytes) into dst. fds holds one descriptor per shard opened
 * without O_DIRECT (any offset, any length). A plain tensor is one pread; a tensor with a
 * source follows its runs, groups and op. Returns 0, -EINVAL for rows outside the tensor,
 * -EIO when a file ends before the bytes (cut short since the open), -ENOMEM, or -errno. */
int ns_model_read_rows(const struct ns_model *m, const int *fds, const struct ns_model_tensor *t,
		       uint64_t row0, uint64_t nrows, void *dst);

/* A whole tensor read in slices of at most slice_bytes (one row at least), beat(user) called
 * after each: a process that reads a large set into RAM before its first request (a draft
 * model, an MTP block) keeps its heartbeat moving however slow the drive, so a supervisor's
 * stall watch does not take the load for a hang (docs/decisions.md, Stalls). beat may be NULL.
 * NS_MODEL_BEAT_SLICE is the slice the engine uses: 64 MiB, well under a second on any drive
 * we stream from. Returns as ns_model_read_rows. */
#define NS_MODEL_BEAT_SLICE (64ull << 20)
int ns_model_read_tensor_sliced(const struct ns_model *m, const int *fds,
				const struct ns_model_tensor *t, uint64_t slice_bytes,
				void (*beat)(void *user), void *user, void *dst);

/* True when rows [row0, row0 + nrows) of t are stored as the tensor presents them, one after
 * another in one file: *shard and *file_offset then say where row0 starts, and a reader may
 * fetch them in one read of nrows * row_bytes bytes (O_DIRECT included). False for rows that
 * need ns_model_read_rows (a source with an op or column groups, or rows across runs). */
bool ns_model_rows_plain(const struct ns_model_tensor *t, uint64_t row0, uint64_t nrows,
			 uint32_t *shard, uint64_t *file_offset);

/* Open every shard for ns_model_read_rows (read-only, close-on-exec, no O_DIRECT) into a
 * malloc'd array the caller passes to ns_model_close_fds(). Returns 0 or -errno with a line. */
int ns_model_open_fds(const struct ns_model *m, int **fds, char *err, size_t errlen);
void ns_model_close_fds(const struct ns_model *m, int **fds);

/* Metadata of the model (shard 0). */
static inline const struct ns_gguf *ns_model_meta(const struct ns_model *m)
{
	return m->shards[0];
}

#endif
