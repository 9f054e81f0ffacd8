/* weights_stream.c - see weights_stream.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "gemv.h"
#include "ns_util.h"
#include "ram_seg.h"
#include "weights_provider.h"
#include "weights_stream.h"

struct s_stream {
	const struct ns_model *m; /* borrowed */
	struct ns_client *c;      /* borrowed */
	uint32_t *cidx;           /* (n_tensors) nsio's index of each model tensor */
	struct ns_pool *pool;     /* NULL for one thread */
	struct ns_kopts kopts;
	uint64_t block_rows;
	uint32_t lookahead;
	struct ns_weights_stream_stats st;
	char err[NS_ERR_LEN];
	/* RAM tier (shm/ram_seg.h): tables checked and copied once, data mapped read-only */
	char session[32];         /* "" when not asked for */
	int ram_state;            /* 0: not yet known, 1: mapped, 2: none */
	struct ns_ram_view ram;
	void (*on_ram_map)(void *ctx, const void *base, size_t bytes, bool mapped);
	void *on_ram_map_ctx;
	void (*on_window)(void *ctx, uint32_t tensor);
	void *on_window_ctx;
};

static struct ns_pool *s_pool(void *ctx)
{
	return ((struct s_stream *)ctx)->pool;
}

static const struct ns_weights_ops s_stream_ops;

/* State of one streamed call, handed to the block callbacks. */
struct s_call {
	struct s_stream *s;
	const struct ns_model_tensor *t;
	uint64_t row0;      /* first row of the window */
	const float *x;     /* (n_tok, n_cols) */
	uint64_t n_tok;
	float *y;           /* matmul: (n_tok, ldy); get_rows: (n, n_cols) at dst row 0 */
	uint64_t ldy;
	ns_weights_block_fn visit_cb; /* visit: the caller's callback and its context */
	void *visit_ctx;
	uint64_t kernel_ns; /* time inside the kernels */
};

static int s_check_block(struct s_call *k, const struct ns_block *b)
{
	uint64_t want;

	if (ns_mul_u64_overflow(b->nrows, k->t->row_bytes, &want) || b->nbytes != want ||
	    b->row0 < k->row0 || !b->data) {
		ns_errf(k->s->err, sizeof(k->s->err), "%s: nsio delivered a bad block "
			"(rows %llu+%llu, %llu bytes)", k->t->name, (unsigned long long)b->row0,
			(unsigned long long)b->nrows, (unsigned long long)b->nbytes);
		return -EPROTO;
	}
	k->s->st.blocks++;
	k->s->st.bytes += b->nbytes;
	return 0;
}

/* matmul block: rows [b->row0, b->row0 + b->nrows) of y, from the arena bytes. */
static int s_mm_block(void *ctx, const struct ns_block *b)
{
	struct s_call *k = ctx;
	uint64_t t0;
	int rc = s_check_block(k, b);

	if (rc)
		return rc;
	t0 = ns_now_ns();
	rc = ns_weights_gemm(k->s->pool, &k->s->kopts, k->t, b->data, b->nrows, k->x, k->n_tok,
			     k->y + (b->row0 - k->row0), k->ldy, k->s->err, sizeof(k->s->err));
	k->kernel_ns += ns_now_ns() - t0;
	return rc;
}

/* get_rows block: dequantize into consecutive rows of y. */
static int s_rows_block(void *ctx, const struct ns_block *b)
{
	struct s_call *k = ctx;
	int rc = s_check_block(k, b);

	if (rc)
		return rc;
	return ns_weights_dequant(k->t, b->data, b->nrows, k->y + (b->row0 - k->row0) * k->t->ne[0],
				  k->s->err, sizeof(k->s->err));
}

/* visit block: the caller's callback on the arena (or RAM tier) bytes. */
static int s_visit_block(void *ctx, const struct ns_block *b)
{
	struct s_call *k = ctx;
	uint64_t t0;
	int rc = s_check_block(k, b);

	if (rc)
		return rc;
	t0 = ns_now_ns();
	rc = k->visit_cb(k->visit_ctx, b->row0, b->nrows, b->data);
	k->kernel_ns += ns_now_ns() - t0;
	return rc;
}

static bool s_ram_tensor(void *ctx, uint64_t t, uint64_t *n_rows, uint64_t *row_bytes)
{
	const struct ns_model *m = ctx;

	if (t >= m->n_tensors)
		return false;
	*n_rows = m->tensors[t].n_rows;
	*row_bytes = m->tensors[t].row_bytes;
	return true;
}

/* Find nsio's RAM segment: taken once it is ready; given up on once a block has come from
 * nsio without it (nsio serves nothing before its RAM tier is loaded). A segment that is not
 * ours or does not fit the model stops the pass (-EPERM / -EPROTO, the line in s->err). */
static int s_ram_attach(struct s_stream *s)
{
	int rc;

	if (s->ram_state || !s->session[0])
		return 0;
	rc = ns_ram_view_open(&s->ram, s->session, s->m->n_tensors, s_ram_tensor, (void *)s->m,
			      s->err, sizeof(s->err));
	if (rc == -EPERM || rc == -EPROTO)
		return rc;
	if (rc) { /* absent, or still loading: look again next call */
		if (rc != -EAGAIN && s->st.blocks)
			s->ram_state = 2;
		s->err[0] = 0;
		return 0;
	}
	s->ram_state = 1;
	if (s->on_ram_map)
		s->on_ram_map(s->on_ram_map_ctx, s->ram.seg.base, s->ram.seg.size, true);
	return 0;
}

/* Resident rows at the start of [row0, row0 + n) of tensor t: count, *src their bytes. */
static uint64_t s_ram_prefix(struct s_stream *s, uint32_t t, uint64_t row0, uint64_t n,
			     const uint8_t **src)
{
	uint64_t have;

	if (s->ram_state != 1 || row0 >= s->ram.rows[t])
		return 0;
	have = s->ram.rows[t] - row0;
	*src = s->ram.data + s->ram.off[t] + row0 * s->m->tensors[t].row_bytes;
	return have < n ? have : n;
}

/* Run fn on the resident prefix of k's window [k->row0, *row_end) as one block from the RAM
 * tier; k->row0 and k->y move past it (y_step floats per row). */
static int s_ram_part(struct s_stream *s, struct s_call *k, uint64_t row_end, ns_block_fn fn,
		      uint64_t y_step)
{
	uint32_t ti = (uint32_t)(k->t - s->m->tensors);
	const uint8_t *src = NULL;
	struct ns_block b;
	uint64_t n;
	int rc = s_ram_attach(s);

	if (rc < 0)
		return rc;
	n = s_ram_prefix(s, ti, k->row0, row_end - k->row0, &src);
	if (!n)
		return 0;
	b = (struct ns_block){ .data = src, .nbytes = n * k->t->row_bytes, .tensor = ti,
			       .row0 = k->row0, .nrows = n };
	rc = fn(k, &b);
	if (rc < 0)
		return rc;
	k->row0 += n;
	if (y_step)
		k->y += n * y_step;
	return 0;
}

/* Stream [row0, row_end) of a tensor through fn; error text for stream-level failures. */
static int s_run(struct s_stream *s, struct s_call *k, uint64_t row_end, ns_block_fn fn)
{
	uint32_t ti = (uint32_t)(k->t - s->m->tensors);
	uint64_t t0 = ns_now_ns();
	int rc;

	s->err[0] = 0;
	rc = ns_stream_linear(s->c, s->cidx[ti], k->row0, row_end, s->block_rows, s->lookahead,
			      fn, k);
	s->st.wait_ns += ns_now_ns() - t0 - k->kernel_ns;
	if (rc < 0 && !s->err[0]) {
		if (rc == -ENOSPC) {
			char e[NS_ERR_LEN];
			uint64_t rows;

			ns_stream_block_rows(s->c, s->cidx[ti], s->block_rows, s->lookahead, &rows,
					     e, sizeof(e));
			ns_errf(s->err, sizeof(s->err), "%s", e);
		} else {
			ns_errf(s->err, sizeof(s->err), "streaming %s rows %llu..%llu through "
				"nsio: %s", k->t->name, (unsigned long long)k->row0,
				(unsigned long long)row_end,
				rc == -EPIPE ? "nsio is gone" : strerror(-rc));
		}
	}
	return rc;
}

/* [k->row0, row_end) through fn: the RAM-resident prefix in place, the rest streamed. */
static int s_window(struct s_stream *s, struct s_call *k, uint64_t row_end, ns_block_fn fn,
		    uint64_t y_step)
{
	int rc;

	ns_client_beat(s->c); /* a product is progress, even of weights in RAM (heartbeat) */
	if (s->on_window)
		s->on_window(s->on_window_ctx, (uint32_t)(k->t - s->m->tensors));
	rc = s_ram_part(s, k, row_end, fn, y_step);

	if (rc < 0 || k->row0 == row_end)
		return rc;
	return s_run(s, k, row_end, fn);
}

static int s_matmul(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		    const float *x, uint64_t n_tok, float *y, uint64_t ldy)
{
	struct s_stream *s = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(s->m, tensor, s->err, sizeof(s->err));
	struct s_call k;

	if (!t)
		return -EINVAL;
	if (ns_weights_check_window(t, row0, row_end, ldy, s->err, sizeof(s->err)))
		return -EINVAL;
	if (row0 == row_end || n_tok == 0)
		return 0;
	k = (struct s_call){ .s = s, .t = t, .row0 = row0, .x = x, .n_tok = n_tok, .y = y,
			     .ldy = ldy };
	return s_window(s, &k, row_end, s_mm_block, 1);
}

static int s_visit(void *ctx, uint32_t tensor, uint64_t row0, uint64_t row_end,
		   ns_weights_block_fn cb, void *cbctx)
{
	struct s_stream *s = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(s->m, tensor, s->err, sizeof(s->err));
	struct s_call k;

	if (!t)
		return -EINVAL;
	if (ns_weights_check_window(t, row0, row_end, UINT64_MAX, s->err, sizeof(s->err)))
		return -EINVAL;
	if (row0 == row_end)
		return 0;
	k = (struct s_call){ .s = s, .t = t, .row0 = row0, .visit_cb = cb, .visit_ctx = cbctx };
	return s_window(s, &k, row_end, s_visit_block, 0);
}

static int s_get_rows(void *ctx, uint32_t tensor, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_stream *s = ctx;
	const struct ns_model_tensor *t = ns_weights_tensor(s->m, tensor, s->err, sizeof(s->err));

	if (!t)
		return -EINVAL;
	for (uint64_t i = 0; i < n;) {
		uint64_t j = i + 1;
		struct s_call k;
		int rc;

		if (ns_weights_check_row(t, rows[i], s->err, sizeof(s->err)))
			return -EINVAL;
		/* a run of consecutive rows is one stream */
		while (j < n && rows[j] == rows[j - 1] + 1 && (uint64_t)rows[j] < t->n_rows)
			j++;
		k = (struct s_call){ .s = s, .t = t, .row0 = (uint64_t)rows[i],
				     .y = dst + i * t->ne[0] };
		rc = s_window(s, &k, (uint64_t)rows[j - 1] + 1, s_rows_block, t->ne[0]);
		if (rc < 0)
			return rc;
		i = j;
	}
	return 0;
}

static const char *s_last_error(void *ctx)
{
	return ((struct s_stream *)ctx)->err;
}

static void s_destroy(void *ctx)
{
	struct s_stream *s = ctx;

	if (!s)
		return;
	free(s->cidx);
	ns_pool_destroy(&s->pool);
	if (s->ram_state == 1 && s->on_ram_map)
		s->on_ram_map(s->on_ram_map_ctx, s->ram.seg.base, s->ram.seg.size, false);
	ns_ram_view_close(&s->ram);
	free(s);
}

static const struct ns_weights_ops s_stream_ops = {
	.name = "stream",
	.matmul = s_matmul,
	.get_rows = s_get_rows,
	.visit = s_visit,
	.last_error = s_last_error,
	.pool = s_pool,
	.destroy = s_destroy,
};

/* Match every model tensor with nsio's table (same name, type, rows and row bytes). */
static int s_map_tensors(struct s_stream *s, char *err, size_t errlen)
{
	for (uint64_t i = 0; i < s->m->n_tensors; i++) {
		const struct ns_model_tensor *t = &s->m->tensors[i];
		int64_t ci = ns_client_find_tensor(s->c, t->name);
		struct ns_client_tensor ct;

		if (ci < 0 || ci > UINT32_MAX || ns_client_tensor(s->c, (uint64_t)ci, &ct) ||
		    ct.type != t->type || ct.n_rows != t->n_rows || ct.row_bytes != t->row_bytes) {
			ns_errf(err, errlen, "tensor %s: nsio serves %s", t->name,
				ci < 0 ? "no tensor of that name" : "a different shape or type "
				"(another model?)");
			return -EINVAL;
		}
		s->cidx[i] = (uint32_t)ci;
	}
	return 0;
}

int ns_weights_stream_new(const struct ns_model *m, struct ns_client *c,
			  const struct ns_weights_stream_opts *opts, struct ns_weights **out,
			  char *err, size_t errlen)
{
	struct s_stream *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s || !(s->cidx = calloc(m->n_tensors ? m->n_tensors : 1, sizeof(*s->cidx)))) {
		free(s);
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->m = m;
	s->c = c;
	s->block_rows = opts ? opts->block_rows : 0;
	if (opts && opts->session)
		snprintf(s->session, sizeof(s->session), "%s", opts->session);
	if (opts) {
		s->on_ram_map = opts->on_ram_map;
		s->on_ram_map_ctx = opts->on_ram_map_ctx;
		s->on_window = opts->on_window;
		s->on_window_ctx = opts->on_window_ctx;
	}
	s->lookahead = opts ? opts->lookahead : ns_client_default_lookahead(c);
	rc = ns_weights_kernels(opts ? opts->n_threads : 1, NS_KPATH_AUTO,
				opts ? opts->act : NS_ACT_F32, &s->kopts, &s->pool, err, errlen);
	if (rc == 0)
		rc = s_map_tensors(s, err, errlen);
	if (rc < 0) {
		s_destroy(s);
		return rc;
	}
	return ns_weights_install(&s_stream_ops, s, m, out, err, errlen);
}

void ns_weights_stream_stats(const struct ns_weights *w, struct ns_weights_stream_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (w && w->ops == &s_stream_ops)
		*out = ((const struct s_stream *)w->ctx)->st;
}
