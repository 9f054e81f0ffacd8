/* weights.c - what every weight provider shares: its destruction (weights.h) and the setup
 * and checks of weights_provider.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dequant.h"
#include "ggml_type.h"
#include "ns_util.h"
#include "weights_provider.h"

const struct ns_model_tensor *ns_weights_tensor(const struct ns_model *m, uint32_t tensor,
						char *err, size_t errlen)
{
	if (tensor < m->n_tensors)
		return &m->tensors[tensor];
	ns_errf(err, errlen, "tensor index %u out of range", tensor);
	return NULL;
}

int ns_weights_check_window(const struct ns_model_tensor *t, uint64_t row0, uint64_t row_end,
			    uint64_t ldy, char *err, size_t errlen)
{
	if (row0 <= row_end && row_end <= t->n_rows && ldy >= row_end - row0)
		return 0;
	ns_errf(err, errlen, "%s: bad row window %llu..%llu of %llu", t->name,
		(unsigned long long)row0, (unsigned long long)row_end,
		(unsigned long long)t->n_rows);
	return -EINVAL;
}

int ns_weights_check_row(const struct ns_model_tensor *t, int64_t row, char *err,
			 size_t errlen)
{
	if (row >= 0 && (uint64_t)row < t->n_rows)
		return 0;
	ns_errf(err, errlen, "%s: row %lld out of range (%llu rows)", t->name, (long long)row,
		(unsigned long long)t->n_rows);
	return -EINVAL;
}

int ns_weights_dequant(const struct ns_model_tensor *t, const void *src, uint64_t n_rows,
		       float *dst, char *err, size_t errlen)
{
	char tb[32];
	int rc = ns_dequant_rows(t->type, src, t->ne[0], n_rows, dst);

	if (rc < 0)
		ns_errf(err, errlen, "%s: cannot dequantize type %s: %s", t->name,
			ns_type_name(t->type, tb, sizeof(tb)), strerror(-rc));
	return rc;
}

int ns_weights_gemm(struct ns_pool *pool, const struct ns_kopts *ko,
		    const struct ns_model_tensor *t, const void *w, uint64_t n_rows,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy, char *err,
		    size_t errlen)
{
	char tb[32];
	int rc = ns_gemm_ex(pool, ko, t->type, w, t->ne[0], n_rows, x, n_tok, y, ldy);

	if (rc < 0)
		ns_errf(err, errlen, "%s (%s): kernel failed: %s", t->name,
			ns_type_name(t->type, tb, sizeof(tb)), strerror(-rc));
	return rc;
}

int ns_weights_kernels(int n_threads, int kpath, int act, struct ns_kopts *ko,
		       struct ns_pool **pool, char *err, size_t errlen)
{
	*pool = NULL;
	ko->path = (enum ns_kpath)kpath;
	ko->act = act == NS_ACT_Q8 ? NS_ACT_Q8 : NS_ACT_F32;
	if (!ns_kpath_supported(ko->path)) {
		ns_errf(err, errlen, "kernel path %s is not supported on this CPU",
			ns_kpath_name(ko->path));
		return -ENOTSUP;
	}
	if (n_threads > 1 && !(*pool = ns_pool_new(n_threads))) {
		ns_errf(err, errlen, "cannot start %d kernel threads", n_threads);
		return -ENOMEM;
	}
	return 0;
}

int ns_weights_install(const struct ns_weights_ops *ops, void *ctx, const struct ns_model *m,
		       struct ns_weights **out, char *err, size_t errlen)
{
	struct ns_weights *w = calloc(1, sizeof(*w));

	*out = NULL;
	if (!w) {
		ops->destroy(ctx);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->ops = ops;
	w->ctx = ctx;
	w->model = m;
	*out = w;
	return 0;
}

void ns_weights_destroy(struct ns_weights **w)
{
	if (!w || !*w)
		return;
	if ((*w)->ops && (*w)->ops->destroy)
		(*w)->ops->destroy((*w)->ctx);
	free(*w);
	*w = NULL;
}
