/* nsctl tensor MODEL NAME [--rows A:B] -o FILE
 *
 * Writes the dequantized float32 values of one tensor (or of rows A <= row < B, rows counted
 * over all leading dims, as ns_model_tensor.n_rows) to FILE as raw little-endian floats,
 * row-major, and prints the tensor's type and shape. Only the needed rows are read, with
 * pread, in batches of whole rows (ns_model_read_rows: a checkpoint's tensor as its GGUF
 * conversion holds it). FILE "-" writes to stdout (the description then goes to stderr).
 * Exit: 0 ok, 1 I/O failure, 2 bad usage, bad model, unknown tensor, bad rows or a type
 * neurostream cannot dequantize. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_opt.h"
#include "commands.h"
#include "dequant.h"
#include "ggml_type.h"
#include "model.h"
#include "ns_util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "nsctl tensor writes host floats as little-endian"
#endif

#define S_BATCH_OUT_BYTES (16u << 20) /* floats produced per batch, at least one row */

static int s_usage(FILE *f)
{
	fprintf(f, "usage: nsctl tensor MODEL NAME [--rows A:B] -o FILE\n"
		"  -m, --model MODEL  the model (then the first argument is NAME)\n"
		"  -o, --output FILE  where the rows go as float32 ('-': stdout)\n");
	return 2;
}

/* One line naming what is wrong with the command line; returns 2. */
static int s_bad(const char *what, const char *arg)
{
	fprintf(stderr, "nsctl tensor: %s%s%s (usage: nsctl tensor MODEL NAME [--rows A:B] "
		"-o FILE)\n", what, arg ? " " : "", arg ? arg : "");
	return 2;
}

static int s_parse_u64(const char *s, const char *end, uint64_t *out)
{
	uint64_t v = 0;

	if (s == end)
		return -EINVAL;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

/* "A:B", "A:" (to the end) or ":B" against n_rows. */
static int s_parse_rows(const char *text, uint64_t n_rows, uint64_t *a, uint64_t *b)
{
	const char *colon = strchr(text, ':');
	const char *end = text + strlen(text);

	if (!colon)
		return -EINVAL;
	*a = 0;
	*b = n_rows;
	if (colon > text && s_parse_u64(text, colon, a))
		return -EINVAL;
	if (colon + 1 < end && s_parse_u64(colon + 1, end, b))
		return -EINVAL;
	if (*a > *b || *b > n_rows)
		return -ERANGE;
	return 0;
}

/* Dequantize rows [a, b) of t (read through ns_model_read_rows, so a checkpoint's tensor
 * comes out as its GGUF conversion holds it) into out in batches. Returns 0, or 1 / 2 (exit
 * codes) after printing one line. */
static int s_copy_rows(const struct ns_model *m, const struct ns_model_tensor *t, const int *fds,
		       const char *model_path, uint64_t a, uint64_t b, FILE *out,
		       const char *out_path)
{
	uint64_t row_out = t->ne[0] * sizeof(float);
	uint64_t batch = S_BATCH_OUT_BYTES / row_out ? S_BATCH_OUT_BYTES / row_out : 1;
	uint8_t *raw = NULL;
	float *vals = NULL;
	int ret = 0;

	if (b == a || row_out == 0)
		return 0;
	if (batch > b - a)
		batch = b - a;
	raw = malloc((size_t)(batch * t->row_bytes));
	vals = malloc((size_t)(batch * row_out));
	if (!raw || !vals) {
		fprintf(stderr, "nsctl tensor: out of memory for %" PRIu64 " rows of %s\n", batch, t->name);
		ret = 1;
		goto out;
	}
	for (uint64_t r = a; r < b; r += batch) {
		uint64_t n = b - r < batch ? b - r : batch;
		int rc = ns_model_read_rows(m, fds, t, r, n, raw);

		if (rc) {
			fprintf(stderr, "nsctl tensor: %s: reading rows of %s: %s\n", model_path, t->name,
				rc == -EIO ? "file is truncated" : strerror(-rc));
			ret = rc == -EIO ? 2 : 1;
			goto out;
		}
		rc = ns_dequant_rows(t->type, raw, t->ne[0], n, vals);
		if (rc) {
			fprintf(stderr, "nsctl tensor: %s: cannot dequantize %s: %s\n", model_path,
				t->name, strerror(-rc));
			ret = 2;
			goto out;
		}
		if (fwrite(vals, 1, (size_t)(n * row_out), out) != (size_t)(n * row_out)) {
			fprintf(stderr, "nsctl tensor: writing %s: %s\n", out_path, strerror(errno));
			ret = 1;
			goto out;
		}
	}
out:
	free(raw);
	free(vals);
	return ret;
}

enum { O_HELP = 1, O_MODEL, O_ROWS, O_OUT };

static const struct ns_opt s_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "rows", NULL, NS_OPT_VALUE, O_ROWS },
	{ "output", "-o", NS_OPT_VALUE, O_OUT },
};

struct s_args {
	const char *model_path, *name, *rows, *out_path;
};

static int s_on_opt(void *user, const struct ns_opt *o, const char *f, const char *v)
{
	struct s_args *a = user;

	switch (o ? o->id : 0) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_ROWS:
		a->rows = v;
		return 0;
	case O_OUT:
		a->out_path = v;
		return 0;
	case O_MODEL:
		if (a->model_path) {
			fprintf(stderr, "nsctl tensor: %s '%s': a model was given already ('%s')\n",
				f, v, a->model_path);
			return -EINVAL;
		}
		a->model_path = v;
		return 0;
	}
	if (!a->model_path)
		a->model_path = v;
	else if (!a->name)
		a->name = v;
	else
		return s_bad("unexpected argument", v) ? -EINVAL : 0;
	return 0;
}

int cmd_tensor(int argc, char **argv)
{
	const char *model_path = NULL, *name = NULL, *rows = NULL, *out_path = NULL;
	char err[NS_ERR_LEN], tbuf[32];
	const char *tn;
	struct ns_model *m = NULL;
	const struct ns_model_tensor *t;
	uint64_t a, b, bytes;
	FILE *out = NULL, *info;
	int *fds = NULL, ret = 2, rc;
	bool to_stdout;

	struct s_args args = { 0 };

	if (ns_opt_parse("nsctl tensor", s_opts, NS_ARRAY_LEN(s_opts), argc, argv, s_on_opt,
			 &args))
		return 2;
	model_path = args.model_path;
	name = args.name;
	rows = args.rows;
	out_path = args.out_path;
	if (!model_path || !name || !out_path)
		return s_bad(!model_path ? "no MODEL given" : !name ? "no tensor NAME given" :
			     "-o FILE is required", NULL);
	rc = ns_model_open(model_path, &m, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "nsctl tensor: %s\n", err);
		return 2;
	}
	t = ns_model_find(m, name);
	if (!t) {
		fprintf(stderr, "nsctl tensor: %s: no tensor named '%s'\n", model_path, name);
		goto done;
	}
	tn = ns_type_name(t->type, tbuf, sizeof(tbuf));
	if (!ns_type_computable(t->type) || ns_dequant_rows(t->type, NULL, t->ne[0], 0, NULL)) {
		fprintf(stderr, "nsctl tensor: %s: tensor %s has type %s, "
			"which neurostream cannot dequantize\n", model_path, name, tn);
		goto done;
	}
	a = 0;
	b = t->n_rows;
	if (rows && s_parse_rows(rows, t->n_rows, &a, &b)) {
		fprintf(stderr, "nsctl tensor: bad --rows '%s' for %s (%" PRIu64 " rows): "
			"want A:B with 0 <= A <= B <= %" PRIu64 "\n", rows, name, t->n_rows, t->n_rows);
		goto done;
	}
	if (ns_mul_u64_overflow(b - a, t->ne[0], &bytes) || ns_mul_u64_overflow(bytes, 4, &bytes)) {
		fprintf(stderr, "nsctl tensor: %s: %s is too large\n", model_path, name);
		goto done;
	}
	if (ns_model_open_fds(m, &fds, err, sizeof(err))) {
		fprintf(stderr, "nsctl tensor: %s\n", err);
		ret = 1;
		goto done;
	}
	to_stdout = !strcmp(out_path, "-");
	out = to_stdout ? stdout : fopen(out_path, "wb");
	if (!out) {
		fprintf(stderr, "nsctl tensor: cannot create %s: %s\n", out_path, strerror(errno));
		ret = 1;
		goto done;
	}
	ret = s_copy_rows(m, t, fds, model_path, a, b, out, out_path);
	rc = to_stdout ? fflush(out) : fclose(out);
	out = NULL;
	if (rc && !ret) {
		fprintf(stderr, "nsctl tensor: writing %s: %s\n", out_path, strerror(errno));
		ret = 1;
	}
	if (ret)
		goto done;
	info = to_stdout ? stderr : stdout;
	fprintf(info, "%s: type %s, ne [", name, tn);
	for (uint32_t d = 0; d < (t->n_dims ? t->n_dims : 1); d++)
		fprintf(info, "%s%" PRIu64, d ? ", " : "", t->ne[d]);
	fprintf(info, "], %" PRIu64 " rows of %" PRIu64 "; wrote rows %" PRIu64 ":%" PRIu64
		" = %" PRIu64 " floats (%" PRIu64 " bytes) to %s\n",
		t->n_rows, t->ne[0], a, b, bytes / 4, bytes, out_path);
done:
	ns_model_close_fds(m, &fds);
	ns_model_close(&m);
	return ret;
}
