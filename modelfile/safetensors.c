/* safetensors.c - one safetensors file's header, read with a bounded pread and jansson. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ns_util.h"

static const struct {
	const char *name;
	uint32_t size;
} s_dtypes[NS_ST_DTYPE_COUNT] = {
	[NS_ST_BOOL] = { "BOOL", 1 },       [NS_ST_U8] = { "U8", 1 },
	[NS_ST_I8] = { "I8", 1 },           [NS_ST_F8_E4M3] = { "F8_E4M3", 1 },
	[NS_ST_F8_E5M2] = { "F8_E5M2", 1 }, [NS_ST_I16] = { "I16", 2 },
	[NS_ST_U16] = { "U16", 2 },         [NS_ST_F16] = { "F16", 2 },
	[NS_ST_BF16] = { "BF16", 2 },       [NS_ST_I32] = { "I32", 4 },
	[NS_ST_U32] = { "U32", 4 },         [NS_ST_F32] = { "F32", 4 },
	[NS_ST_I64] = { "I64", 8 },         [NS_ST_U64] = { "U64", 8 },
	[NS_ST_F64] = { "F64", 8 },
};

const char *ns_st_dtype_name(enum ns_st_dtype t)
{
	return (unsigned)t < NS_ST_DTYPE_COUNT ? s_dtypes[t].name : "?";
}

uint32_t ns_st_dtype_size(enum ns_st_dtype t)
{
	return (unsigned)t < NS_ST_DTYPE_COUNT ? s_dtypes[t].size : 0;
}

void ns_st_close(struct ns_st_file **pf)
{
	struct ns_st_file *f = pf ? *pf : NULL;

	if (!f)
		return;
	for (uint64_t i = 0; f->tensors && i < f->n_tensors; i++)
		free(f->tensors[i].name);
	free(f->tensors);
	free(f->path);
	free(f);
	*pf = NULL;
}

int64_t ns_st_find(const struct ns_st_file *f, const char *name)
{
	for (uint64_t i = 0; i < f->n_tensors; i++)
		if (!strcmp(f->tensors[i].name, name))
			return (int64_t)i;
	return -1;
}

static int s_pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;
		got += (size_t)r;
	}
	return 0;
}

/* A JSON integer >= 0. */
static int s_uint(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int s_dtype(const char *s, enum ns_st_dtype *out)
{
	for (int t = 0; t < NS_ST_DTYPE_COUNT; t++) {
		if (!strcmp(s, s_dtypes[t].name)) {
			*out = (enum ns_st_dtype)t;
			return 0;
		}
	}
	return -EINVAL;
}

/* One header entry into t; data_bytes is the size of the data section. */
static int s_entry(const struct ns_st_file *f, const char *name, const json_t *e,
		   uint64_t data_bytes, struct ns_st_tensor *t, char *err, size_t errlen)
{
	const json_t *dtype = json_object_get(e, "dtype");
	const json_t *shape = json_object_get(e, "shape");
	const json_t *offs = json_object_get(e, "data_offsets");
	uint64_t begin, end, bytes = 1;
	size_t i;
	const json_t *d;

	if (!json_is_object(e) || !json_is_string(dtype) || !json_is_array(shape) ||
	    !json_is_array(offs) || json_array_size(offs) != 2) {
		ns_errf(err, errlen, "%s: offset 8: tensor '%s' needs dtype, shape and "
			"data_offsets [begin, end]", f->path, name);
		return -EINVAL;
	}
	if (s_dtype(json_string_value(dtype), &t->dtype)) {
		ns_errf(err, errlen, "%s: offset 8: tensor '%s' has unknown dtype '%s'", f->path,
			name, json_string_value(dtype));
		return -EINVAL;
	}
	if (json_array_size(shape) > NS_ST_MAX_DIMS) {
		ns_errf(err, errlen, "%s: offset 8: tensor '%s' has %zu dimensions (at most %d)",
			f->path, name, json_array_size(shape), NS_ST_MAX_DIMS);
		return -EINVAL;
	}
	t->n_dims = (uint32_t)json_array_size(shape);
	t->n_elems = 1;
	json_array_foreach(shape, i, d) {
		if (s_uint(d, &t->shape[i]) ||
		    ns_mul_u64_overflow(t->n_elems, t->shape[i], &t->n_elems)) {
			ns_errf(err, errlen, "%s: offset 8: tensor '%s' has an invalid shape", f->path,
				name);
			return -EINVAL;
		}
	}
	if (s_uint(json_array_get(offs, 0), &begin) || s_uint(json_array_get(offs, 1), &end) ||
	    begin > end) {
		ns_errf(err, errlen, "%s: offset 8: tensor '%s' has invalid data_offsets", f->path,
			name);
		return -EINVAL;
	}
	if (ns_mul_u64_overflow(t->n_elems, ns_st_dtype_size(t->dtype), &bytes) ||
	    bytes != end - begin) {
		ns_errf(err, errlen, "%s: offset 8: tensor '%s' (%s, %" PRIu64 " elements) needs "
			"%" PRIu64 " bytes but data_offsets span %" PRIu64, f->path, name,
			ns_st_dtype_name(t->dtype), t->n_elems, bytes, end - begin);
		return -EINVAL;
	}
	if (end > data_bytes) {
		ns_errf(err, errlen, "%s: offset %" PRIu64 ": tensor '%s' ends at byte %" PRIu64
			" of the data but the file holds %" PRIu64 " data bytes (truncated?)",
			f->path, f->data_offset + begin, name, end, data_bytes);
		return -EINVAL;
	}
	t->file_offset = f->data_offset + begin;
	t->n_bytes = end - begin;
	t->name = strdup(name);
	return t->name ? 0 : -ENOMEM;
}

static int s_cmp_offset(const void *a, const void *b)
{
	const struct ns_st_tensor *x = *(const struct ns_st_tensor *const *)a;
	const struct ns_st_tensor *y = *(const struct ns_st_tensor *const *)b;

	return x->file_offset < y->file_offset ? -1 : x->file_offset > y->file_offset;
}

/* Tensors may not share bytes (zero-sized ones share nothing). */
static int s_check_overlap(const struct ns_st_file *f, char *err, size_t errlen)
{
	const struct ns_st_tensor **v;
	int ret = 0;

	if (f->n_tensors < 2)
		return 0;
	v = malloc((size_t)f->n_tensors * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint64_t i = 0; i < f->n_tensors; i++)
		v[i] = &f->tensors[i];
	qsort(v, (size_t)f->n_tensors, sizeof(*v), s_cmp_offset);
	for (uint64_t i = 1; i < f->n_tensors && !ret; i++) {
		const struct ns_st_tensor *p = v[i - 1];

		if (p->n_bytes && v[i]->n_bytes && v[i]->file_offset < p->file_offset + p->n_bytes) {
			ns_errf(err, errlen, "%s: offset %" PRIu64 ": tensors '%s' and '%s' overlap",
				f->path, v[i]->file_offset, p->name, v[i]->name);
			ret = -EINVAL;
		}
	}
	free(v);
	return ret;
}

static int s_parse(struct ns_st_file *f, const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	const char *name;
	json_t *e;
	int ret = 0;

	if (!root) {
		ns_errf(err, errlen, "%s: offset %" PRIu64 ": the header is not valid JSON (%s)",
			f->path, 8 + (uint64_t)(je.position > 0 ? je.position : 0), je.text);
		return -EINVAL;
	}
	if (!json_is_object(root)) {
		ns_errf(err, errlen, "%s: offset 8: the header is not a JSON object", f->path);
		json_decref(root);
		return -EINVAL;
	}
	f->tensors = calloc(json_object_size(root) + 1, sizeof(*f->tensors));
	if (!f->tensors) {
		json_decref(root);
		return -ENOMEM;
	}
	json_object_foreach(root, name, e) {
		if (!strcmp(name, "__metadata__"))
			continue;
		ret = s_entry(f, name, e, f->file_size - f->data_offset, &f->tensors[f->n_tensors],
			      err, errlen);
		if (ret)
			break;
		f->n_tensors++;
	}
	json_decref(root);
	return ret ? ret : s_check_overlap(f, err, errlen);
}

int ns_st_open(const char *path, struct ns_st_file **out, char *err, size_t errlen)
{
	struct ns_st_file *f = NULL;
	uint8_t lenb[8];
	uint64_t hlen = 0;
	char *text = NULL;
	struct stat st;
	int fd, ret;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		ns_errf(err, errlen, "%s: %s", path, strerror(errno));
		return ret;
	}
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path)))
		goto oom;
	if (fstat(fd, &st)) {
		ret = -errno;
		ns_errf(err, errlen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	f->file_size = (uint64_t)st.st_size;
	if (f->file_size < 8 || s_pread_all(fd, lenb, 8, 0)) {
		ns_errf(err, errlen, "%s: offset 0: too short for a safetensors header (%" PRIu64
			" bytes)", path, f->file_size);
		ret = -EINVAL;
		goto fail;
	}
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | lenb[i];
	if (hlen < 2 || hlen > NS_ST_MAX_HEADER_BYTES || hlen > f->file_size - 8) {
		ns_errf(err, errlen, "%s: offset 0: header length %" PRIu64 " does not fit the "
			"file (%" PRIu64 " bytes; at most %llu)", path, hlen, f->file_size,
			NS_ST_MAX_HEADER_BYTES);
		ret = -EINVAL;
		goto fail;
	}
	f->data_offset = 8 + hlen;
	text = malloc((size_t)hlen);
	if (!text)
		goto oom;
	ret = s_pread_all(fd, text, (size_t)hlen, 8);
	if (ret) {
		ns_errf(err, errlen, "%s: offset 8: reading the header: %s", path, strerror(-ret));
		goto fail;
	}
	ret = s_parse(f, text, (size_t)hlen, err, errlen);
	if (ret == -ENOMEM)
		goto oom;
	if (ret)
		goto fail;
	free(text);
	close(fd);
	*out = f;
	return 0;
oom:
	ns_errf(err, errlen, "%s: out of memory", path);
	ret = -ENOMEM;
fail:
	free(text);
	close(fd);
	ns_st_close(&f);
	return ret;
}
