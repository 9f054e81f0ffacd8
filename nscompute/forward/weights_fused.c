/* weights_fused.c - see weights_fused.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemv.h"
#include "ns_util.h"
#include "weights_fused.h"
#include "weights_provider.h"

struct s_fused {
	const struct ns_model *m; /* borrowed */
	uint8_t **bytes;          /* (n_tensors) raw bytes of each tensor, owned */
	struct ns_pool *pool;     /* NULL for one thread */
	struct ns_kopts kopts;
	char err[NS_ERR_LEN];
};

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_fused *s = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(s->m, tensor, s->err, sizeof(s->err));

	if (!t)
		return -EINVAL;
	if (ns_weights_check_window(t, row0, row_end, ldy, s->err, sizeof(s->err)))
		return -EINVAL;
	if (row0 == row_end || n_tok == 0)
		return 0;
	return ns_weights_gemm(s->pool, &s->kopts, t, s->bytes[tensor] + row0 * t->row_bytes,
			       row_end - row0, x, n_tok, y, ldy, s->err, sizeof(s->err));
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_fused *s = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(s->m, tensor, s->err, sizeof(s->err));

	if (!t)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		int rc = ns_weights_check_row(t, rows[i], s->err, sizeof(s->err));

		if (rc == 0)
			rc = ns_weights_dequant(t, s->bytes[tensor] + (uint64_t)rows[i] * t->row_bytes,
						1, dst + i * t->ne[0], s->err, sizeof(s->err));
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The whole window is one block of the RAM copy. */
static int s_visit(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   ns_weights_block_fn cb, void *cbctx)
{
	struct s_fused *s = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(s->m, tensor, s->err, sizeof(s->err));

	if (!t)
		return -EINVAL;
	if (ns_weights_check_window(t, row0, row_end, UINT64_MAX, s->err, sizeof(s->err)))
		return -EINVAL;
	if (row0 == row_end)
		return 0;
	return cb(cbctx, row0, row_end - row0, s->bytes[tensor] + row0 * t->row_bytes);
}

static const char *s_last_error(void *ctx)
{
	return ((struct s_fused *)ctx)->err;
}

static void s_destroy(void *ctx)
{
	struct s_fused *s = ctx;

	if (!s)
		return;
	if (s->bytes) {
		for (uint64_t i = 0; i < s->m->n_tensors; i++)
			free(s->bytes[i]);
		free(s->bytes);
	}
	ns_pool_destroy(&s->pool);
	free(s);
}

static struct ns_pool *s_pool(void *ctx)
{
	return ((struct s_fused *)ctx)->pool;
}

static const struct ns_weights_ops s_fused_ops = {
	.name = "fused",
	.matmul = s_matmul,
	.get_rows = s_get_rows,
	.visit = s_visit,
	.last_error = s_last_error,
	.pool = s_pool,
	.destroy = s_destroy,
};

/* Read every tensor into s->bytes, as the model presents it (ns_model_read_rows: a
 * checkpoint's tensors as converted). */
static int s_load(struct s_fused *s, const struct ns_weights_fused_opts *opts, char *err,
		  size_t errlen)
{
	int *fds = NULL;
	int rc = ns_model_open_fds(s->m, &fds, err, errlen);

	for (uint64_t i = 0; i < s->m->n_tensors && rc == 0; i++) {
		const struct ns_model_tensor *t = &s->m->tensors[i];

		if (t->n_bytes > SIZE_MAX || !(s->bytes[i] = malloc(t->n_bytes ? t->n_bytes : 1))) {
			ns_errf(err, errlen, "%s: out of memory for %llu bytes", t->name,
				(unsigned long long)t->n_bytes);
			rc = -ENOMEM;
			break;
		}
		rc = ns_model_read_tensor_sliced(s->m, fds, t, NS_MODEL_BEAT_SLICE,
						 opts ? opts->beat : NULL,
						 opts ? opts->beat_user : NULL, s->bytes[i]);
		if (rc < 0)
			ns_errf(err, errlen, "%s: reading %s: %s", s->m->shards[t->shard]->path,
				t->name, strerror(-rc));
	}
	ns_model_close_fds(s->m, &fds);
	return rc;
}

int ns_weights_fused_new(const struct ns_model *m, const struct ns_weights_fused_opts *opts,
			 struct ns_weights **out, char *err, size_t errlen)
{
	struct s_fused *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s || !(s->bytes = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*s->bytes)))) {
		free(s);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->m = m;
	rc = ns_weights_kernels(opts ? opts->n_threads : 1, opts ? opts->kpath : NS_KPATH_AUTO,
				opts ? opts->act : NS_ACT_F32, &s->kopts, &s->pool, err, errlen);
	if (rc == 0)
		rc = s_load(s, opts, err, errlen);
	if (rc < 0) {
		s_destroy(s);
		return rc;
	}
	return ns_weights_install(&s_fused_ops, s, m, out, err, errlen);
}
