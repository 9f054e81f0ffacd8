/* gguf_write.c - GGUF v3 writer. See gguf_write.h. */
#include "gguf_write.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "ggml_type.h"
#include "ns_util.h"

#define S_OUT_BUF (8u << 20)

struct wkv {
	char *key;
	struct ns_gguf_value value; /* owned deep copy, same layout the reader produces */
};

struct wtensor {
	char *name;
	uint32_t type;
	uint32_t n_dims;
	uint64_t ne[NS_GGUF_MAX_DIMS];
	uint64_t n_bytes;
	uint64_t offset;   /* assigned at write time */
	void *data;        /* owned copy, or NULL for lazy */
	ns_gguf_fill_fn fill;
	void *fill_ctx;
};

struct ns_gguf_writer {
	uint32_t alignment;
	size_t n_kv, cap_kv;
	struct wkv *kv;
	size_t n_t, cap_t;
	struct wtensor *t;
};

struct ns_gguf_writer *ns_gguf_writer_new(uint32_t alignment)
{
	struct ns_gguf_writer *w;

	if (alignment == 0 || (alignment & (alignment - 1)))
		return NULL;
	w = calloc(1, sizeof(*w));
	if (w)
		w->alignment = alignment;
	return w;
}

static void s_value_free(struct ns_gguf_value *v)
{
	if (v->type == NS_GGUF_STRING) {
		free(v->v.str.s);
	} else if (v->type == NS_GGUF_ARRAY) {
		if (v->v.arr.item_type == NS_GGUF_STRING) {
			struct ns_gguf_str *s = v->v.arr.items;
			for (uint64_t i = 0; i < v->v.arr.n; i++)
				free(s[i].s);
		} else if (v->v.arr.item_type == NS_GGUF_ARRAY) {
			struct ns_gguf_value *a = v->v.arr.items;
			for (uint64_t i = 0; i < v->v.arr.n; i++)
				s_value_free(&a[i]);
		}
		free(v->v.arr.items);
	}
	memset(v, 0, sizeof(*v));
}

void ns_gguf_writer_destroy(struct ns_gguf_writer **pw)
{
	struct ns_gguf_writer *w = pw ? *pw : NULL;

	if (!w)
		return;
	for (size_t i = 0; i < w->n_kv; i++) {
		free(w->kv[i].key);
		s_value_free(&w->kv[i].value);
	}
	for (size_t i = 0; i < w->n_t; i++) {
		free(w->t[i].name);
		free(w->t[i].data);
	}
	free(w->kv);
	free(w->t);
	free(w);
	*pw = NULL;
}

static int s_str_dup(struct ns_gguf_str *dst, const char *s, uint64_t len)
{
	dst->s = malloc((size_t)len + 1);
	if (!dst->s)
		return -ENOMEM;
	memcpy(dst->s, s, (size_t)len);
	dst->s[len] = '\0';
	dst->len = len;
	return 0;
}

/* Deep copy src into dst (dst zeroed on failure). */
static int s_value_copy(struct ns_gguf_value *dst, const struct ns_gguf_value *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->type = src->type;
	if (src->type == NS_GGUF_STRING)
		return s_str_dup(&dst->v.str, src->v.str.s, src->v.str.len);
	if (src->type != NS_GGUF_ARRAY) {
		dst->v = src->v;
		return 0;
	}
	uint32_t it = src->v.arr.item_type;
	uint64_t n = src->v.arr.n;
	size_t isz = it == NS_GGUF_STRING ? sizeof(struct ns_gguf_str)
		   : it == NS_GGUF_ARRAY ? sizeof(struct ns_gguf_value) : ns_gguf_vtype_size(it);
	uint64_t bytes;

	if (!isz || ns_mul_u64_overflow(n, isz, &bytes) || bytes > SIZE_MAX)
		return -EINVAL;
	dst->v.arr.item_type = it;
	dst->v.arr.items = calloc(n ? (size_t)n : 1, isz);
	if (!dst->v.arr.items)
		return -ENOMEM;
	if (it == NS_GGUF_STRING) {
		const struct ns_gguf_str *s = src->v.arr.items;
		struct ns_gguf_str *d = dst->v.arr.items;
		for (uint64_t i = 0; i < n; i++) {
			dst->v.arr.n = i + 1;
			if (s_str_dup(&d[i], s[i].s, s[i].len))
				goto fail;
		}
	} else if (it == NS_GGUF_ARRAY) {
		const struct ns_gguf_value *s = src->v.arr.items;
		struct ns_gguf_value *d = dst->v.arr.items;
		for (uint64_t i = 0; i < n; i++) {
			dst->v.arr.n = i + 1;
			if (s_value_copy(&d[i], &s[i]))
				goto fail;
		}
	} else if (n) {
		memcpy(dst->v.arr.items, src->v.arr.items, (size_t)bytes);
	}
	dst->v.arr.n = n;
	return 0;
fail:
	s_value_free(dst);
	return -ENOMEM;
}

/* Insert or replace key with value, taking ownership of *value's contents. */
static int s_put(struct ns_gguf_writer *w, const char *key, struct ns_gguf_value *value)
{
	for (size_t i = 0; i < w->n_kv; i++) {
		if (!strcmp(w->kv[i].key, key)) {
			s_value_free(&w->kv[i].value);
			w->kv[i].value = *value;
			return 0;
		}
	}
	if (w->n_kv == w->cap_kv) {
		size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
		struct wkv *kv = realloc(w->kv, cap * sizeof(*kv));
		if (!kv)
			goto fail;
		w->kv = kv;
		w->cap_kv = cap;
	}
	w->kv[w->n_kv].key = strdup(key);
	if (!w->kv[w->n_kv].key)
		goto fail;
	w->kv[w->n_kv].value = *value;
	w->n_kv++;
	return 0;
fail:
	s_value_free(value);
	return -ENOMEM;
}

static int s_put_scalar(struct ns_gguf_writer *w, const char *key, uint32_t type,
			uint64_t u, int64_t i, double f, bool b)
{
	struct ns_gguf_value v = { .type = type };

	switch (type) {
	case NS_GGUF_U32: case NS_GGUF_U64: v.v.u64 = u; break;
	case NS_GGUF_I32: v.v.i64 = i; break;
	case NS_GGUF_F32: v.v.f64 = f; break;
	case NS_GGUF_BOOL: v.v.b = b; break;
	default: return -EINVAL;
	}
	return s_put(w, key, &v);
}

int ns_gguf_writer_set_u32(struct ns_gguf_writer *w, const char *key, uint32_t v)
{
	return s_put_scalar(w, key, NS_GGUF_U32, v, 0, 0, false);
}

int ns_gguf_writer_set_i32(struct ns_gguf_writer *w, const char *key, int32_t v)
{
	return s_put_scalar(w, key, NS_GGUF_I32, 0, v, 0, false);
}

int ns_gguf_writer_set_u64(struct ns_gguf_writer *w, const char *key, uint64_t v)
{
	return s_put_scalar(w, key, NS_GGUF_U64, v, 0, 0, false);
}

int ns_gguf_writer_set_f32(struct ns_gguf_writer *w, const char *key, float v)
{
	return s_put_scalar(w, key, NS_GGUF_F32, 0, 0, v, false);
}

int ns_gguf_writer_set_bool(struct ns_gguf_writer *w, const char *key, bool v)
{
	return s_put_scalar(w, key, NS_GGUF_BOOL, 0, 0, 0, v);
}

int ns_gguf_writer_set_str(struct ns_gguf_writer *w, const char *key, const char *s)
{
	struct ns_gguf_value v = { .type = NS_GGUF_STRING };

	if (s_str_dup(&v.v.str, s, strlen(s)))
		return -ENOMEM;
	return s_put(w, key, &v);
}

int ns_gguf_writer_set_value(struct ns_gguf_writer *w, const char *key,
			     const struct ns_gguf_value *src)
{
	struct ns_gguf_value v;
	int ret = s_value_copy(&v, src);

	return ret ? ret : s_put(w, key, &v);
}

int ns_gguf_writer_set_arr(struct ns_gguf_writer *w, const char *key, uint32_t item_type,
			   const void *items, uint64_t n)
{
	struct ns_gguf_value src = { .type = NS_GGUF_ARRAY };

	if (!ns_gguf_vtype_size(item_type))
		return -EINVAL;
	src.v.arr.item_type = item_type;
	src.v.arr.n = n;
	src.v.arr.items = (void *)items;
	return ns_gguf_writer_set_value(w, key, &src);
}

int ns_gguf_writer_set_arr_str(struct ns_gguf_writer *w, const char *key,
			       const char *const *strs, uint64_t n)
{
	struct ns_gguf_value v = { .type = NS_GGUF_ARRAY };
	struct ns_gguf_str *items;

	if (n > SIZE_MAX / sizeof(*items))
		return -EINVAL;
	items = calloc(n ? (size_t)n : 1, sizeof(*items));
	if (!items)
		return -ENOMEM;
	v.v.arr.item_type = NS_GGUF_STRING;
	v.v.arr.items = items;
	for (uint64_t i = 0; i < n; i++) {
		v.v.arr.n = i + 1;
		if (s_str_dup(&items[i], strs[i], strlen(strs[i]))) {
			s_value_free(&v);
			return -ENOMEM;
		}
	}
	v.v.arr.n = n;
	return s_put(w, key, &v);
}

static int s_add_tensor(struct ns_gguf_writer *w, const char *name, uint32_t type,
			uint32_t n_dims, const uint64_t *ne, struct wtensor *t)
{
	uint64_t row_bytes, rows = 1;

	if (n_dims == 0 || n_dims > NS_GGUF_MAX_DIMS)
		return -EINVAL;
	for (size_t i = 0; i < w->n_t; i++)
		if (!strcmp(w->t[i].name, name))
			return -EEXIST;
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->n_dims = n_dims;
	for (uint32_t d = 0; d < NS_GGUF_MAX_DIMS; d++)
		t->ne[d] = d < n_dims ? ne[d] : 1;
	if (ns_type_row_bytes(type, t->ne[0], &row_bytes))
		return -EINVAL;
	for (uint32_t d = 1; d < NS_GGUF_MAX_DIMS; d++)
		if (ns_mul_u64_overflow(rows, t->ne[d], &rows))
			return -EOVERFLOW;
	if (ns_mul_u64_overflow(rows, row_bytes, &t->n_bytes))
		return -EOVERFLOW;
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? w->cap_t * 2 : 64;
		struct wtensor *nt = realloc(w->t, cap * sizeof(*nt));
		if (!nt)
			return -ENOMEM;
		w->t = nt;
		w->cap_t = cap;
	}
	t->name = strdup(name);
	return t->name ? 0 : -ENOMEM;
}

int ns_gguf_writer_add_tensor(struct ns_gguf_writer *w, const char *name, uint32_t type,
			      uint32_t n_dims, const uint64_t *ne, const void *data, size_t nbytes)
{
	struct wtensor t;
	int ret = s_add_tensor(w, name, type, n_dims, ne, &t);

	if (ret)
		return ret;
	if (t.n_bytes != nbytes) {
		free(t.name);
		return -EINVAL;
	}
	t.data = malloc(nbytes ? nbytes : 1);
	if (!t.data) {
		free(t.name);
		return -ENOMEM;
	}
	if (nbytes)
		memcpy(t.data, data, nbytes);
	w->t[w->n_t++] = t;
	return 0;
}

int ns_gguf_writer_add_tensor_lazy(struct ns_gguf_writer *w, const char *name, uint32_t type,
				   uint32_t n_dims, const uint64_t *ne, ns_gguf_fill_fn fill,
				   void *ctx)
{
	struct wtensor t;
	int ret = s_add_tensor(w, name, type, n_dims, ne, &t);

	if (ret)
		return ret;
	t.fill = fill;
	t.fill_ctx = ctx;
	w->t[w->n_t++] = t;
	return 0;
}

uint64_t ns_gguf_writer_n_tensors(const struct ns_gguf_writer *w)
{
	return w->n_t;
}

/* ---- output ---- */

struct out {
	int fd;
	uint8_t *buf;
	size_t len;
	uint64_t pos;
	int err;
};

static void s_flush(struct out *o)
{
	size_t done = 0;

	while (!o->err && done < o->len) {
		ssize_t n = write(o->fd, o->buf + done, o->len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			o->err = n < 0 ? -errno : -EIO;
			break;
		}
		done += (size_t)n;
	}
	o->len = 0;
}

static void s_put_bytes(struct out *o, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n && !o->err) {
		size_t take = S_OUT_BUF - o->len < n ? S_OUT_BUF - o->len : n;
		memcpy(o->buf + o->len, b, take);
		o->len += take;
		o->pos += take;
		b += take;
		n -= take;
		if (o->len == S_OUT_BUF)
			s_flush(o);
	}
}

static void s_put_le(struct out *o, uint64_t v, size_t n)
{
	uint8_t b[8];

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	s_put_bytes(o, b, n);
}

static void s_put_str(struct out *o, const char *s, uint64_t len)
{
	s_put_le(o, len, 8);
	s_put_bytes(o, s, (size_t)len);
}

static void s_put_value(struct out *o, const struct ns_gguf_value *v)
{
	switch (v->type) {
	case NS_GGUF_STRING:
		s_put_str(o, v->v.str.s, v->v.str.len);
		break;
	case NS_GGUF_ARRAY: {
		uint32_t it = v->v.arr.item_type;
		s_put_le(o, it, 4);
		s_put_le(o, v->v.arr.n, 8);
		if (it == NS_GGUF_STRING) {
			const struct ns_gguf_str *s = v->v.arr.items;
			for (uint64_t i = 0; i < v->v.arr.n; i++)
				s_put_str(o, s[i].s, s[i].len);
		} else if (it == NS_GGUF_ARRAY) {
			const struct ns_gguf_value *a = v->v.arr.items;
			for (uint64_t i = 0; i < v->v.arr.n; i++)
				s_put_value(o, &a[i]); /* nested: type comes from item_type */
		} else {
			s_put_bytes(o, v->v.arr.items, (size_t)(v->v.arr.n * ns_gguf_vtype_size(it)));
		}
		break;
	}
	case NS_GGUF_F32: {
		float f = (float)v->v.f64;
		uint32_t u;
		memcpy(&u, &f, 4);
		s_put_le(o, u, 4);
		break;
	}
	case NS_GGUF_F64: {
		uint64_t u;
		memcpy(&u, &v->v.f64, 8);
		s_put_le(o, u, 8);
		break;
	}
	case NS_GGUF_BOOL:
		s_put_le(o, v->v.b ? 1 : 0, 1);
		break;
	case NS_GGUF_I8: case NS_GGUF_I16: case NS_GGUF_I32: case NS_GGUF_I64:
		s_put_le(o, (uint64_t)v->v.i64, ns_gguf_vtype_size(v->type));
		break;
	default:
		s_put_le(o, v->v.u64, ns_gguf_vtype_size(v->type));
		break;
	}
}

static void s_pad(struct out *o, uint32_t alignment)
{
	static const uint8_t zeros[64];
	uint64_t target = ns_align_up_u64(o->pos, alignment);

	while (o->pos < target && !o->err) {
		uint64_t n = target - o->pos;
		s_put_bytes(o, zeros, n < sizeof(zeros) ? (size_t)n : sizeof(zeros));
	}
}

/* A new temporary file beside path, "path.<16 hex>", created O_EXCL. Returns the fd. */
static int s_create_tmp(const char *path, char *tmp, size_t n)
{
	for (int tries = 0; tries < 8; tries++) {
		uint64_t r;
		int fd;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -EIO;
		if (snprintf(tmp, n, "%s.%016llx", path, (unsigned long long)r) >= (int)n)
			return -ENAMETOOLONG;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			return fd >= 0 ? fd : -errno;
	}
	return -EEXIST;
}

/* Move the finished tmp to path; without replace, atomically only where path is free. */
static int s_move(const char *tmp, const char *path, bool replace)
{
	if (replace)
		return rename(tmp, path) == 0 ? 0 : -errno;
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* a filesystem without RENAME_NOREPLACE: link() fails the same way on an existing path */
	if (link(tmp, path) != 0)
		return -errno;
	unlink(tmp);
	return 0;
}

static int s_write(struct ns_gguf_writer *w, const char *path, bool replace, char *err,
		   size_t errlen);

int ns_gguf_writer_write_file(struct ns_gguf_writer *w, const char *path, char *err,
			      size_t errlen)
{
	return s_write(w, path, true, err, errlen);
}

int ns_gguf_writer_write_new(struct ns_gguf_writer *w, const char *path, char *err,
			     size_t errlen)
{
	if (access(path, F_OK) == 0) /* early, before writing gigabytes; s_move decides */
		return ns_errf(err, errlen, "%s exists; not replaced", path), -EEXIST;
	return s_write(w, path, false, err, errlen);
}

static int s_write(struct ns_gguf_writer *w, const char *path, bool replace, char *err,
		   size_t errlen)
{
	struct out o = { .fd = -1 };
	bool holes = false;
	char tmp[4096];
	uint64_t off = 0;
	int ret;

	if (w->alignment != NS_GGUF_DEFAULT_ALIGNMENT) {
		ret = ns_gguf_writer_set_u32(w, "general.alignment", w->alignment);
		if (ret)
			return ret;
	}
	for (size_t i = 0; i < w->n_t; i++) {
		w->t[i].offset = off;
		if (ns_add_u64_overflow(off, w->t[i].n_bytes + w->alignment, &off))
			return -EOVERFLOW;
		off = ns_align_up_u64(w->t[i].offset + w->t[i].n_bytes, w->alignment);
	}
	o.buf = malloc(S_OUT_BUF);
	if (!o.buf) {
		ns_errf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	o.fd = s_create_tmp(path, tmp, sizeof(tmp));
	if (o.fd < 0) {
		ret = o.fd;
		ns_errf(err, errlen, "%s: cannot create a temporary file beside it: %s", path,
			strerror(-ret));
		free(o.buf);
		return ret;
	}
	s_put_bytes(&o, "GGUF", 4);
	s_put_le(&o, 3, 4);
	s_put_le(&o, w->n_t, 8);
	s_put_le(&o, w->n_kv, 8);
	for (size_t i = 0; i < w->n_kv; i++) {
		s_put_str(&o, w->kv[i].key, strlen(w->kv[i].key));
		s_put_le(&o, w->kv[i].value.type, 4);
		s_put_value(&o, &w->kv[i].value);
	}
	for (size_t i = 0; i < w->n_t; i++) {
		const struct wtensor *t = &w->t[i];
		s_put_str(&o, t->name, strlen(t->name));
		s_put_le(&o, t->n_dims, 4);
		for (uint32_t d = 0; d < t->n_dims; d++)
			s_put_le(&o, t->ne[d], 8);
		s_put_le(&o, t->type, 4);
		s_put_le(&o, t->offset, 8);
	}
	s_pad(&o, w->alignment);
	for (size_t i = 0; i < w->n_t && !o.err; i++) {
		const struct wtensor *t = &w->t[i];
		if (t->data) {
			s_put_bytes(&o, t->data, (size_t)t->n_bytes);
		} else if (!t->fill) { /* a hole: zeros the file system does not store */
			s_flush(&o);
			if (!o.err && lseek(o.fd, (off_t)t->n_bytes, SEEK_CUR) < 0)
				o.err = -errno;
			o.pos += t->n_bytes;
			holes = true;
		} else {
			for (uint64_t done = 0; done < t->n_bytes && !o.err;) {
				size_t n = t->n_bytes - done < S_OUT_BUF - o.len ? (size_t)(t->n_bytes - done)
										  : S_OUT_BUF - o.len;
				ret = t->fill(t->fill_ctx, done, o.buf + o.len, n);
				if (ret) {
					o.err = ret;
					break;
				}
				o.len += n;
				o.pos += n;
				done += n;
				if (o.len == S_OUT_BUF)
					s_flush(&o);
			}
		}
		if (i + 1 < w->n_t)
			s_pad(&o, w->alignment);
	}
	s_flush(&o);
	if (!o.err && holes && ftruncate(o.fd, (off_t)o.pos) < 0) /* a hole at the end */
		o.err = -errno;
	if (!o.err && fsync(o.fd) < 0 && errno != EINVAL)
		o.err = -errno;
	if (close(o.fd) < 0 && !o.err)
		o.err = -errno;
	free(o.buf);
	if (!o.err)
		o.err = s_move(tmp, path, replace);
	if (o.err == -EEXIST) {
		ns_errf(err, errlen, "%s exists; not replaced", path);
		unlink(tmp);
		return o.err;
	}
	if (o.err) {
		ns_errf(err, errlen, "%s: write failed: %s", path, strerror(-o.err));
		unlink(tmp);
		return o.err;
	}
	return 0;
}
