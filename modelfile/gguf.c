/* gguf.c - bounded, validating GGUF reader. See gguf.h for the contract.
 *
 * Layout (v2/v3, little-endian): magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims, u64 ne[n_dims],
 * u32 type, u64 offset), padding to general.alignment, tensor data.
 * A string is u64 length + bytes; an array is u32 item type + u64 count + items. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ggml_type.h"
#include "ns_util.h"

#define S_CHUNK (1u << 20)
/* Strings longer than this are not metadata anyone writes; refusing them bounds one allocation. */
#define S_MAX_STRING (64ull << 20)
#define S_MAX_NAME 1024
#define S_MAX_DEPTH 8

/* Minimum bytes each item occupies in the file, used to bound counts before allocating. */
#define S_MIN_KV_BYTES 13     /* u64 key len + u32 type + 1-byte value */
#define S_MIN_TENSOR_BYTES 24 /* u64 name len + u32 n_dims + u32 type + u64 offset */

struct reader {
	int fd;
	const char *path;
	uint64_t size;
	uint64_t pos;      /* next byte to consume */
	uint8_t *buf;
	uint64_t buf_off;  /* file offset of buf[0] */
	size_t buf_len;
	uint64_t limit;    /* header bytes may not extend past this */
	char *err;
	size_t errlen;
};

static int s_fail(struct reader *r, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int s_fail(struct reader *r, uint64_t off, const char *fmt, ...)
{
	char msg[NS_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ns_errf(r->err, r->errlen, "%s: offset %" PRIu64 ": %s", r->path, off, msg);
	return -EINVAL;
}

/* Copy n bytes at r->pos into dst (dst may be NULL to skip). */
static int s_read(struct reader *r, void *dst, uint64_t n, const char *what)
{
	uint8_t *out = dst;

	if (n > r->limit || r->pos > r->limit - n)
		return s_fail(r, r->pos, "truncated: %s needs %" PRIu64 " bytes but the %s ends at %" PRIu64,
			      what, n, r->limit < r->size ? "header limit" : "file", r->limit);
	while (n > 0) {
		if (r->pos < r->buf_off || r->pos >= r->buf_off + r->buf_len) {
			ssize_t got;
			uint64_t want = r->size - r->pos < S_CHUNK ? r->size - r->pos : S_CHUNK;

			do
				got = pread(r->fd, r->buf, (size_t)want, (off_t)r->pos);
			while (got < 0 && errno == EINTR);
			if (got < 0) {
				int e = errno;
				ns_errf(r->err, r->errlen, "%s: offset %" PRIu64 ": read failed: %s",
					r->path, r->pos, strerror(e));
				return -e;
			}
			if (got == 0)
				return s_fail(r, r->pos, "truncated: file shrank while reading %s", what);
			r->buf_off = r->pos;
			r->buf_len = (size_t)got;
		}
		size_t at = (size_t)(r->pos - r->buf_off);
		size_t take = r->buf_len - at;
		if (take > n)
			take = (size_t)n;
		if (out) {
			memcpy(out, r->buf + at, take);
			out += take;
		}
		r->pos += take;
		n -= take;
	}
	return 0;
}

static int s_u32(struct reader *r, uint32_t *v, const char *what)
{
	uint8_t b[4];
	int ret = s_read(r, b, 4, what);

	if (ret)
		return ret;
	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return 0;
}

static int s_u64(struct reader *r, uint64_t *v, const char *what)
{
	uint8_t b[8];
	int ret = s_read(r, b, 8, what);

	if (ret)
		return ret;
	*v = 0;
	for (int i = 7; i >= 0; i--)
		*v = *v << 8 | b[i];
	return 0;
}

static uint64_t s_remaining(const struct reader *r)
{
	return r->pos < r->limit ? r->limit - r->pos : 0;
}

static int s_string(struct reader *r, struct ns_gguf_str *s, const char *what)
{
	uint64_t at = r->pos;
	uint64_t len;
	int ret = s_u64(r, &len, what);

	if (ret)
		return ret;
	if (len > S_MAX_STRING || len > s_remaining(r))
		return s_fail(r, at, "%s has length %" PRIu64 ", more than the %" PRIu64
			      " bytes left in the header", what, len, s_remaining(r));
	s->s = malloc((size_t)len + 1);
	if (!s->s) {
		ns_errf(r->err, r->errlen, "%s: out of memory reading %s", r->path, what);
		return -ENOMEM;
	}
	s->len = len;
	ret = s_read(r, s->s, len, what);
	s->s[len] = '\0';
	return ret;
}

size_t ns_gguf_vtype_size(uint32_t type)
{
	switch (type) {
	case NS_GGUF_U8: case NS_GGUF_I8: case NS_GGUF_BOOL:
		return 1;
	case NS_GGUF_U16: case NS_GGUF_I16:
		return 2;
	case NS_GGUF_U32: case NS_GGUF_I32: case NS_GGUF_F32:
		return 4;
	case NS_GGUF_U64: case NS_GGUF_I64: case NS_GGUF_F64:
		return 8;
	default:
		return 0;
	}
}

const char *ns_gguf_vtype_name(uint32_t type)
{
	static const char *const names[NS_GGUF_VTYPE_COUNT] = {
		"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
		"BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64",
	};
	return type < NS_GGUF_VTYPE_COUNT ? names[type] : "UNKNOWN";
}

static void s_value_free(struct ns_gguf_value *v);

static void s_array_free(struct ns_gguf_value *v)
{
	if (v->v.arr.item_type == NS_GGUF_STRING) {
		struct ns_gguf_str *s = v->v.arr.items;
		for (uint64_t i = 0; s && i < v->v.arr.n; i++)
			free(s[i].s);
	} else if (v->v.arr.item_type == NS_GGUF_ARRAY) {
		struct ns_gguf_value *a = v->v.arr.items;
		for (uint64_t i = 0; a && i < v->v.arr.n; i++)
			s_value_free(&a[i]);
	}
	free(v->v.arr.items);
	v->v.arr.items = NULL;
}

static void s_value_free(struct ns_gguf_value *v)
{
	if (v->type == NS_GGUF_STRING)
		free(v->v.str.s);
	else if (v->type == NS_GGUF_ARRAY)
		s_array_free(v);
	memset(v, 0, sizeof(*v));
}

static int s_scalar(struct reader *r, uint32_t type, struct ns_gguf_value *v, const char *what)
{
	uint8_t b[8];
	size_t n = ns_gguf_vtype_size(type);
	uint64_t u = 0;
	int ret;

	ret = s_read(r, b, n, what);
	if (ret)
		return ret;
	for (size_t i = n; i-- > 0;)
		u = u << 8 | b[i];
	v->type = type;
	switch (type) {
	case NS_GGUF_U8: case NS_GGUF_U16: case NS_GGUF_U32: case NS_GGUF_U64:
		v->v.u64 = u;
		break;
	case NS_GGUF_I8:
		v->v.i64 = (int8_t)u;
		break;
	case NS_GGUF_I16:
		v->v.i64 = (int16_t)u;
		break;
	case NS_GGUF_I32:
		v->v.i64 = (int32_t)u;
		break;
	case NS_GGUF_I64:
		v->v.i64 = (int64_t)u;
		break;
	case NS_GGUF_F32: {
		uint32_t w = (uint32_t)u;
		float f;
		memcpy(&f, &w, 4);
		v->v.f64 = f;
		break;
	}
	case NS_GGUF_F64:
		memcpy(&v->v.f64, &u, 8);
		break;
	case NS_GGUF_BOOL:
		if (u > 1)
			return s_fail(r, r->pos - 1, "%s: bool value %u is neither 0 nor 1", what,
				      (unsigned)u);
		v->v.b = u != 0;
		break;
	}
	return 0;
}

static int s_value(struct reader *r, uint32_t type, struct ns_gguf_value *v, const char *what,
		   int depth);

static int s_array(struct reader *r, struct ns_gguf_value *v, const char *what, int depth)
{
	uint64_t at = r->pos;
	uint32_t item_type;
	uint64_t n, min_bytes, need;
	size_t item_size;
	int ret;

	v->type = NS_GGUF_ARRAY;
	if (depth >= S_MAX_DEPTH)
		return s_fail(r, at, "%s: arrays nested deeper than %d", what, S_MAX_DEPTH);
	if ((ret = s_u32(r, &item_type, what)) || (ret = s_u64(r, &n, what)))
		return ret;
	if (item_type >= NS_GGUF_VTYPE_COUNT)
		return s_fail(r, at, "%s: unknown array item type %u", what, item_type);
	switch (item_type) {
	case NS_GGUF_STRING:
		min_bytes = 8;
		item_size = sizeof(struct ns_gguf_str);
		break;
	case NS_GGUF_ARRAY:
		min_bytes = 12;
		item_size = sizeof(struct ns_gguf_value);
		break;
	default:
		min_bytes = ns_gguf_vtype_size(item_type);
		item_size = min_bytes;
		break;
	}
	if (ns_mul_u64_overflow(n, min_bytes, &need) || need > s_remaining(r))
		return s_fail(r, at, "%s: array of %" PRIu64 " %s items cannot fit in the %" PRIu64
			      " header bytes left", what, n, ns_gguf_vtype_name(item_type),
			      s_remaining(r));
	v->v.arr.item_type = item_type;
	v->v.arr.n = 0;
	v->v.arr.items = calloc(n ? (size_t)n : 1, item_size);
	if (!v->v.arr.items) {
		ns_errf(r->err, r->errlen, "%s: out of memory for %s (%" PRIu64 " items)", r->path,
			what, n);
		return -ENOMEM;
	}
	if (item_type == NS_GGUF_STRING) {
		struct ns_gguf_str *s = v->v.arr.items;
		for (uint64_t i = 0; i < n; i++) {
			v->v.arr.n = i + 1; /* so a failure frees what was read */
			if ((ret = s_string(r, &s[i], what)))
				return ret;
		}
	} else if (item_type == NS_GGUF_ARRAY) {
		struct ns_gguf_value *a = v->v.arr.items;
		for (uint64_t i = 0; i < n; i++) {
			v->v.arr.n = i + 1;
			if ((ret = s_value(r, NS_GGUF_ARRAY, &a[i], what, depth + 1)))
				return ret;
		}
	} else {
		uint8_t *raw = v->v.arr.items;
		v->v.arr.n = n;
		if ((ret = s_read(r, raw, n * item_size, what)))
			return ret;
		if (item_type == NS_GGUF_BOOL)
			for (uint64_t i = 0; i < n; i++)
				if (raw[i] > 1)
					return s_fail(r, r->pos - n + i, "%s: bool item %" PRIu64
						      " is %u, neither 0 nor 1", what, i, raw[i]);
	}
	v->v.arr.n = n;
	return 0;
}

static int s_value(struct reader *r, uint32_t type, struct ns_gguf_value *v, const char *what,
		   int depth)
{
	if (type == NS_GGUF_STRING) {
		v->type = NS_GGUF_STRING;
		return s_string(r, &v->v.str, what);
	}
	if (type == NS_GGUF_ARRAY)
		return s_array(r, v, what, depth);
	if (type >= NS_GGUF_VTYPE_COUNT)
		return s_fail(r, r->pos - 4, "%s: unknown value type %u", what, type);
	return s_scalar(r, type, v, what);
}

const struct ns_gguf_kv *ns_gguf_find(const struct ns_gguf *g, const char *key)
{
	size_t klen = strlen(key);

	for (uint64_t i = 0; i < g->n_kv; i++)
		if (g->kv[i].key.len == klen && !memcmp(g->kv[i].key.s, key, klen))
			return &g->kv[i];
	return NULL;
}

int64_t ns_gguf_find_tensor(const struct ns_gguf *g, const char *name)
{
	size_t len = strlen(name);

	for (uint64_t i = 0; i < g->n_tensors; i++)
		if (g->tensors[i].name.len == len && !memcmp(g->tensors[i].name.s, name, len))
			return (int64_t)i;
	return -1;
}

static int s_read_kvs(struct reader *r, struct ns_gguf *g)
{
	uint64_t need;
	int ret;

	if (ns_mul_u64_overflow(g->n_kv, S_MIN_KV_BYTES, &need) || need > s_remaining(r))
		return s_fail(r, 16, "metadata count %" PRIu64 " cannot fit in the file", g->n_kv);
	g->kv = calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof(*g->kv));
	if (!g->kv) {
		ns_errf(r->err, r->errlen, "%s: out of memory for %" PRIu64 " metadata keys",
			r->path, g->n_kv);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < g->n_kv; i++) {
		struct ns_gguf_kv *kv = &g->kv[i];
		uint64_t at = r->pos;
		uint32_t type;
		char what[160];

		kv->file_offset = at;
		if ((ret = s_string(r, &kv->key, "metadata key")))
			return ret;
		if (kv->key.len == 0 || strlen(kv->key.s) != kv->key.len)
			return s_fail(r, at, "metadata key %" PRIu64 " is empty or holds a NUL byte", i);
		for (uint64_t j = 0; j < i; j++)
			if (g->kv[j].key.len == kv->key.len && !memcmp(g->kv[j].key.s, kv->key.s, kv->key.len))
				return s_fail(r, at, "duplicate metadata key '%s'", kv->key.s);
		snprintf(what, sizeof(what), "value of '%.120s'", kv->key.s);
		if ((ret = s_u32(r, &type, what)))
			return ret;
		if (type >= NS_GGUF_VTYPE_COUNT)
			return s_fail(r, r->pos - 4, "'%s' has unknown value type %u", kv->key.s, type);
		if ((ret = s_value(r, type, &kv->value, what, 0)))
			return ret;
	}
	return 0;
}

static int s_read_alignment(struct reader *r, struct ns_gguf *g)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, "general.alignment");

	g->alignment = NS_GGUF_DEFAULT_ALIGNMENT;
	if (!kv)
		return 0;
	if (kv->value.type != NS_GGUF_U32)
		return s_fail(r, kv->file_offset, "general.alignment has type %s, expected UINT32",
			      ns_gguf_vtype_name(kv->value.type));
	if (kv->value.v.u64 == 0 || (kv->value.v.u64 & (kv->value.v.u64 - 1)))
		return s_fail(r, kv->file_offset, "general.alignment %" PRIu64 " is not a power of two",
			      kv->value.v.u64);
	g->alignment = (uint32_t)kv->value.v.u64;
	return 0;
}

static int s_read_tensor_info(struct reader *r, struct ns_gguf *g, uint64_t i)
{
	struct ns_gguf_tensor *t = &g->tensors[i];
	uint64_t at = r->pos;
	char tbuf[32];
	int ret;

	if ((ret = s_string(r, &t->name, "tensor name")))
		return ret;
	if (t->name.len == 0 || t->name.len > S_MAX_NAME || strlen(t->name.s) != t->name.len)
		return s_fail(r, at, "tensor %" PRIu64 " has an empty, overlong or NUL-holding name", i);
	if ((ret = s_u32(r, &t->n_dims, "tensor n_dims")))
		return ret;
	if (t->n_dims == 0 || t->n_dims > NS_GGUF_MAX_DIMS)
		return s_fail(r, r->pos - 4, "tensor '%s' has %u dimensions (1..%d allowed)",
			      t->name.s, t->n_dims, NS_GGUF_MAX_DIMS);
	t->n_elems = 1;
	for (uint32_t d = 0; d < NS_GGUF_MAX_DIMS; d++) {
		t->ne[d] = 1;
		if (d >= t->n_dims)
			continue;
		if ((ret = s_u64(r, &t->ne[d], "tensor dimension")))
			return ret;
		if (t->ne[d] > INT64_MAX ||
		    ns_mul_u64_overflow(t->n_elems, t->ne[d], &t->n_elems) || t->n_elems > INT64_MAX)
			return s_fail(r, r->pos - 8, "tensor '%s': dimensions overflow", t->name.s);
	}
	if ((ret = s_u32(r, &t->type, "tensor type")))
		return ret;
	const struct ns_type_info *ti = ns_type_get(t->type);
	if (!ti)
		return s_fail(r, r->pos - 4, "tensor '%s' has unknown ggml type id %u", t->name.s,
			      t->type);
	if (t->ne[0] % ti->block_elems)
		return s_fail(r, r->pos - 4, "tensor '%s': row length %" PRIu64
			      " is not a multiple of the %s block size %u", t->name.s, t->ne[0],
			      ns_type_name(t->type, tbuf, sizeof(tbuf)), ti->block_elems);
	if (ns_type_row_bytes(t->type, t->ne[0], &t->row_bytes))
		return s_fail(r, at, "tensor '%s': row size overflows", t->name.s);
	t->n_rows = t->ne[1] * t->ne[2] * t->ne[3]; /* bounded by n_elems check above */
	if (ns_mul_u64_overflow(t->row_bytes, t->n_rows, &t->n_bytes))
		return s_fail(r, at, "tensor '%s': byte size overflows", t->name.s);
	if ((ret = s_u64(r, &t->offset, "tensor offset")))
		return ret;
	return 0;
}

static int s_cmp_offset(const void *a, const void *b)
{
	const struct ns_gguf_tensor *x = *(const struct ns_gguf_tensor *const *)a;
	const struct ns_gguf_tensor *y = *(const struct ns_gguf_tensor *const *)b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Data placement: aligned, inside the file, no two tensors overlapping. */
static int s_check_data(struct reader *r, struct ns_gguf *g)
{
	struct ns_gguf_tensor **order;
	uint64_t data_len = g->file_size - g->data_offset;
	int ret = 0;

	for (uint64_t i = 0; i < g->n_tensors; i++) {
		struct ns_gguf_tensor *t = &g->tensors[i];
		if (t->offset % g->alignment)
			return s_fail(r, g->data_offset, "tensor '%s': data offset %" PRIu64
				      " is not aligned to %u", t->name.s, t->offset, g->alignment);
		/* apart from the rest, so that data_len - offset cannot wrap and the message's
		 * file offsets below cannot overflow */
		if (t->offset > data_len)
			return s_fail(r, g->file_size, "tensor '%s': data offset %" PRIu64
				      " lies past the end of the data (%" PRIu64 " bytes)", t->name.s,
				      t->offset, data_len);
		if (t->n_bytes > data_len - t->offset)
			return s_fail(r, g->data_offset + t->offset,
				      "truncated: tensor '%s' needs bytes %" PRIu64 "..%" PRIu64
				      " but the file ends at %" PRIu64, t->name.s,
				      g->data_offset + t->offset,
				      g->data_offset + t->offset + t->n_bytes, g->file_size);
		t->file_offset = g->data_offset + t->offset;
	}
	if (g->n_tensors < 2)
		return 0;
	order = malloc((size_t)g->n_tensors * sizeof(*order));
	if (!order) {
		ns_errf(r->err, r->errlen, "%s: out of memory", r->path);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		order[i] = &g->tensors[i];
	qsort(order, (size_t)g->n_tensors, sizeof(*order), s_cmp_offset);
	for (uint64_t i = 1; i < g->n_tensors; i++)
		if (order[i - 1]->offset + order[i - 1]->n_bytes > order[i]->offset &&
		    order[i - 1]->n_bytes && order[i]->n_bytes) {
			ret = s_fail(r, order[i]->file_offset, "tensors '%s' and '%s' overlap",
				     order[i - 1]->name.s, order[i]->name.s);
			break;
		}
	free(order);
	return ret;
}

static int s_cmp_name(const void *a, const void *b)
{
	const struct ns_gguf_tensor *x = *(const struct ns_gguf_tensor *const *)a;
	const struct ns_gguf_tensor *y = *(const struct ns_gguf_tensor *const *)b;

	return strcmp(x->name.s, y->name.s);
}

static int s_check_names(struct reader *r, struct ns_gguf *g)
{
	/* Sorting a pointer array keeps the duplicate check O(n log n) for 10k-tensor models. */
	const struct ns_gguf_tensor **v;
	int ret = 0;

	if (g->n_tensors < 2)
		return 0;
	v = malloc((size_t)g->n_tensors * sizeof(*v));
	if (!v) {
		ns_errf(r->err, r->errlen, "%s: out of memory", r->path);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < g->n_tensors; i++)
		v[i] = &g->tensors[i];
	qsort(v, (size_t)g->n_tensors, sizeof(*v), s_cmp_name);
	for (uint64_t i = 1; i < g->n_tensors; i++)
		if (!strcmp(v[i - 1]->name.s, v[i]->name.s)) {
			ret = s_fail(r, g->data_offset, "duplicate tensor name '%s'", v[i]->name.s);
			break;
		}
	free(v);
	return ret;
}

void ns_gguf_close(struct ns_gguf **pg)
{
	struct ns_gguf *g = pg ? *pg : NULL;

	if (!g)
		return;
	for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
		free(g->kv[i].key.s);
		s_value_free(&g->kv[i].value);
	}
	for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++)
		free(g->tensors[i].name.s);
	free(g->kv);
	free(g->tensors);
	free(g->path);
	free(g);
	*pg = NULL;
}

static int s_parse(struct reader *r, struct ns_gguf *g)
{
	uint8_t magic[4];
	uint64_t need, n_kv, n_tensors;
	int ret;

	if ((ret = s_read(r, magic, 4, "magic")))
		return ret;
	if (memcmp(magic, "GGUF", 4))
		return s_fail(r, 0, "not a GGUF file (magic %02x %02x %02x %02x)", magic[0], magic[1],
			      magic[2], magic[3]);
	if ((ret = s_u32(r, &g->version, "version")))
		return ret;
	if (g->version == 1)
		return s_fail(r, 4, "GGUF version 1 is not supported (re-convert the model)");
	if (g->version != 2 && g->version != 3) {
		if ((g->version & 0xffff) == 0)
			return s_fail(r, 4, "big-endian GGUF files are not supported");
		return s_fail(r, 4, "unsupported GGUF version %u (2 and 3 are)", g->version);
	}
	if ((ret = s_u64(r, &n_tensors, "tensor count")) || (ret = s_u64(r, &n_kv, "metadata count")))
		return ret;
	g->n_kv = n_kv;
	if ((ret = s_read_kvs(r, g)))
		return ret;
	if ((ret = s_read_alignment(r, g)))
		return ret;
	if (ns_mul_u64_overflow(n_tensors, S_MIN_TENSOR_BYTES, &need) || need > s_remaining(r))
		return s_fail(r, 8, "tensor count %" PRIu64 " cannot fit in the file", n_tensors);
	g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof(*g->tensors));
	if (!g->tensors) {
		ns_errf(r->err, r->errlen, "%s: out of memory for %" PRIu64 " tensors", r->path,
			n_tensors);
		return -ENOMEM;
	}
	for (uint64_t i = 0; i < n_tensors; i++) {
		g->n_tensors = i + 1;
		if ((ret = s_read_tensor_info(r, g, i)))
			return ret;
	}
	g->n_tensors = n_tensors;
	g->data_offset = ns_align_up_u64(r->pos, g->alignment);
	/* Vocab-only files may end right after the header, before the padding. */
	if (n_tensors == 0)
		return 0;
	if (g->data_offset > g->file_size)
		return s_fail(r, r->pos, "truncated: data section at %" PRIu64
			      " starts past the end of the file (%" PRIu64 " bytes)",
			      g->data_offset, g->file_size);
	if ((ret = s_check_names(r, g)))
		return ret;
	return s_check_data(r, g);
}

int ns_gguf_open(const char *path, struct ns_gguf **out, char *err, size_t errlen)
{
	struct reader r = { .fd = -1, .path = path, .err = err, .errlen = errlen };
	struct ns_gguf *g;
	struct stat st;
	int ret;

	*out = NULL;
	r.fd = ns_open_regular(path, O_RDONLY, err, errlen);
	if (r.fd < 0)
		return r.fd;
	if (fstat(r.fd, &st) < 0) {
		ret = -errno;
		ns_errf(err, errlen, "%s: cannot stat: %s", path, strerror(-ret));
		close(r.fd);
		return ret;
	}
	r.size = (uint64_t)st.st_size;
	r.limit = r.size < NS_GGUF_MAX_HEADER_BYTES ? r.size : NS_GGUF_MAX_HEADER_BYTES;
	r.buf = malloc(S_CHUNK);
	g = calloc(1, sizeof(*g));
	if (g)
		g->path = strdup(path);
	if (!r.buf || !g || !g->path) {
		ns_errf(err, errlen, "%s: out of memory", path);
		ret = -ENOMEM;
		goto fail;
	}
	g->file_size = r.size;
	ret = s_parse(&r, g);
	if (ret)
		goto fail;
	free(r.buf);
	close(r.fd);
	*out = g;
	return 0;
fail:
	free(r.buf);
	close(r.fd);
	ns_gguf_close(&g);
	return ret;
}

/* ---- typed getters ---- */

static bool s_is_uint(uint32_t t)
{
	return t == NS_GGUF_U8 || t == NS_GGUF_U16 || t == NS_GGUF_U32 || t == NS_GGUF_U64;
}

static bool s_is_int(uint32_t t)
{
	return t == NS_GGUF_I8 || t == NS_GGUF_I16 || t == NS_GGUF_I32 || t == NS_GGUF_I64;
}

bool ns_gguf_get_u64(const struct ns_gguf *g, const char *key, uint64_t *out)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, key);

	if (!kv)
		return false;
	if (s_is_uint(kv->value.type)) {
		*out = kv->value.v.u64;
		return true;
	}
	if (s_is_int(kv->value.type) && kv->value.v.i64 >= 0) {
		*out = (uint64_t)kv->value.v.i64;
		return true;
	}
	return false;
}

bool ns_gguf_get_i64(const struct ns_gguf *g, const char *key, int64_t *out)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, key);

	if (!kv)
		return false;
	if (s_is_int(kv->value.type)) {
		*out = kv->value.v.i64;
		return true;
	}
	if (s_is_uint(kv->value.type) && kv->value.v.u64 <= INT64_MAX) {
		*out = (int64_t)kv->value.v.u64;
		return true;
	}
	return false;
}

bool ns_gguf_get_f64(const struct ns_gguf *g, const char *key, double *out)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, key);

	if (!kv || (kv->value.type != NS_GGUF_F32 && kv->value.type != NS_GGUF_F64))
		return false;
	*out = kv->value.v.f64;
	return true;
}

bool ns_gguf_get_bool(const struct ns_gguf *g, const char *key, bool *out)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, key);

	if (!kv || kv->value.type != NS_GGUF_BOOL)
		return false;
	*out = kv->value.v.b;
	return true;
}

const char *ns_gguf_get_str(const struct ns_gguf *g, const char *key)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, key);

	return kv && kv->value.type == NS_GGUF_STRING ? kv->value.v.str.s : NULL;
}

const struct ns_gguf_value *ns_gguf_get_arr(const struct ns_gguf *g, const char *key)
{
	const struct ns_gguf_kv *kv = ns_gguf_find(g, key);

	return kv && kv->value.type == NS_GGUF_ARRAY ? &kv->value : NULL;
}

int64_t ns_gguf_arr_i64(const struct ns_gguf_value *arr, uint64_t i)
{
	const uint8_t *p = arr->v.arr.items;
	size_t sz = ns_gguf_vtype_size(arr->v.arr.item_type);
	uint64_t u = 0;

	if (!sz)
		return 0;
	p += i * sz;
	for (size_t k = sz; k-- > 0;)
		u = u << 8 | p[k];
	switch (arr->v.arr.item_type) {
	case NS_GGUF_I8: return (int8_t)u;
	case NS_GGUF_I16: return (int16_t)u;
	case NS_GGUF_I32: return (int32_t)u;
	case NS_GGUF_F32: { uint32_t w = (uint32_t)u; float f; memcpy(&f, &w, 4); return (int64_t)f; }
	case NS_GGUF_F64: { double d; memcpy(&d, &u, 8); return (int64_t)d; }
	default: return (int64_t)u;
	}
}

double ns_gguf_arr_f64(const struct ns_gguf_value *arr, uint64_t i)
{
	const uint8_t *p = arr->v.arr.items;
	uint32_t t = arr->v.arr.item_type;

	if (t == NS_GGUF_F32) {
		float f;
		memcpy(&f, p + i * 4, 4);
		return f;
	}
	if (t == NS_GGUF_F64) {
		double d;
		memcpy(&d, p + i * 8, 8);
		return d;
	}
	if (t == NS_GGUF_U64 || t == NS_GGUF_U32 || t == NS_GGUF_U16 || t == NS_GGUF_U8) {
		uint64_t u = 0;
		size_t sz = ns_gguf_vtype_size(t);
		for (size_t k = sz; k-- > 0;)
			u = u << 8 | p[i * sz + k];
		return (double)u;
	}
	return (double)ns_gguf_arr_i64(arr, i);
}
