/* test_read_sliced - ns_model_read_tensor_sliced (model.h): a whole tensor read in slices with
 * a heartbeat after each, as nscompute reads a draft model or an MTP block.
 *
 * For every tensor of a GGUF (tiny-llama Q4_K_M: plain reads) and of a safetensors checkpoint
 * (hf/qwen3_5/model-bf16: rows converted through their sources), at three slice sizes (under
 * a row, a few rows and a non-multiple of the row, the whole tensor): the bytes equal one
 * ns_model_read_rows of the whole tensor, and beat is called exactly once per slice. A read
 * past the file's end (a truncated copy) returns the error and stops beating.
 * Exits 0 pass, 1 fail, 77 skip (no oracle outside CI). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "ns_test.h"
#include "ns_util.h"

static int s_fails;

#define EXPECT(cond, ...) NS_EXPECT(s_fails, cond, __VA_ARGS__)

static void s_count(void *user)
{
	(*(uint64_t *)user)++;
}

static void s_check_model(const char *rel)
{
	char path[1024], err[256];
	struct ns_model *m = NULL;
	int *fds = NULL;

	ns_test_oracle_path(path, sizeof(path), rel);
	NS_REQUIRE(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_model_open_fds(m, &fds, err, sizeof(err)) == 0, "%s", err);
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		/* under a row (one row a slice), three rows and a bit, the whole tensor */
		const uint64_t slices[] = { 1, 3 * t->row_bytes + 7, t->n_rows * t->row_bytes };
		uint8_t *whole = malloc(t->n_bytes + 1), *part = malloc(t->n_bytes + 1);

		NS_REQUIRE(whole && part, "oom");
		NS_REQUIRE(ns_model_read_rows(m, fds, t, 0, t->n_rows, whole) == 0, "%s: read %s",
			   rel, t->name);
		for (unsigned k = 0; k < NS_ARRAY_LEN(slices); k++) {
			uint64_t step = slices[k] / t->row_bytes ? slices[k] / t->row_bytes : 1;
			uint64_t beats = 0, want = (t->n_rows + step - 1) / step;

			if (k == 0 && t->n_rows > 4096)
				continue; /* a beat per row: the small tensors are enough */
			memset(part, 0xa5, t->n_bytes);
			EXPECT(ns_model_read_tensor_sliced(m, fds, t, slices[k], s_count, &beats,
							   part) == 0, "%s: sliced read of %s",
			       rel, t->name);
			EXPECT(!memcmp(whole, part, t->n_bytes), "%s: %s read in slices of %llu "
			       "bytes differs from one read", rel, t->name,
			       (unsigned long long)slices[k]);
			EXPECT(beats == want, "%s: %s in slices of %llu bytes: %llu beats, want %llu",
			       rel, t->name, (unsigned long long)slices[k],
			       (unsigned long long)beats, (unsigned long long)want);
		}
		free(whole);
		free(part);
	}
	ns_model_close_fds(m, &fds);
	ns_model_close(&m);
}

/* A copy of the GGUF cut inside its last tensor: the sliced read of that tensor fails with
 * the read's error, and beats only for the slices read before the cut. */
static void s_check_truncated(void)
{
	char src[1024], err[256], name[256], *path = ns_test_scratch("ns_sliced", "gguf");
	struct ns_model *m = NULL;
	const struct ns_model_tensor *t = NULL;
	int *fds = NULL;
	uint64_t beats = 0, cut;
	size_t len;
	uint8_t *bytes, *dst;
	FILE *fp;

	ns_test_oracle_path(src, sizeof(src), "tiny/tiny-llama-Q4_K_M.gguf");
	NS_REQUIRE((bytes = (uint8_t *)ns_test_read_file(src, &len)), "cannot read %s", src);
	NS_REQUIRE(ns_model_open(src, &m, err, sizeof(err)) == 0, "%s", err);
	for (uint64_t i = 0; i < m->n_tensors; i++) /* the tensor that ends last */
		if (!t || m->tensors[i].file_offset > t->file_offset)
			t = &m->tensors[i];
	NS_REQUIRE(t && t->n_rows >= 4, "no tensor of 4 rows to cut");
	cut = t->file_offset + 2 * t->row_bytes + 1; /* inside the third row */
	snprintf(name, sizeof(name), "%s", t->name); /* t goes with m */
	ns_model_close(&m);
	NS_REQUIRE((fp = fopen(path, "wb")) && fwrite(bytes, 1, len, fp) == len && !fclose(fp),
		   "write %s", path);
	NS_REQUIRE(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(truncate(path, (off_t)cut) == 0, "truncate");
	NS_REQUIRE(ns_model_open_fds(m, &fds, err, sizeof(err)) == 0, "%s", err);
	t = ns_model_find(m, name);
	NS_REQUIRE(t && (dst = malloc(t->n_bytes)), "oom");
	EXPECT(ns_model_read_tensor_sliced(m, fds, t, t->row_bytes, s_count, &beats, dst) ==
	       -EIO, "a read past the file's end must fail with -EIO");
	EXPECT(beats == 2, "beats before the cut: %llu, want 2", (unsigned long long)beats);
	free(dst);
	free(bytes);
	ns_model_close_fds(m, &fds);
	ns_model_close(&m);
}

int main(void)
{
	ns_test_require_oracle();
	s_check_model("tiny/tiny-llama-Q4_K_M.gguf");
	s_check_model("hf/qwen3_5/model-bf16");
	s_check_truncated();
	ns_test_scratch_remove();
	if (s_fails)
		fprintf(stderr, "%d checks failed\n", s_fails);
	return s_fails ? 1 : 0;
}
