/* test_vision_bad - a tower refuses what it cannot run, in one line, and survives failures.
 *
 *   1. Copies of the Qwen3-VL mmproj with one thing wrong (a tensor missing or mis-shaped, a
 *      projector we do not compute, heads that do not split the width, a DeepStack flag list of
 *      the wrong length, a position grid that is not square, a key missing, a text model):
 *      ns_vision_new refuses each with one line naming the key or tensor; the unchanged copy
 *      (control) runs and gives the original's outputs.
 *   2. ns_vision_encode refuses a grid that is not whole merge groups and a missing output.
 *   3. Fault injection: a provider whose k-th call fails, for every k of a whole setup and
 *      encode: the error comes back with the tensor's name, nothing crashes or leaks (ASan). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "ggml_type.h"
#include "gguf_write.h"
#include "ns_util.h"
#include "vision.h"
#include "vt_util.h"
#include "weights_fused.h"

#define S_MMPROJ "hf/qwen3_vl/gguf/mmproj-qwen3_vl-f32.gguf"

static int s_fails;

struct s_edit {
	const char *what;
	const char *drop_key;      /* metadata key left out */
	const char *str_key;       /* string key set to str_val */
	const char *str_val;
	const char *u32_key;       /* integer key set to u32_val */
	uint32_t u32_val;
	bool short_deepstack;      /* is_deepstack_layers with one flag */
	const char *drop_tensor;   /* tensor left out */
	const char *shape_tensor;  /* tensor whose last dim is halved */
	const char *want;          /* in the refusal line; NULL: accepted */
};

static void s_copy(const struct ns_model *m, const struct s_edit *e, const char *path)
{
	const struct ns_gguf *g = ns_model_meta(m);
	struct ns_gguf_writer *w = ns_gguf_writer_new(g->alignment);
	char err[NS_ERR_LEN];
	int fd = open(g->path, O_RDONLY);

	NS_REQUIRE(w && fd >= 0, "writer / open %s", g->path);
	for (uint64_t i = 0; i < g->n_kv; i++) {
		const struct ns_gguf_kv *kv = &g->kv[i];
		const char *key = kv->key.s;

		if (e->drop_key && !strcmp(key, e->drop_key))
			continue;
		if (e->str_key && !strcmp(key, e->str_key))
			NS_REQUIRE(!ns_gguf_writer_set_str(w, key, e->str_val), "set %s", key);
		else if (e->u32_key && !strcmp(key, e->u32_key))
			NS_REQUIRE(!ns_gguf_writer_set_u32(w, key, e->u32_val), "set %s", key);
		else if (e->short_deepstack && !strcmp(key, "clip.vision.is_deepstack_layers"))
			NS_REQUIRE(!ns_gguf_writer_set_arr(w, key, NS_GGUF_BOOL, "\1", 1), "set");
		else
			NS_REQUIRE(!ns_gguf_writer_set_value(w, key, &kv->value), "copy %s", key);
	}
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		uint64_t ne[4];
		void *data = malloc(t->n_bytes);

		if (e->drop_tensor && !strcmp(t->name, e->drop_tensor)) {
			free(data);
			continue;
		}
		memcpy(ne, t->ne, sizeof(ne));
		if (e->shape_tensor && !strcmp(t->name, e->shape_tensor))
			ne[t->n_dims - 1] /= 2;
		NS_REQUIRE(data && pread(fd, data, t->n_bytes, (off_t)t->file_offset) ==
				   (ssize_t)t->n_bytes, "read %s", t->name);
		NS_REQUIRE(!ns_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne, data,
						      t->n_bytes / (t->ne[t->n_dims - 1] / ne[t->n_dims - 1])),
			   "add %s", t->name);
		free(data);
	}
	NS_REQUIRE(!ns_gguf_writer_write_file(w, path, err, sizeof(err)), "%s", err);
	ns_gguf_writer_destroy(&w);
	close(fd);
}

static void s_edits(const struct ns_model *orig, const float *px, const float *want)
{
	static const struct s_edit edits[] = {
		{ .what = "unchanged copy (control)" },
		{ .what = "a tensor missing", .drop_tensor = "v.blk.1.ffn_down.weight",
		  .want = "v.blk.1.ffn_down.weight is missing" },
		{ .what = "a bias missing", .drop_tensor = "mm.0.bias", .want = "mm.0.bias" },
		{ .what = "a DeepStack matrix missing", .drop_tensor = "v.deepstack.0.fc2.weight",
		  .want = "v.deepstack.0.fc2.weight" },
		{ .what = "the merger's output half as wide", .shape_tensor = "mm.2.weight",
		  .want = "mm.2.weight has shape" },
		{ .what = "the position grid 64 x 18", .shape_tensor = "v.position_embd.weight",
		  .want = "not a square grid" },
		{ .what = "projector mlp", .str_key = "clip.projector_type", .str_val = "mlp",
		  .want = "only qwen3vl_merger" },
		{ .what = "3 heads for width 64", .u32_key = "clip.vision.attention.head_count",
		  .u32_val = 3, .want = "3 heads" },
		{ .what = "patch size 0", .u32_key = "clip.vision.patch_size", .u32_val = 0,
		  .want = "clip.vision.patch_size = 0" },
		{ .what = "no block count", .drop_key = "clip.vision.block_count",
		  .want = "clip.vision.block_count is missing" },
		{ .what = "DeepStack flags for 1 of 2 blocks", .short_deepstack = true,
		  .want = "is_deepstack_layers" },
		{ .what = "a text model", .str_key = "general.architecture", .str_val = "qwen3vl",
		  .want = "not an mmproj" },
	};
	const char *path = ns_test_scratch("vt_bad", "gguf");

	printf("damaged mmproj copies:\n");
	for (size_t i = 0; i < NS_ARRAY_LEN(edits); i++) {
		const struct s_edit *e = &edits[i];
		char err[NS_ERR_LEN] = "";
		struct ns_model *m;
		struct ns_weights *w;
		struct ns_vision *v = NULL;
		int rc;

		s_copy(orig, e, path);
		NS_REQUIRE(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s: %s", e->what, err);
		NS_REQUIRE(ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) == 0, "%s", err);
		rc = ns_vision_new(m, w, NULL, &v, err, sizeof(err));
		printf("  %-36s -> %s\n", e->what, rc ? err : "accepted");
		if (!e->want) {
			float embd[4 * 256], ds[4 * 256];
			struct ns_vision_out out = { .embd = embd, .deepstack = ds };

			NS_REQUIRE(rc == 0 && ns_vision_encode(v, px, 1, 4, 4, &out) == 0,
				   "%s: %s", e->what, err);
			NS_EXPECT(s_fails, !memcmp(embd, want, sizeof(embd)),
				  "the copy gives other outputs");
		} else {
			NS_EXPECT(s_fails, rc == -EINVAL && !v && strstr(err, e->want) &&
				  !strchr(err, '\n'), "%s: rc %d, '%s' lacks '%s'", e->what, rc, err,
				  e->want);
		}
		ns_vision_destroy(&v);
		ns_weights_destroy(&w);
		ns_model_close(&m);
	}
}

/* A provider over another that fails its k-th call (matmul or get_rows) with -EIO. */
struct s_faulty {
	struct ns_weights *inner;
	int64_t countdown;
	char err[64];
};

static int s_tick(struct s_faulty *f)
{
	if (f->countdown-- == 0) {
		snprintf(f->err, sizeof(f->err), "injected failure");
		return -EIO;
	}
	return 0;
}

static int s_f_matmul(void *ctx, uint32_t t, uint64_t r0, uint64_t r1, const float *x,
		      uint64_t n, float *y, uint64_t ldy)
{
	struct s_faulty *f = ctx;

	return s_tick(f) ? -EIO : ns_weights_matmul(f->inner, t, r0, r1, x, n, y, ldy);
}

static int s_f_get_rows(void *ctx, uint32_t t, const int64_t *rows, uint64_t n, float *dst)
{
	struct s_faulty *f = ctx;

	return s_tick(f) ? -EIO : ns_weights_get_rows(f->inner, t, rows, n, dst);
}

static const char *s_f_error(void *ctx)
{
	return ((struct s_faulty *)ctx)->err;
}

static void s_f_destroy(void *ctx)
{
	(void)ctx;
}

static const struct ns_weights_ops s_faulty_ops = {
	.name = "faulty", .matmul = s_f_matmul, .get_rows = s_f_get_rows,
	.last_error = s_f_error, .destroy = s_f_destroy,
};

static void s_faults(const struct ns_model *m, const float *px)
{
	struct ns_weights *inner;
	struct s_faulty f = { 0 };
	struct ns_weights w = { .ops = &s_faulty_ops, .ctx = &f, .model = m };
	char err[NS_ERR_LEN];
	int64_t k, calls = -1;

	NS_REQUIRE(ns_weights_fused_new(m, NULL, &inner, err, sizeof(err)) == 0, "%s", err);
	f.inner = inner;
	for (k = 0; calls < 0 || k < calls; k++) {
		float embd[4 * 256], ds[4 * 256];
		struct ns_vision_out out = { .embd = embd, .deepstack = ds };
		struct ns_vision *v = NULL;
		int rc;

		f.countdown = k;
		rc = ns_vision_new(m, &w, NULL, &v, err, sizeof(err));
		if (rc == 0 && (rc = ns_vision_encode(v, px, 1, 4, 4, &out)) < 0)
			snprintf(err, sizeof(err), "%s", ns_vision_error(v));
		if (rc == 0) {
			calls = k; /* k calls were made, none failed: each has failed once before */
			NS_EXPECT(s_fails, f.countdown == 0, "%lld calls, not %lld",
				  (long long)(k - f.countdown), (long long)k);
		} else {
			NS_EXPECT(s_fails, rc == -EIO && strstr(err, "injected failure") &&
				  strstr(err, "vision: "), "call %lld: rc %d '%s'", (long long)k, rc,
				  err);
		}
		ns_vision_destroy(&v);
		if (calls >= 0)
			break;
	}
	printf("fault injection: each of the %lld provider calls of a setup and an encode failed "
	       "once, each reported in one line\n", (long long)calls);
	ns_weights_destroy(&inner);
}

static void s_bad_calls(const struct ns_model *m, const float *px)
{
	struct ns_weights *w;
	struct ns_vision *v;
	char err[NS_ERR_LEN];
	float embd[4 * 256], ds[4 * 256];
	struct ns_vision_out out = { .embd = embd, .deepstack = NULL };

	NS_REQUIRE(ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_vision_new(m, w, NULL, &v, err, sizeof(err)) == 0, "%s", err);
	NS_EXPECT(s_fails, ns_vision_encode(v, px, 1, 4, 4, &out) == -EINVAL,
		  "no DeepStack output accepted");
	out.deepstack = ds;
	NS_EXPECT(s_fails, ns_vision_encode(v, px, 1, 3, 4, &out) == -EINVAL,
		  "a 3x4 grid accepted");
	NS_EXPECT(s_fails, ns_vision_encode(v, px, 0, 4, 4, &out) == -EINVAL, "0 frames accepted");
	printf("encode refuses: no DeepStack output, grid 3x4, 0 frames (%s)\n", ns_vision_error(v));
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);
}

int main(void)
{
	char path[4096], err[NS_ERR_LEN];
	struct ns_model *m;
	struct ns_weights *w;
	struct ns_vision *v;
	float *px, want[4 * 256], ds[4 * 256];
	struct ns_vision_out out = { .embd = want, .deepstack = ds };

	ns_test_require_oracle();
	atexit(ns_test_scratch_remove);
	NS_REQUIRE(ns_model_open(ns_test_oracle_path(path, sizeof(path), S_MMPROJ), &m, err,
				 sizeof(err)) == 0, "%s", err);
	px = vt_read_f32("hf/qwen3_vl/image.pixel_values.f32", 16 * 1536);
	NS_REQUIRE(ns_weights_fused_new(m, NULL, &w, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_vision_new(m, w, NULL, &v, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_vision_encode(v, px, 1, 4, 4, &out) == 0, "%s", ns_vision_error(v));
	ns_vision_destroy(&v);
	ns_weights_destroy(&w);

	s_edits(m, px, want);
	s_bad_calls(m, px);
	s_faults(m, px);
	free(px);
	ns_model_close(&m);
	if (s_fails)
		return 1;
	printf("ok\n");
	return 0;
}
