/* model_read.c - reading a tensor's rows as the model presents them: one pread for a plain
 * tensor, the source's runs, column groups and op for a tensor a checkpoint's converter would
 * rewrite (struct ns_tensor_src, model.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fp16.h"
#include "ggml_type.h"
#include "model.h"
#include "ns_util.h"

/* File bytes converted per step: bounds the scratch of a converting read. */
#define S_CHUNK_BYTES (1u << 20)

int ns_model_open_fds(const struct ns_model *m, int **out, char *err, size_t errlen)
{
	int *fds = malloc(m->n_shards * sizeof(*fds));

	*out = NULL;
	if (!fds) {
		ns_errf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < m->n_shards; i++) {
		fds[i] = open(m->shards[i]->path, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0) {
			int rc = -errno;

			ns_errf(err, errlen, "%s: %s", m->shards[i]->path, strerror(errno));
			while (i-- > 0)
				close(fds[i]);
			free(fds);
			return rc;
		}
	}
	*out = fds;
	return 0;
}

void ns_model_close_fds(const struct ns_model *m, int **pfds)
{
	int *fds = pfds ? *pfds : NULL;

	if (!fds)
		return;
	for (uint32_t i = 0; i < m->n_shards; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	*pfds = NULL;
}

static int s_pread_all(int fd, void *buf, uint64_t n, uint64_t off)
{
	uint64_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, (size_t)(n - got), (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* the file ends before the bytes */
		got += (uint64_t)r;
	}
	return 0;
}

/* Index of the run holding row (runs are in row order and cover every row). */
static uint32_t s_run_of(const struct ns_tensor_src *src, uint64_t row)
{
	uint32_t lo = 0, hi = src->n_runs - 1;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;

		if (src->runs[mid].row0 <= row)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

bool ns_model_rows_plain(const struct ns_model_tensor *t, uint64_t row0, uint64_t nrows,
			 uint32_t *shard, uint64_t *file_offset)
{
	const struct ns_tensor_src *src = t->src;
	const struct ns_row_run *r;

	if (!src) {
		*shard = t->shard;
		*file_offset = t->file_offset + row0 * t->row_bytes;
		return true;
	}
	if (src->op != NS_SRC_COPY || src->col_group || row0 >= t->n_rows)
		return false;
	r = &src->runs[s_run_of(src, row0)];
	if (row0 + nrows > r->row0 + r->n_rows)
		return false;
	*shard = r->shard;
	*file_offset = r->file_offset + (row0 - r->row0) * src->row_bytes;
	return true;
}

static float s_load(uint32_t type, const uint8_t *p, uint64_t i)
{
	uint32_t u;
	float f;

	switch (type) {
	case NS_TYPE_F32:
		memcpy(&f, p + 4 * i, 4);
		return f;
	case NS_TYPE_F16:
		return ns_fp16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
	default: /* BF16: the top half of a float */
		u = (uint32_t)(p[2 * i] | p[2 * i + 1] << 8) << 16;
		memcpy(&f, &u, 4);
		return f;
	}
}

/* The converter's arithmetic on one value: float32 for F32 and BF16 sources (it widens BF16
 * first), half precision for F16 ones (torch rounds each half op to half). */
static float s_apply(enum ns_src_op op, uint32_t type, float v)
{
	float r = v;

	if (op == NS_SRC_ADD_ONE)
		r = v + 1.0f;
	else if (op == NS_SRC_NEG_EXP)
		r = (float)-exp((double)v); /* correctly rounded to float (torch's expf agrees on the
					     * oracle checkpoints' values) */
	if (type == NS_TYPE_F16 && op != NS_SRC_WIDEN)
		r = ns_fp16_to_f32(ns_f32_to_fp16(r));
	return r;
}

/* One row of the file (src_row) into one row of the tensor (dst). */
static void s_make_row(const struct ns_tensor_src *src, const struct ns_model_tensor *t,
		       const uint8_t *src_row, uint8_t *dst)
{
	uint64_t n = t->ne[0], g = src->col_group;

	if (src->op == NS_SRC_COPY) { /* column groups only: move bytes */
		uint64_t gb = g * (t->row_bytes / n); /* bytes of a group */

		for (uint32_t k = 0; k < src->n_col_groups; k++)
			memcpy(dst + k * gb, src_row + src->col_from[k] * gb, (size_t)gb);
		return;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t j = g ? src->col_from[i / g] * g + i % g : i;
		float v = s_apply(src->op, src->type, s_load(src->type, src_row, j));

		memcpy(dst + 4 * i, &v, 4);
	}
}

static int s_read_src(const struct ns_model_tensor *t, const int *fds, uint64_t row0,
		      uint64_t nrows, uint8_t *dst)
{
	const struct ns_tensor_src *src = t->src;
	uint64_t srb = src->row_bytes, step = S_CHUNK_BYTES / (srb ? srb : 1);
	bool direct = src->op == NS_SRC_COPY && !src->col_group;
	uint8_t *tmp = NULL;
	int rc = 0;

	if (!step)
		step = 1;
	if (!direct && !(tmp = malloc((size_t)(step * srb))))
		return -ENOMEM;
	for (uint64_t row = row0; row < row0 + nrows && !rc;) {
		const struct ns_row_run *r = &src->runs[s_run_of(src, row)];
		uint64_t end = r->row0 + r->n_rows < row0 + nrows ? r->row0 + r->n_rows : row0 + nrows;
		uint64_t off = r->file_offset + (row - r->row0) * srb;
		uint8_t *out = dst + (row - row0) * t->row_bytes;

		if (!direct && end - row > step)
			end = row + step;
		if (direct) {
			rc = s_pread_all(fds[r->shard], out, (end - row) * srb, off);
		} else if (!(rc = s_pread_all(fds[r->shard], tmp, (end - row) * srb, off))) {
			for (uint64_t k = 0; k < end - row; k++)
				s_make_row(src, t, tmp + k * srb, out + k * t->row_bytes);
		}
		row = end;
	}
	free(tmp);
	return rc;
}

int ns_model_read_rows(const struct ns_model *m, const int *fds, const struct ns_model_tensor *t,
		       uint64_t row0, uint64_t nrows, void *dst)
{
	uint64_t bytes;

	(void)m;
	if (row0 > t->n_rows || nrows > t->n_rows - row0 ||
	    ns_mul_u64_overflow(nrows, t->row_bytes, &bytes))
		return -EINVAL;
	if (!nrows)
		return 0;
	if (t->src)
		return s_read_src(t, fds, row0, nrows, dst);
	return s_pread_all(fds[t->shard], dst, bytes, t->file_offset + row0 * t->row_bytes);
}

int ns_model_read_tensor_sliced(const struct ns_model *m, const int *fds,
				const struct ns_model_tensor *t, uint64_t slice_bytes,
				void (*beat)(void *user), void *user, void *dst)
{
	uint64_t step = t->row_bytes ? slice_bytes / t->row_bytes : t->n_rows;

	if (!step)
		step = 1;
	for (uint64_t row = 0; row < t->n_rows; row += step) {
		uint64_t n = t->n_rows - row < step ? t->n_rows - row : step;
		int rc = ns_model_read_rows(m, fds, t, row, n, (uint8_t *)dst + row * t->row_bytes);

		if (rc < 0)
			return rc;
		if (beat)
			beat(user);
	}
	return 0;
}
