/* weights_fused.c - see weights_fused.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.h"
#include "gemv.h"
#include "ggml_type.h"
#include "ns_util.h"
#include "weights_fused.h"

struct s_fused {
	const struct ns_model *m; /* borrowed */
	uint8_t **bytes;          /* (n_tensors) raw bytes of each tensor, owned */
	struct ns_pool *pool;     /* NULL for one thread */
	struct ns_kopts kopts;
	char err[NS_ERR_LEN];
};

static const struct ns_model_tensor *s_tensor(struct s_fused *s, uint32_t tensor)
{
	if (tensor >= s->m->n_tensors) {
		ns_errf(s->err, sizeof(s->err), "tensor index %u out of range", tensor);
		return NULL;
	}
	return &s->m->tensors[tensor];
}

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_fused *s = ctx;
	const struct ns_model_tensor *t = s_tensor(s, tensor);
	char tb[32];
	int rc;

	if (!t)
		return -EINVAL;
	if (ns_weights_check_window(t, row0, row_end, ldy, s->err, sizeof(s->err)))
		return -EINVAL;
	if (row0 == row_end || n_tok == 0)
		return 0;
	rc = ns_gemm_ex(s->pool, &s->kopts, t->type, s->bytes[tensor] + row0 * t->row_bytes,
			t->ne[0], row_end - row0, x, n_tok, y, ldy);
	if (rc < 0)
		ns_errf(s->err, sizeof(s->err), "%s (%s): kernel failed: %s", t->name,
			ns_type_name(t->type, tb, sizeof(tb)), strerror(-rc));
	return rc;
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_fused *s = ctx;
	const struct ns_model_tensor *t = s_tensor(s, tensor);
	char tb[32];

	if (!t)
		return -EINVAL;
	for (uint64_t i = 0; i < n; i++) {
		int rc;

		if (rows[i] < 0 || (uint64_t)rows[i] >= t->n_rows) {
			ns_errf(s->err, sizeof(s->err), "%s: row %lld out of range (%llu rows)",
				t->name, (long long)rows[i], (unsigned long long)t->n_rows);
			return -EINVAL;
		}
		rc = ns_dequant_rows(t->type, s->bytes[tensor] + (uint64_t)rows[i] * t->row_bytes,
				     t->ne[0], 1, dst + i * t->ne[0]);
		if (rc < 0) {
			ns_errf(s->err, sizeof(s->err), "%s: cannot dequantize type %s: %s",
				t->name, ns_type_name(t->type, tb, sizeof(tb)), strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* The whole window is one block of the RAM copy. */
static int s_visit(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   ns_weights_block_fn cb, void *cbctx)
{
	struct s_fused *s = ctx;
	const struct ns_model_tensor *t = s_tensor(s, tensor);

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

static const struct ns_weights_ops s_fused_ops = {
	.name = "fused",
	.matmul = s_matmul,
	.get_rows = s_get_rows,
	.visit = s_visit,
	.last_error = s_last_error,
	.destroy = s_destroy,
};

/* Read every tensor into s->bytes, as the model presents it (ns_model_read_rows: a
 * checkpoint's tensors as converted). */
static int s_load(struct s_fused *s, char *err, size_t errlen)
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
		rc = ns_model_read_rows(s->m, fds, t, 0, t->n_rows, s->bytes[i]);
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
	struct ns_weights *w = calloc(1, sizeof(*w));
	int n_threads = opts && opts->n_threads > 0 ? opts->n_threads : 1;
	int rc = 0;

	*out = NULL;
	if (!s || !w || !(s->bytes = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*s->bytes)))) {
		free(s);
		free(w);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->m = m;
	s->kopts.path = opts ? (enum ns_kpath)opts->kpath : NS_KPATH_AUTO;
	s->kopts.act = opts && opts->act == NS_ACT_Q8 ? NS_ACT_Q8 : NS_ACT_F32;
	if (!ns_kpath_supported(s->kopts.path)) {
		ns_errf(err, errlen, "kernel path %s is not supported on this CPU",
			ns_kpath_name(s->kopts.path));
		rc = -ENOTSUP;
	}
	if (rc == 0 && n_threads > 1 && !(s->pool = ns_pool_new(n_threads))) {
		ns_errf(err, errlen, "cannot start %d kernel threads", n_threads);
		rc = -ENOMEM;
	}
	if (rc == 0)
		rc = s_load(s, err, errlen);
	if (rc < 0) {
		s_destroy(s);
		free(w);
		return rc;
	}
	w->ops = &s_fused_ops;
	w->ctx = s;
	w->model = m;
	*out = w;
	return 0;
}
