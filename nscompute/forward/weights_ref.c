/* weights_ref.c - the reference weight provider: pread, dequantize, dot in double.
 *
 * Every call reads the rows it needs from the tensor's shard with pread (nothing is cached),
 * dequantizes them with ns_dequant_rows (bit-exact with ggml's to_float) and accumulates each
 * dot product in double precision, columns in order. Windows are walked in blocks of whole
 * rows of at most S_BLOCK_BYTES raw bytes, as the streamed provider will; visit hands out the
 * raw rows in the same blocks (the CUDA pass fills VRAM from them: a draft model on the cuda
 * backend, nscompute/compute_draft_cuda.c, so no RAM copy of the file is ever held). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ggml_type.h"
#include "ns_util.h"
#include "weights_provider.h"

#define S_BLOCK_BYTES (1u << 20)

struct s_ref {
	const struct ns_model *m; /* borrowed */
	int *fds;                 /* (n_shards) read-only descriptors, owned */
	uint8_t *raw;             /* (raw_cap) raw row bytes of one block */
	size_t raw_cap;
	float *rows;              /* (rows_cap) dequantized floats of one block */
	size_t rows_cap;
	void (*beat)(void *user); /* after each block visit reads; NULL: none */
	void *beat_user;
	char err[NS_ERR_LEN];
};

static int s_reserve(void **buf, size_t *cap, size_t need)
{
	void *p;

	if (need <= *cap)
		return 0;
	p = realloc(*buf, need);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = need;
	return 0;
}

/* Read and dequantize rows [row0, row0 + n) of t into r->rows. */
static int s_load_rows(struct s_ref *r, const struct ns_model_tensor *t, uint64_t row0,
		       uint64_t n)
{
	uint64_t raw_len, f_len;
	int rc;

	if (ns_mul_u64_overflow(n, t->row_bytes, &raw_len) ||
	    ns_mul_u64_overflow(n, t->ne[0], &f_len) ||
	    ns_mul_u64_overflow(f_len, sizeof(float), &f_len) || raw_len > SIZE_MAX) {
		ns_errf(r->err, sizeof(r->err), "%s: block size overflows", t->name);
		return -EOVERFLOW;
	}
	if (s_reserve((void **)&r->raw, &r->raw_cap, (size_t)raw_len) < 0 ||
	    s_reserve((void **)&r->rows, &r->rows_cap, (size_t)f_len) < 0) {
		ns_errf(r->err, sizeof(r->err), "%s: out of memory for a block", t->name);
		return -ENOMEM;
	}
	rc = ns_model_read_rows(r->m, r->fds, t, row0, n, r->raw); /* a checkpoint's too */
	if (rc < 0) {
		ns_errf(r->err, sizeof(r->err), "%s: reading rows %llu..%llu of %s: %s", t->name,
			(unsigned long long)row0, (unsigned long long)(row0 + n),
			r->m->shards[t->shard]->path, strerror(-rc));
		return rc;
	}
	return ns_weights_dequant(t, r->raw, n, r->rows, r->err, sizeof(r->err));
}

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_ref *r = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(r->m, tensor, r->err, sizeof(r->err));
	uint64_t n_cols, block;

	if (!t)
		return -EINVAL;
	n_cols = t->ne[0];
	if (ns_weights_check_window(t, row0, row_end, ldy, r->err, sizeof(r->err)))
		return -EINVAL;
	block = t->row_bytes ? S_BLOCK_BYTES / t->row_bytes : 1;
	if (block == 0)
		block = 1;
	for (uint64_t b0 = row0; b0 < row_end; b0 += block) {
		uint64_t nb = row_end - b0 < block ? row_end - b0 : block;
		int rc = s_load_rows(r, t, b0, nb);

		if (rc < 0)
			return rc;
		/* hot loop of the reference: one double dot per (token, row) */
		for (uint64_t i = 0; i < nb; i++) {
			const float *w = r->rows + i * n_cols; /* (n_cols) */

			for (uint64_t tk = 0; tk < n_tok; tk++) {
				const float *xv = x + tk * n_cols; /* (n_cols) */
				double acc = 0.0;

				for (uint64_t c = 0; c < n_cols; c++)
					acc += (double)w[c] * (double)xv[c];
				y[tk * ldy + (b0 + i - row0)] = (float)acc;
			}
		}
	}
	return 0;
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_ref *r = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(r->m, tensor, r->err, sizeof(r->err));

	if (!t)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		int rc = ns_weights_check_row(t, rows[i], r->err, sizeof(r->err));

		if (rc == 0)
			rc = s_load_rows(r, t, (uint64_t)rows[i], 1);
		if (rc < 0)
			return rc;
		memcpy(dst + i * t->ne[0], r->rows, (size_t)t->ne[0] * sizeof(float));
	}
	return 0;
}

/* Raw rows in blocks of at most S_BLOCK_BYTES (one row when a row is larger), read into r->raw
 * (so data is valid until the next block, as visit promises). */
static int s_visit(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   ns_weights_block_fn cb, void *cbctx)
{
	struct s_ref *r = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(r->m, tensor, r->err, sizeof(r->err));
	uint64_t block;

	if (!t)
		return -EINVAL;
	if (ns_weights_check_window(t, row0, row_end, UINT64_MAX, r->err, sizeof(r->err)))
		return -EINVAL;
	block = t->row_bytes && t->row_bytes <= S_BLOCK_BYTES ? S_BLOCK_BYTES / t->row_bytes : 1;
	for (uint64_t b0 = row0; b0 < row_end; b0 += block) {
		uint64_t nb = row_end - b0 < block ? row_end - b0 : block, len;
		int rc;

		if (ns_mul_u64_overflow(nb, t->row_bytes, &len) || len > SIZE_MAX) {
			ns_errf(r->err, sizeof(r->err), "%s: block size overflows", t->name);
			return -EOVERFLOW;
		}
		if (s_reserve((void **)&r->raw, &r->raw_cap, (size_t)len) < 0) {
			ns_errf(r->err, sizeof(r->err), "%s: out of memory for a block", t->name);
			return -ENOMEM;
		}
		rc = ns_model_read_rows(r->m, r->fds, t, b0, nb, r->raw);
		if (rc < 0) {
			ns_errf(r->err, sizeof(r->err), "%s: reading rows %llu..%llu of %s: %s",
				t->name, (unsigned long long)b0, (unsigned long long)(b0 + nb),
				r->m->shards[t->shard]->path, strerror(-rc));
			return rc;
		}
		if ((rc = cb(cbctx, b0, nb, r->raw)) != 0)
			return rc;
		if (r->beat)
			r->beat(r->beat_user);
	}
	return 0;
}

static const char *s_last_error(void *ctx)
{
	return ((struct s_ref *)ctx)->err;
}

static void s_destroy(void *ctx)
{
	struct s_ref *r = ctx;

	if (!r)
		return;
	if (r->fds) {
		for (uint32_t i = 0; i < r->m->n_shards; i++)
			if (r->fds[i] >= 0)
				close(r->fds[i]);
		free(r->fds);
	}
	free(r->raw);
	free(r->rows);
	free(r);
}

static const struct ns_weights_ops s_ref_ops = {
	.name = "ref",
	.matmul = s_matmul,
	.get_rows = s_get_rows,
	.visit = s_visit,
	.last_error = s_last_error,
	.destroy = s_destroy,
};

int ns_weights_ref_new(const struct ns_model *m, struct ns_weights **out, char *err,
		       size_t errlen)
{
	return ns_weights_ref_new_beat(m, NULL, NULL, out, err, errlen);
}

int ns_weights_ref_new_beat(const struct ns_model *m, void (*beat)(void *user), void *user,
			    struct ns_weights **out, char *err, size_t errlen)
{
	struct s_ref *r = calloc(1, sizeof(*r));

	*out = NULL;
	if (!r || !(r->fds = calloc(m->n_shards, sizeof(int)))) {
		free(r);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r->m = m;
	r->beat = beat;
	r->beat_user = user;
	for (uint32_t i = 0; i < m->n_shards; i++)
		r->fds[i] = -1;
	for (uint32_t i = 0; i < m->n_shards; i++) {
		r->fds[i] = open(m->shards[i]->path, O_RDONLY | O_CLOEXEC);
		if (r->fds[i] < 0) {
			int rc = -errno;

			ns_errf(err, errlen, "%s: %s", m->shards[i]->path, strerror(errno));
			s_destroy(r);
			return rc;
		}
	}
	return ns_weights_install(&s_ref_ops, r, m, out, err, errlen);
}
