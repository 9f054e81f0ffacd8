/* test_ctl_proto: the nsctl <-> nscompute control messages (proto/ctl_msg.h) round-trip, and every
 * malformed variant (each truncation, each single-byte corruption of the envelope, token ids
 * out of range, counts over the limits, random bytes) is rejected without reading past the
 * buffer (run under ASan). */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_msg.h"

#define CHECK(c, ...)                                                                     \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "FAIL line %d: ", __LINE__);                      \
			fprintf(stderr, __VA_ARGS__);                                     \
			fputc('\n', stderr);                                              \
			return 1;                                                         \
		}                                                                         \
	} while (0)

static int s_dec_any(const uint8_t *b, size_t n, uint32_t n_vocab)
{
	int32_t toks[64], stop[NS_CMSG_MAX_STOP];
	float lg[16];
	uint32_t pos;
	struct ns_cmsg_eval e;
	struct ns_cmsg_hello h;
	struct ns_cmsg_token t;
	struct ns_cmsg_done d;
	struct ns_cmsg_error er;
	struct ns_cmsg_spec sp;
	struct ns_cmsg_progress pg;
	int ok = 0;

	ok += ns_cmsg_dec_eval(b, n, n_vocab, toks, 64, stop, &e) == 0;
	ok += ns_cmsg_dec_hello(b, n, &h) == 0;
	ok += ns_cmsg_dec_token(b, n, n_vocab, &t) == 0;
	ok += ns_cmsg_dec_done(b, n, &d) == 0;
	ok += ns_cmsg_dec_error(b, n, &er) == 0;
	ok += ns_cmsg_dec_logits(b, n, 16, &pos, lg) == 0;
	ok += ns_cmsg_dec_spec(b, n, &sp) == 0;
	ok += ns_cmsg_dec_progress(b, n, &pg) == 0;
	return ok;
}

/* EVAL's draft block and SPEC (speculative decoding): round trips, an old EVAL unchanged,
 * every truncation and every bad draft field refused. */
static int s_draft(void)
{
	int32_t toks[3] = { 1, 2, 3 }, oracle[4] = { 5, 6, 7, 8 }, out_t[64], out_s[64];
	struct ns_cmsg_eval e = { .flags = NS_EVAL_RESET | NS_EVAL_DRAFT, .n_predict = 8,
				  .n_tokens = 3, .tokens = toks,
				  .sampling = { .repeat_penalty = 1.0f },
				  .draft = { .kind = NS_DRAFT_ORACLE, .max = 4, .min = 2,
					     .n_oracle = 4, .oracle = oracle } }, d;
	struct ns_cmsg_spec sp = { .drafted = 9, .accepted = 7, .draft_passes = 3, .k_last = 4,
				   .one_ns = 11, .chunk_ns = 22 }, sq;
	uint8_t buf[512], bad[512];
	int n = ns_cmsg_enc_eval(&e, buf, sizeof(buf));

	CHECK(n == (int)ns_cmsg_size_eval_msg(&e) && n == (int)ns_cmsg_size_eval(3, 0) + 32,
	      "draft eval size %d", n);
	CHECK(ns_cmsg_dec_eval(buf, (size_t)n, 100, out_t, 64, out_s, &d) == 0 &&
	      d.draft.kind == NS_DRAFT_ORACLE && d.draft.max == 4 && d.draft.min == 2 &&
	      d.draft.n_oracle == 4 && !memcmp(d.draft.oracle, oracle, sizeof(oracle)) &&
	      d.draft.oracle == out_t + 3, "draft eval round trip");
	CHECK(ns_cmsg_dec_eval(buf, (size_t)n, 100, out_t, 6, out_s, &d) == -EPROTO,
	      "tokens and oracle over the caller's room accepted");
	for (int k = 0; k < n; k++)
		CHECK(ns_cmsg_dec_eval(buf, (size_t)k, 100, out_t, 64, out_s, &d) == -EPROTO,
		      "draft eval truncated to %d accepted", k);
	CHECK(ns_cmsg_dec_eval(buf, (size_t)n, 8, out_t, 64, out_s, &d) == -EPROTO,
	      "oracle id out of the vocabulary accepted");
	/* each field of the block made bad: kind, max over the limit, min 0, min over max */
	for (int f = 0; f < 5; f++) {
		struct ns_cmsg_eval g = e;

		if (f == 0)
			g.draft.kind = NS_DRAFT_MTP + 1; /* no such drafter */
		else if (f == 1)
			g.draft.max = NS_CMSG_MAX_DRAFT + 1;
		else if (f == 2)
			g.draft.min = 0;
		else if (f == 3)
			g.draft.min = 5;
		else
			g.flags |= NS_EVAL_LOGITS_ALL;
		n = ns_cmsg_enc_eval(&g, bad, sizeof(bad));
		CHECK(n > 0 && ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) ==
		      -EPROTO, "bad draft block %d accepted", f);
	}
	e.draft.kind = NS_DRAFT_NGRAM; /* oracle ids with ngram */
	n = ns_cmsg_enc_eval(&e, bad, sizeof(bad));
	CHECK(ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) == -EPROTO,
	      "oracle ids with the ngram drafter accepted");
	e.draft.kind = NS_DRAFT_MODEL; /* oracle ids with the draft model, then without */
	n = ns_cmsg_enc_eval(&e, bad, sizeof(bad));
	CHECK(ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) == -EPROTO,
	      "oracle ids with the draft model accepted");
	{
		struct ns_cmsg_eval g = e;

		g.draft.n_oracle = 0;
		g.draft.oracle = NULL;
		n = ns_cmsg_enc_eval(&g, bad, sizeof(bad));
		CHECK(n > 0 && ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) == 0 &&
		      d.draft.kind == NS_DRAFT_MODEL && d.draft.n_oracle == 0,
		      "a draft-model block does not round-trip");
		g.draft.kind = NS_DRAFT_MTP; /* --draft mtp: the model's MTP block */
		n = ns_cmsg_enc_eval(&g, bad, sizeof(bad));
		CHECK(n > 0 && ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) == 0 &&
		      d.draft.kind == NS_DRAFT_MTP && d.draft.n_oracle == 0,
		      "an MTP block does not round-trip");
	}
	e.flags = NS_EVAL_RESET; /* no flag: the old message, no block */
	n = ns_cmsg_enc_eval(&e, bad, sizeof(bad));
	CHECK(n == (int)ns_cmsg_size_eval(3, 0) && ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t,
	      64, out_s, &d) == 0 && d.draft.kind == 0, "an EVAL without a draft changed");
	n = ns_cmsg_enc_spec(&sp, buf, sizeof(buf));
	CHECK(n > 0 && ns_cmsg_type(buf, (size_t)n) == NS_CMSG_SPEC &&
	      ns_cmsg_dec_spec(buf, (size_t)n, &sq) == 0 && !memcmp(&sp, &sq, sizeof(sp)),
	      "spec round trip");
	for (int k = 0; k < n; k++)
		CHECK(ns_cmsg_dec_spec(buf, (size_t)k, &sq) == -EPROTO, "spec cut to %d accepted", k);
	sp.accepted = 10;
	n = ns_cmsg_enc_spec(&sp, buf, sizeof(buf));
	CHECK(ns_cmsg_dec_spec(buf, (size_t)n, &sq) == -EPROTO, "more accepted than drafted");
	return 0;
}

/* PROGRESS (the prompt's pass over the layers): round trip, every truncation and each
 * impossible figure refused. */
static int s_progress(void)
{
	struct ns_cmsg_progress m = { .n_tokens = 402, .layers_done = 3, .n_layers = 5,
				      .elapsed_ns = 123456789 }, q;
	uint8_t buf[128];
	int n = ns_cmsg_enc_progress(&m, buf, sizeof(buf));

	CHECK(n > 0 && ns_cmsg_type(buf, (size_t)n) == NS_CMSG_PROGRESS &&
	      ns_cmsg_dec_progress(buf, (size_t)n, &q) == 0 && q.n_tokens == m.n_tokens &&
	      q.layers_done == m.layers_done && q.n_layers == m.n_layers &&
	      q.elapsed_ns == m.elapsed_ns, /* fields: memcmp would compare the padding */
	      "progress round trip");
	for (int k = 0; k < n; k++)
		CHECK(ns_cmsg_dec_progress(buf, (size_t)k, &q) == -EPROTO, "progress cut to %d "
		      "accepted", k);
	for (int f = 0; f < 4; f++) {
		struct ns_cmsg_progress b = m;

		if (f == 0)
			b.n_layers = 0;
		else if (f == 1)
			b.layers_done = 6;
		else if (f == 2)
			b.n_layers = b.layers_done = NS_CMSG_MAX_LAYERS + 1;
		else
			b.n_tokens = NS_CMSG_MAX_TOKENS + 1;
		n = ns_cmsg_enc_progress(&b, buf, sizeof(buf));
		CHECK(n > 0 && ns_cmsg_dec_progress(buf, (size_t)n, &q) == -EPROTO,
		      "bad progress %d accepted", f);
	}
	CHECK(ns_cmsg_enc_progress(&m, buf, 8) < 0, "progress into 8 bytes");
	return 0;
}

int main(void)
{
	int32_t toks[5] = { 1, 2, 3, 4, 99 }, stop[2] = { 7, 8 }, out_t[64], out_s[64];
	struct ns_cmsg_eval e = { .flags = NS_EVAL_RESET, .n_predict = 32, .n_tokens = 5,
				  .n_stop = 2, .tokens = toks, .stop = stop,
				  .sampling = { .temperature = 0.5f, .top_k = 40, .top_p = 0.9f,
						.min_p = 0.05f, .repeat_penalty = 1.1f,
						.repeat_last_n = 64, .seed = 42 } };
	struct ns_cmsg_eval d;
	uint8_t buf[4096], bad[4096];
	uint64_t seed = 1;
	int n, rejected = 0, trials = 0;

	n = ns_cmsg_enc_eval(&e, buf, sizeof(buf));
	CHECK(n == (int)ns_cmsg_size_eval(5, 2), "eval size %d", n);
	CHECK(ns_cmsg_type(buf, (size_t)n) == NS_CMSG_EVAL, "type");
	CHECK(ns_cmsg_dec_eval(buf, (size_t)n, 100, out_t, 64, out_s, &d) == 0, "decode");
	CHECK(d.n_tokens == 5 && d.tokens[4] == 99 && d.n_stop == 2 && d.stop[1] == 8 &&
	      d.sampling.seed == 42 && d.sampling.temperature == 0.5f && d.n_predict == 32 &&
	      d.flags == NS_EVAL_RESET, "round trip");
	CHECK(ns_cmsg_dec_eval(buf, (size_t)n, 99, out_t, 64, out_s, &d) == -EPROTO,
	      "token 99 of a 99-token vocabulary accepted");
	CHECK(ns_cmsg_dec_eval(buf, (size_t)n, 100, out_t, 4, out_s, &d) == -EPROTO,
	      "more tokens than the receiver's room accepted");
	CHECK(ns_cmsg_enc_eval(&e, buf, 20) == -ENOSPC, "short buffer");
	e.n_tokens = 0;
	CHECK(ns_cmsg_enc_eval(&e, buf, sizeof(buf)) == -EINVAL, "empty eval encoded");
	e.n_tokens = 5;

	/* every truncation and every corruption of the envelope is rejected */
	n = ns_cmsg_enc_eval(&e, buf, sizeof(buf));
	for (int k = 0; k < n; k++) {
		CHECK(ns_cmsg_dec_eval(buf, (size_t)k, 100, out_t, 64, out_s, &d) == -EPROTO,
		      "truncation to %d accepted", k);
		rejected++;
	}
	for (int k = 0; k < NS_CMSG_HDR; k++) {
		memcpy(bad, buf, (size_t)n);
		bad[k] ^= 0x5a;
		CHECK(s_dec_any(bad, (size_t)n, 100) == 0, "envelope byte %d corrupted accepted",
		      k);
		rejected++;
	}
	/* NaN temperature, unknown flags */
	memcpy(bad, buf, (size_t)n);
	{
		float nan_ = NAN;
		uint32_t fl = 0x80;

		memcpy(bad + NS_CMSG_HDR + 8, &nan_, 4);
		CHECK(ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) == -EPROTO,
		      "NaN temperature accepted");
		memcpy(bad, buf, (size_t)n);
		memcpy(bad + NS_CMSG_HDR, &fl, 4);
		CHECK(ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s, &d) == -EPROTO,
		      "unknown flag accepted");
	}
	/* teacher forcing: 1 <= n_predict < n_tokens, nothing else */
	{
		struct ns_cmsg_eval f = e;
		uint32_t want[] = { 0, 1, 4, 5, 32 };

		f.flags = NS_EVAL_RESET | NS_EVAL_FORCED;
		for (size_t k = 0; k < 5; k++) {
			bool ok_want = want[k] >= 1 && want[k] < 5;

			f.n_predict = want[k];
			n = ns_cmsg_enc_eval(&f, bad, sizeof(bad));
			CHECK(n > 0 && (ns_cmsg_dec_eval(bad, (size_t)n, 100, out_t, 64, out_s,
							 &d) == 0) == ok_want,
			      "forced eval of 5 tokens with %u forced: accepted %d", want[k],
			      !ok_want);
		}
	}

	/* the other types round-trip */
	{
		struct ns_cmsg_token t = { .id = 5, .n_past = 9 }, t2;
		struct ns_cmsg_done dn = { .reason = NS_DONE_STOP, .n_prompt = 3, .n_gen = 4,
					   .n_decode = 3, .req_decode = 12345 }, dn2;
		struct ns_cmsg_error er = { .code = -EIO }, er2;
		float lg[16], lg2[16];
		uint32_t pos;

		n = ns_cmsg_enc_token(&t, buf, sizeof(buf));
		CHECK(ns_cmsg_dec_token(buf, (size_t)n, 6, &t2) == 0 && t2.id == 5, "token");
		CHECK(ns_cmsg_dec_token(buf, (size_t)n, 5, &t2) == -EPROTO, "token id range");
		n = ns_cmsg_enc_done(&dn, buf, sizeof(buf));
		CHECK(ns_cmsg_dec_done(buf, (size_t)n, &dn2) == 0 && dn2.req_decode == 12345 &&
		      dn2.n_decode == 3, "done");
		snprintf(er.text, sizeof(er.text), "boom\nline");
		n = ns_cmsg_enc_error(&er, buf, sizeof(buf));
		CHECK(ns_cmsg_dec_error(buf, (size_t)n, &er2) == 0 && er2.code == -EIO &&
		      !strcmp(er2.text, "boom line"), "error '%s'", er2.text);
		for (int i = 0; i < 16; i++)
			lg[i] = (float)i * 0.25f;
		n = ns_cmsg_enc_logits(&(struct ns_cmsg_logits){ .pos = 2, .n_vocab = 16,
								 .logits = lg }, buf, sizeof(buf));
		CHECK(ns_cmsg_dec_logits(buf, (size_t)n, 16, &pos, lg2) == 0 && pos == 2 &&
		      !memcmp(lg, lg2, sizeof(lg)), "logits");
		CHECK(ns_cmsg_dec_logits(buf, (size_t)n, 15, &pos, lg2) == -EPROTO, "logits size");
	}

	/* IMAGES: round trip, then every truncation and a path with a NUL refused */
	{
		struct ns_cmsg_images im = { .image_id = 7, .max_tokens = 9, .n_images = 2,
					     .min_pixels = 4096, .max_pixels = 1u << 20,
					     .path = { "/a/b.png", "/c.jpg" } }, im2;
		char sb[256];
		uint8_t dn_buf[160];
		struct ns_cmsg_done dn = { .n_prompt = 3, .n_image_tokens = 4 }, dn2;

		n = ns_cmsg_enc_images(&im, buf, sizeof(buf));
		CHECK(n == (int)ns_cmsg_size_images(&im) && ns_cmsg_type(buf, (size_t)n) ==
		      NS_CMSG_IMAGES, "images size/type");
		CHECK(ns_cmsg_dec_images(buf, (size_t)n, 8, sb, sizeof(sb), &im2) == 0 &&
		      im2.image_id == 7 && im2.max_tokens == 9 && im2.n_images == 2 &&
		      im2.min_pixels == 4096 && im2.max_pixels == 1u << 20 &&
		      !strcmp(im2.path[0], "/a/b.png") && !strcmp(im2.path[1], "/c.jpg"),
		      "images round trip");
		CHECK(ns_cmsg_dec_images(buf, (size_t)n, 7, sb, sizeof(sb), &im2) == -EPROTO,
		      "images: placeholder id out of the vocabulary");
		for (int cut = 1; cut < n; cut++) {
			uint8_t c[256];

			memcpy(c, buf, (size_t)n);
			memcpy(c + 8, &(uint32_t){ (uint32_t)(n - cut - NS_CMSG_HDR) }, 4);
			CHECK(ns_cmsg_dec_images(c, (size_t)(n - cut), 8, sb, sizeof(sb), &im2) ==
			      -EPROTO, "images cut by %d accepted", cut);
		}
		buf[n - 2] = 0; /* a NUL inside "/c.jpg" */
		CHECK(ns_cmsg_dec_images(buf, (size_t)n, 8, sb, sizeof(sb), &im2) == -EPROTO,
		      "images: a path with a NUL");
		im.n_images = 0;
		CHECK(ns_cmsg_enc_images(&im, buf, sizeof(buf)) == -EINVAL, "no images encoded");
		n = ns_cmsg_enc_done(&dn, dn_buf, sizeof(dn_buf));
		CHECK(ns_cmsg_dec_done(dn_buf, (size_t)n, &dn2) == -EPROTO,
		      "done: more image tokens than prompt tokens");
		dn.n_prompt = 4;
		dn.tower_ns = 77;
		n = ns_cmsg_enc_done(&dn, dn_buf, sizeof(dn_buf));
		CHECK(ns_cmsg_dec_done(dn_buf, (size_t)n, &dn2) == 0 && dn2.n_image_tokens == 4 &&
		      dn2.tower_ns == 77, "done: image tokens, tower time");
		/* the tower's bytes are part of the prefill's bytes requested */
		dn.req_prefill = 1000;
		dn.tower_req = 1001;
		n = ns_cmsg_enc_done(&dn, dn_buf, sizeof(dn_buf));
		CHECK(ns_cmsg_dec_done(dn_buf, (size_t)n, &dn2) == -EPROTO,
		      "done: more tower bytes than prefill bytes");
		dn.tower_req = 600;
		n = ns_cmsg_enc_done(&dn, dn_buf, sizeof(dn_buf));
		CHECK(ns_cmsg_dec_done(dn_buf, (size_t)n, &dn2) == 0 && dn2.tower_req == 600,
		      "done: the tower's bytes");
	}

	/* random bytes behind a valid envelope never decode as anything with bad fields */
	for (int k = 0; k < 20000; k++) {
		size_t len = NS_CMSG_HDR + (size_t)(seed % 200);
		uint32_t magic = NS_ZMSG_MAGIC, plen = (uint32_t)(len - NS_CMSG_HDR);
		uint16_t ver = NS_ZMSG_VERSION, type = (uint16_t)(1 + seed % NS_ZMSG_TYPE_MAX);

		for (size_t i = 0; i < len; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			bad[i] = (uint8_t)(seed >> 56);
		}
		memcpy(bad, &magic, 4);
		memcpy(bad + 4, &ver, 2);
		memcpy(bad + 6, &type, 2);
		memcpy(bad + 8, &plen, 4);
		(void)s_dec_any(bad, len, 100);
		trials++;
	}
	if (s_progress())
		return 1;
	if (s_draft())
		return 1;
	printf("ctl_msg: round trips ok; %d malformed variants rejected; %d random payloads "
	       "decoded without overrun\n", rejected, trials);
	return 0;
}
