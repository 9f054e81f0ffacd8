/* test_vision_stream - the tower over the streaming provider: weights from nsio under a budget.
 *
 *   test_vision_stream MMPROJ PIXELS
 *
 * nsio serves the mmproj (1.7 MB) through an arena of 64 KiB, smaller than the file and than
 * its largest matrix (256 KiB); the tower runs over weights_stream.h on the oracle's pixel
 * values with n_batch 0 (one chunk) and 4 (one merge group per chunk: 4 chunks). Each run:
 *   - the outputs are bit-identical to the fused provider's (the same kernels, whole rows);
 *   - the weight bytes streamed equal exactly what the tower must read: the held tensors
 *     (vectors, both patch kernels) once at ns_vision_new, the position grid once per image,
 *     and every matrix once per chunk - never once per patch;
 *   - nsio's arena peak stays within the budget. */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "io_testlib.h"
#include "vision_impl.h"
#include "vt_util.h"
#include "weights_fused.h"
#include "weights_stream.h"

#define S_ARENA (64ull << 10)
#define S_PATCHES 16u
#define S_TOKENS 4u

/* Bytes of the tensors the tower holds (all but matrices and the position grid), and of its
 * matrices. */
static void s_tensor_bytes(const struct ns_vision *v, uint64_t *held, uint64_t *matrices)
{
	const struct ns_model *m = v->m;

	*held = 0;
	*matrices = 0;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];

		if (i == v->pos)
			continue;
		if (t->n_dims == 2)
			*matrices += t->n_bytes;
		else
			*held += t->n_bytes;
	}
}

static void s_encode(struct ns_vision *v, const float *px, float *embd, float *ds)
{
	struct ns_vision_out out = { .embd = embd, .deepstack = ds };

	NS_REQUIRE(ns_vision_encode(v, px, 1, 4, 4, &out) == 0, "encode: %s", ns_vision_error(v));
}

int main(int argc, char **argv)
{
	struct ns_session_params sp = NS_SESSION_PARAMS_DEFAULT;
	const char *extra[] = { "--quiet", NULL };
	char path[4096], err[NS_ERR_LEN];
	struct ns_weights_fused_opts fo = { .n_threads = 1 };
	struct ns_weights_stream_opts so = { .n_threads = 1, .lookahead = NS_DEFAULT_LOOKAHEAD };
	struct ns_weights_stream_stats st0, st;
	struct ns_weights *wf, *ws;
	struct ns_session *s;
	struct ns_client *c;
	struct ns_model *m;
	float *px, *ref_embd, *ref_ds, *embd, *ds;
	uint64_t held, mats, pos_bytes, out_n, ds_n, n_batch[2] = { 0, 4 }, chunks[2] = { 1, 4 };
	pid_t pid;

	ns_test_require_oracle();
	NS_REQUIRE(argc == 3, "usage: %s MMPROJ PIXELS", argv[0]);
	ns_test_oracle_path(path, sizeof(path), argv[1]);
	NS_REQUIRE(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
	NS_REQUIRE(m->total_file_bytes > 16 * S_ARENA, "the mmproj is not much larger than the arena");
	px = vt_read_f32(argv[2], S_PATCHES * 1536);

	/* reference: the fused provider (weights in RAM), one chunk */
	NS_REQUIRE(ns_weights_fused_new(m, &fo, &wf, err, sizeof(err)) == 0, "%s", err);
	{
		struct ns_vision *v;
		const struct ns_vision_hparams *hp;

		NS_REQUIRE(ns_vision_new(m, wf, NULL, &v, err, sizeof(err)) == 0, "%s", err);
		hp = ns_vision_hparams(v);
		out_n = (uint64_t)S_TOKENS * hp->n_embd_out;
		ds_n = out_n * (hp->n_deepstack ? hp->n_deepstack : 1);
		ref_embd = calloc(out_n, sizeof(float));
		ref_ds = calloc(ds_n, sizeof(float));
		embd = calloc(out_n, sizeof(float));
		ds = calloc(ds_n, sizeof(float));
		NS_REQUIRE(ref_embd && ref_ds && embd && ds, "out of memory");
		s_encode(v, px, ref_embd, ref_ds);
		s_tensor_bytes(v, &held, &mats);
		pos_bytes = m->tensors[v->pos].n_bytes;
		ns_vision_destroy(&v);
	}
	ns_weights_destroy(&wf);

	sp.arena_bytes = S_ARENA;
	NS_REQUIRE(ns_session_create(&sp, &s, err, sizeof(err)) == 0, "session: %s", err);
	pid = iot_start_nsio(s, path, extra);
	iot_cleanup_register(s, pid, NULL);
	NS_REQUIRE(ns_client_open(s->id, NULL, &c, err, sizeof(err)) == 0, "client: %s", err);
	NS_REQUIRE(ns_weights_stream_new(m, c, &so, &ws, err, sizeof(err)) == 0, "%s", err);
	printf("%s: %llu bytes, arena %llu: held tensors %llu B, position grid %llu B, "
	       "matrices %llu B\n", argv[1], (unsigned long long)m->total_file_bytes,
	       (unsigned long long)S_ARENA, (unsigned long long)held,
	       (unsigned long long)pos_bytes, (unsigned long long)mats);
	for (int k = 0; k < 2; k++) {
		struct ns_vision_opts vo = { .n_batch = n_batch[k] };
		struct ns_vision *v;
		uint64_t want, got;

		ns_weights_stream_stats(ws, &st0);
		NS_REQUIRE(ns_vision_new(m, ws, &vo, &v, err, sizeof(err)) == 0, "%s", err);
		ns_weights_stream_stats(ws, &st);
		NS_REQUIRE(st.bytes - st0.bytes == held, "setup streamed %llu B, not the %llu B of "
			   "the held tensors", (unsigned long long)(st.bytes - st0.bytes),
			   (unsigned long long)held);
		st0 = st;
		memset(embd, 0, out_n * sizeof(float));
		s_encode(v, px, embd, ds);
		ns_weights_stream_stats(ws, &st);
		got = st.bytes - st0.bytes;
		want = pos_bytes + chunks[k] * mats;
		printf("  n_batch %llu: %llu chunk(s), streamed %llu B in %llu blocks (want %llu = "
		       "grid + %llu x matrices); arena peak %llu B\n",
		       (unsigned long long)n_batch[k], (unsigned long long)chunks[k],
		       (unsigned long long)got, (unsigned long long)(st.blocks - st0.blocks),
		       (unsigned long long)want, (unsigned long long)chunks[k],
		       (unsigned long long)atomic_load(&s->ctl->arena.peak));
		NS_REQUIRE(got == want, "streamed %llu B, not %llu", (unsigned long long)got,
			   (unsigned long long)want);
		NS_REQUIRE(!memcmp(embd, ref_embd, out_n * sizeof(float)) &&
			   !memcmp(ds, ref_ds, ds_n * sizeof(float)),
			   "streamed outputs differ from the fused provider's");
		ns_vision_destroy(&v);
	}
	NS_REQUIRE(atomic_load(&s->ctl->arena.peak) <= S_ARENA, "arena peak over the budget");
	ns_weights_destroy(&ws);
	ns_client_close(&c);
	NS_REQUIRE(iot_stop_nsio(pid) == 0, "nsio exit");
	iot_cleanup_register(NULL, 0, NULL);
	ns_session_destroy(&s);
	ns_model_close(&m);
	free(px);
	free(ref_embd);
	free(ref_ds);
	free(embd);
	free(ds);
	printf("ok: bit-identical to the fused provider, every matrix read once per chunk\n");
	return 0;
}
