/* test_vision_nsio - the vision tower's weights streamed through nsio beside the text model's,
 * under budgets smaller than the tower (issue 21 item 2's budget requirement).
 *
 *   test_vision_nsio MODEL MMPROJ DIR
 *
 * Reference: the resident path, in this process: the fused provider over the mmproj and over
 * the model (weights in RAM), the tower over DIR/image.pixel_values.f32, then the prompt
 * DIR/seqA.json's vision.mm_tokens through ns_fwd_eval_mm (every row's logits).
 * Then nsio serves both files (--model MODEL --mmproj MMPROJ: one tensor table) through arenas
 * of 256 KiB and 1 MiB (the mmproj alone is 1.7 MB), with block rows 0 (as large as the arena
 * allows) and 5, and the tower and the decoder run over two streaming providers on one client,
 * as nscompute does. Each of the four runs:
 *   - tower outputs and logits bit-identical to the resident path's;
 *   - from nsio's bytes_requested counter: the tower's setup reads exactly its held tensors
 *     (biases, norms, both patch kernels) once; one image reads exactly the position grid and
 *     every matrix once (n_batch 0: one chunk), and with n_batch 4 (4 chunks) every matrix
 *     once per chunk; a second image reads the same again: nothing is held between images;
 *   - the arena's peak within the budget; what the tower holds (ns_vision_held) is
 *     ns_vision_held_bytes less its setup transient (what nsctl counts in the fixed set).
 * Bad cases: nsio --mmproj of a missing file, of a file that is not a GGUF, of the model itself
 * (its names twice): exit 2, one line. A tower provider on an nsio serving no mmproj: refused
 * in one line naming the tensor. The mmproj unlinked while served: still read (nsio holds it
 * open), same outputs; cut short while served: the encode fails with one line naming the
 * tensor (nsio explains the read in its own line), no crash or hang.
 * Exit 0 pass, 1 fail, 77 skip (oracle missing outside CI). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "forward.h"
#include "io_testlib.h"
#include "vision_impl.h"
#include "vt_util.h"
#include "weights_fused.h"
#include "weights_stream.h"

#define IMAGE_ID 1000
#define S_PATCHES 16u

struct s_ref {
	uint32_t n, n_vocab, n_embd, n_ds, n_img;
	int32_t tok[64], pos[64 * 3];
	uint8_t is_embd[64];
	float *px, *embd, *ds, *logits; /* the tower's outputs; (n, n_vocab) */
};

/* The tower over the pixels into embd / ds; the prompt's logits through text provider tw. */
static int s_run(struct ns_vision *v, const struct ns_model *text, struct ns_weights *tw,
		 struct s_ref *r, float *embd, float *ds, float *logits)
{
	struct ns_fwd_opts fo = { .n_ctx = 64 };
	struct ns_fwd_mm_grid grid = { 1, 2, 2 };
	struct ns_fwd *f = NULL;
	char err[NS_ERR_LEN];
	float *rows, *rows_ds = NULL;
	int32_t next;
	int rc;

	if ((rc = ns_vision_encode(v, r->px, 1, 4, 4, &(struct ns_vision_out){ embd, ds, NULL })))
		return rc;
	NS_REQUIRE(ns_fwd_mm_positions(r->tok, r->n, IMAGE_ID, &grid, 1, 0, r->pos, r->is_embd,
				       &next, err, sizeof(err)) == 0, "positions: %s", err);
	rows = calloc((size_t)r->n * r->n_embd, sizeof(float));
	if (r->n_ds)
		rows_ds = calloc((size_t)r->n_ds * r->n * r->n_embd, sizeof(float));
	NS_REQUIRE(rows && (!r->n_ds || rows_ds), "out of memory");
	for (uint32_t i = 0, k = 0; i < r->n; i++) {
		if (!r->is_embd[i])
			continue;
		memcpy(rows + (size_t)i * r->n_embd, embd + (size_t)k * r->n_embd,
		       r->n_embd * sizeof(float));
		for (uint32_t l = 0; l < r->n_ds; l++)
			memcpy(rows_ds + ((size_t)l * r->n + i) * r->n_embd,
			       ds + ((size_t)l * r->n_img + k) * r->n_embd, r->n_embd * sizeof(float));
		k++;
	}
	NS_REQUIRE(ns_fwd_new(text, tw, &fo, &f, err, sizeof(err)) == 0, "forward: %s", err);
	rc = ns_fwd_eval_mm(f, r->tok, r->n, &(struct ns_fwd_mm){ .is_embd = r->is_embd,
		.embd = rows, .deepstack = rows_ds, .n_deepstack = r->n_ds, .pos = r->pos },
		logits, true);
	NS_REQUIRE(rc == 0, "eval_mm: %s", ns_fwd_error(f));
	ns_fwd_destroy(&f);
	free(rows);
	free(rows_ds);
	return 0;
}

/* Bytes of the tensors the tower holds (all but matrices and the position grid), of its
 * matrices, of the grid. */
static void s_tensor_bytes(const struct ns_vision *v, uint64_t *held, uint64_t *mats,
			   uint64_t *grid)
{
	*held = *mats = 0;
	*grid = v->m->tensors[v->pos].n_bytes;
	for (uint64_t i = 0; i < v->m->n_tensors; i++) {
		const struct ns_model_tensor *t = &v->m->tensors[i];

		if (i != v->pos)
			*(t->n_dims == 2 ? mats : held) += t->n_bytes;
	}
}

static uint64_t s_requested(struct ns_session *s)
{
	return atomic_load(&s->ctl->stats.bytes_requested);
}

static struct ns_session *s_session(uint64_t arena)
{
	struct ns_session_params sp = NS_SESSION_PARAMS_DEFAULT;
	struct ns_session *s;
	char err[NS_ERR_LEN];

	sp.arena_bytes = arena;
	NS_REQUIRE(ns_session_create(&sp, &s, err, sizeof(err)) == 0, "session: %s", err);
	return s;
}

/* nsio refusing to start: exit 2 and exactly one line containing want. */
static void s_refused(const char *what, const char *model, const char *mmproj, const char *want)
{
	const char *args[] = { "--model", model, "--mmproj", mmproj, "--mem-budget", "1MB",
			       "--quiet", NULL };
	char out[4096];
	int st = iot_run_nsio(args, out, sizeof(out));
	char *nl = strchr(out, '\n');

	NS_REQUIRE(st == 2 && nl && !nl[1] && strstr(out, want),
		   "nsio --mmproj %s: exit %d, output '%s' (want one line with '%s')", what, st, out,
		   want);
	printf("refused, %s: %s", what, out);
}

static void s_copy(const char *from, const char *to)
{
	size_t len = 0;
	void *p = ns_test_read_file(from, &len);
	int fd = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	NS_REQUIRE(p && fd >= 0 && write(fd, p, len) == (ssize_t)len && close(fd) == 0,
		   "copy %s to %s", from, to);
	free(p);
}

int main(int argc, char **argv)
{
	const uint64_t arenas[2] = { 256ull << 10, 1ull << 20 }, block_rows[2] = { 0, 5 };
	const char *extra[] = { "--mmproj", NULL, "--quiet", NULL };
	struct ns_weights_fused_opts fopt = { .n_threads = 2 };
	struct ns_model *text, *tower;
	struct ns_weights *wt, *wv;
	struct ns_vision *v;
	struct s_ref r = { 0 };
	char mpath[4096], vpath[4096], tmp[4096], err[NS_ERR_LEN];
	uint64_t held, mats, grid, out_n, ds_n;
	float *embd, *ds, *logits;
	size_t lg_n;

	NS_REQUIRE(argc == 4, "usage: %s MODEL MMPROJ DIR", argv[0]);
	ns_test_require_oracle();
	ns_test_oracle_path(mpath, sizeof(mpath), argv[1]);
	ns_test_oracle_path(vpath, sizeof(vpath), argv[2]);
	NS_REQUIRE(ns_model_open(mpath, &text, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_model_open(vpath, &tower, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(tower->total_file_bytes > arenas[1], "the mmproj is not larger than the arenas");
	r.n = vt_mm_tokens(argv[3], r.tok, 64);

	/* the resident path */
	NS_REQUIRE(ns_weights_fused_new(text, &fopt, &wt, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_weights_fused_new(tower, &fopt, &wv, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(ns_vision_new(tower, wv, NULL, &v, err, sizeof(err)) == 0, "%s", err);
	{
		const struct ns_vision_hparams *hp = ns_vision_hparams(v);
		char rel[512];

		r.n_embd = hp->n_embd_out;
		r.n_ds = hp->n_deepstack;
		r.n_img = S_PATCHES / (hp->merge * hp->merge);
		snprintf(rel, sizeof(rel), "%s/image.pixel_values.f32", argv[3]);
		r.px = vt_read_f32(rel, S_PATCHES * 3ull * hp->temporal * hp->patch * hp->patch);
		NS_REQUIRE(ns_vision_held(v) + 3ull * hp->n_embd * hp->patch *
			   (4ull * hp->patch + sizeof(int64_t)) == ns_vision_held_bytes(hp),
			   "the tower holds %llu B, ns_vision_held_bytes counts %llu B with its "
			   "setup transient", (unsigned long long)ns_vision_held(v),
			   (unsigned long long)ns_vision_held_bytes(hp));
	}
	r.n_vocab = (uint32_t)ns_model_find(text, "token_embd.weight")->n_rows;
	out_n = (uint64_t)r.n_img * r.n_embd;
	ds_n = out_n * (r.n_ds ? r.n_ds : 1);
	lg_n = (size_t)r.n * r.n_vocab;
	r.embd = calloc(out_n, sizeof(float));
	r.ds = calloc(ds_n, sizeof(float));
	r.logits = calloc(lg_n, sizeof(float));
	embd = calloc(out_n, sizeof(float));
	ds = calloc(ds_n, sizeof(float));
	logits = calloc(lg_n, sizeof(float));
	NS_REQUIRE(r.embd && r.ds && r.logits && embd && ds && logits, "out of memory");
	NS_REQUIRE(s_run(v, text, wt, &r, r.embd, r.ds, r.logits) == 0, "resident: %s",
		   ns_vision_error(v));
	s_tensor_bytes(v, &held, &mats, &grid);
	ns_vision_destroy(&v);
	ns_weights_destroy(&wv);
	ns_weights_destroy(&wt);
	printf("%s + %s (%llu B): held tensors %llu B, position grid %llu B, matrices %llu B\n",
	       argv[1], argv[2], (unsigned long long)tower->total_file_bytes,
	       (unsigned long long)held, (unsigned long long)grid, (unsigned long long)mats);

	extra[1] = vpath;
	for (int a = 0; a < 2; a++) {
		for (int b = 0; b < 2; b++) {
			struct ns_weights_stream_opts so = { .n_threads = 2,
				.block_rows = block_rows[b], .lookahead = NS_DEFAULT_LOOKAHEAD };
			struct ns_session *s = s_session(arenas[a]);
			pid_t pid = iot_start_nsio(s, mpath, extra);
			struct ns_weights_stream_stats t0, t1;
			struct ns_client *c;
			uint64_t q0, q1, q2, q3;

			iot_cleanup_register(s, pid, NULL);
			NS_REQUIRE(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "%s", err);
			NS_REQUIRE(ns_weights_stream_new(text, c, &so, &wt, err, sizeof(err)) == 0 &&
				   ns_weights_stream_new(tower, c, &so, &wv, err, sizeof(err)) == 0,
				   "%s", err);
			q0 = s_requested(s);
			NS_REQUIRE(ns_vision_new(tower, wv, NULL, &v, err, sizeof(err)) == 0, "%s",
				   err);
			q1 = s_requested(s);
			NS_REQUIRE(ns_vision_encode(v, r.px, 1, 4, 4,
				   &(struct ns_vision_out){ embd, ds, NULL }) == 0, "encode: %s",
				   ns_vision_error(v));
			q2 = s_requested(s);
			memset(logits, 0, lg_n * sizeof(float));
			ns_weights_stream_stats(wt, &t0);
			NS_REQUIRE(s_run(v, text, wt, &r, embd, ds, logits) == 0, "run: %s",
				   ns_vision_error(v));
			ns_weights_stream_stats(wt, &t1);
			q3 = s_requested(s) - (t1.bytes - t0.bytes); /* less the text model's */
			printf("arena %4llu KiB, block rows %llu: setup %llu B, image 1 %llu B, "
			       "image 2 %llu B (its prompt %llu B); peak %llu B\n",
			       (unsigned long long)(arenas[a] >> 10), (unsigned long long)block_rows[b],
			       (unsigned long long)(q1 - q0), (unsigned long long)(q2 - q1),
			       (unsigned long long)(q3 - q2), (unsigned long long)(t1.bytes - t0.bytes),
			       (unsigned long long)atomic_load(&s->ctl->arena.peak));
			NS_REQUIRE(q1 - q0 == held, "setup requested %llu B, not the held tensors' "
				   "%llu B", (unsigned long long)(q1 - q0), (unsigned long long)held);
			NS_REQUIRE(q2 - q1 == grid + mats, "an image requested %llu B, not the grid "
				   "and every matrix once (%llu B)", (unsigned long long)(q2 - q1),
				   (unsigned long long)(grid + mats));
			/* the second image reads the tower again, exactly: nothing of it held
			 * between images */
			NS_REQUIRE(q3 - q2 == grid + mats, "a second image requested %llu B",
				   (unsigned long long)(q3 - q2));
			NS_REQUIRE(!memcmp(embd, r.embd, out_n * sizeof(float)) &&
				   !memcmp(ds, r.ds, ds_n * sizeof(float)) &&
				   !memcmp(logits, r.logits, lg_n * sizeof(float)),
				   "outputs differ from the resident path's (arena %llu, block rows "
				   "%llu)", (unsigned long long)arenas[a],
				   (unsigned long long)block_rows[b]);
			NS_REQUIRE(atomic_load(&s->ctl->arena.peak) <= arenas[a], "arena peak over "
				   "the budget");
			if (a == 0 && b == 0) { /* 4 chunks of one merge group: 4 x every matrix */
				struct ns_vision_opts vo = { .n_batch = 4 };
				struct ns_vision *v4;

				NS_REQUIRE(ns_vision_new(tower, wv, &vo, &v4, err, sizeof(err)) == 0,
					   "%s", err);
				q0 = s_requested(s);
				NS_REQUIRE(ns_vision_encode(v4, r.px, 1, 4, 4,
					   &(struct ns_vision_out){ embd, ds, NULL }) == 0,
					   "encode: %s", ns_vision_error(v4));
				q1 = s_requested(s);
				printf("  n_batch 4: %llu B = grid + 4 x matrices\n",
				       (unsigned long long)(q1 - q0));
				NS_REQUIRE(q1 - q0 == grid + 4 * mats, "4 chunks requested %llu B",
					   (unsigned long long)(q1 - q0));
				NS_REQUIRE(!memcmp(embd, r.embd, out_n * sizeof(float)),
					   "4 chunks: outputs differ");
				ns_vision_destroy(&v4);
			}
			ns_vision_destroy(&v);
			ns_weights_destroy(&wv);
			ns_weights_destroy(&wt);
			ns_client_close(&c);
			NS_REQUIRE(iot_stop_nsio(pid) == 0, "nsio exit");
			iot_cleanup_register(NULL, 0, NULL);
			ns_session_destroy(&s);
		}
	}
	printf("ok: 2 arenas x 2 block sizes bit-identical to the resident tower; every tower "
	       "matrix read once per image (per chunk), none held\n");

	/* bad cases at start */
	iot_scratch(tmp, sizeof(tmp), "notgguf");
	iot_cleanup_file(tmp);
	{
		FILE *fp = fopen(tmp, "w");

		NS_REQUIRE(fp && fputs("not a gguf file at all\n", fp) >= 0 && fclose(fp) == 0,
			   "write %s", tmp);
	}
	s_refused("a missing file", mpath, "/nonexistent/mmproj.gguf", "--mmproj");
	s_refused("not a GGUF", mpath, tmp, "--mmproj");
	s_refused("the model itself", mpath, mpath, "also appears");
	unlink(tmp);
	{ /* a tower provider on an nsio that serves the model alone */
		struct ns_session *s = s_session(arenas[1]);
		const char *quiet[] = { "--quiet", NULL };
		pid_t pid = iot_start_nsio(s, mpath, quiet);
		struct ns_client *c;

		iot_cleanup_register(s, pid, NULL);
		NS_REQUIRE(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "%s", err);
		NS_REQUIRE(ns_weights_stream_new(tower, c, NULL, &wv, err, sizeof(err)) == -EINVAL &&
			   strstr(err, "nsio serves no tensor") && !strchr(err, '\n'),
			   "a tower on an nsio without --mmproj: %s", err);
		printf("refused, nsio without --mmproj: %s\n", err);
		ns_client_close(&c);
		NS_REQUIRE(iot_stop_nsio(pid) == 0, "nsio exit");
		iot_cleanup_register(NULL, 0, NULL);
		ns_session_destroy(&s);
	}

	/* a copy of the mmproj unlinked, then cut short, while nsio serves it */
	iot_scratch(tmp, sizeof(tmp), "mmproj");
	iot_cleanup_file(tmp);
	s_copy(vpath, tmp);
	extra[1] = tmp;
	{
		struct ns_weights_stream_opts so = { .n_threads = 2 };
		struct ns_session *s = s_session(arenas[0]);
		pid_t pid = iot_start_nsio(s, mpath, extra);
		struct ns_client *c;
		int fd, rc;

		iot_cleanup_register(s, pid, NULL);
		NS_REQUIRE(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "%s", err);
		NS_REQUIRE(ns_weights_stream_new(tower, c, &so, &wv, err, sizeof(err)) == 0, "%s",
			   err);
		NS_REQUIRE(ns_vision_new(tower, wv, NULL, &v, err, sizeof(err)) == 0, "%s", err);
		fd = open(tmp, O_WRONLY); /* kept to cut the file after its name is gone */
		NS_REQUIRE(fd >= 0 && unlink(tmp) == 0, "unlink %s", tmp);
		memset(embd, 0, out_n * sizeof(float));
		NS_REQUIRE(ns_vision_encode(v, r.px, 1, 4, 4,
			   &(struct ns_vision_out){ embd, ds, NULL }) == 0 &&
			   !memcmp(embd, r.embd, out_n * sizeof(float)),
			   "the mmproj unlinked while served: %s", ns_vision_error(v));
		printf("the mmproj unlinked while served: still read, same outputs\n");
		NS_REQUIRE(ftruncate(fd, (off_t)(tower->total_file_bytes / 2)) == 0 &&
			   close(fd) == 0, "cut the mmproj");
		rc = ns_vision_encode(v, r.px, 1, 4, 4, &(struct ns_vision_out){ embd, ds, NULL });
		NS_REQUIRE(rc < 0 && strstr(ns_vision_error(v), "through nsio") &&
			   !strchr(ns_vision_error(v), '\n'),
			   "the mmproj cut short while served: rc %d, '%s'", rc, ns_vision_error(v));
		printf("the mmproj cut short while served: refused (%d): %s\n", rc,
		       ns_vision_error(v));
		ns_vision_destroy(&v);
		ns_weights_destroy(&wv);
		ns_client_close(&c);
		NS_REQUIRE(iot_stop_nsio(pid) == 0, "nsio exit");
		iot_cleanup_register(NULL, 0, NULL);
		ns_session_destroy(&s);
	}
	free(r.px);
	free(r.embd);
	free(r.ds);
	free(r.logits);
	free(embd);
	free(ds);
	free(logits);
	ns_model_close(&tower);
	ns_model_close(&text);
	return 0;
}
