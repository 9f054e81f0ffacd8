/* run_report.c - see run_report.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json_text.h"
#include "ns_util.h"
#include "run_report.h"

const char *ns_stop_reason_name(uint32_t reason)
{
	static const char *const names[] = { "none", "length", "eos", "context", "stop" };

	return reason < NS_ARRAY_LEN(names) ? names[reason] : "unknown";
}

void ns_run_report(const struct ns_engine *e, bool json, const struct ns_text *content,
		   const struct ns_text *reasoning, FILE *f)
{
	struct ns_engine_stats s;
	char peak[32], budget[32];

	ns_engine_stats(e, &s);
	if (json) { /* one object on one line (jansson; keys in this order) */
		json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:I, "
				      "s:I, s:f, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:f, s:I, s:s}",
				      "session", ns_engine_session(e),
				      "n_prompt", (json_int_t)s.n_prompt,
				      "n_gen", (json_int_t)s.n_gen,
				      "n_decode", (json_int_t)s.n_decode,
				      "prefill_tok_s", s.prefill_tok_s,
				      "decode_tok_s", s.decode_tok_s,
				      "gb_per_token", s.gb_per_token,
				      "device_gb_per_token", s.dev_gb_per_token,
				      "bytes_requested_prefill", (json_int_t)s.req_prefill,
				      "bytes_requested_decode", (json_int_t)s.req_decode,
				      "bytes_device_prefill", (json_int_t)s.dev_prefill,
				      "bytes_device_decode", (json_int_t)s.dev_decode,
				      "stall_ms_per_token", s.stall_ms_per_token,
				      "arena_peak", (json_int_t)s.arena_peak,
				      "arena_budget", (json_int_t)s.arena_bytes,
				      "requests", (json_int_t)s.requests,
				      "cache_hits", (json_int_t)s.cache_hits,
				      "cache_hit_rate", s.cache_hit_rate,
				      "predict_experts", (json_int_t)s.predict_experts,
				      "predict_hits", (json_int_t)s.predict_hits,
				      "predict_hit_rate", s.predict_hit_rate,
				      "nsio_restarts", (json_int_t)s.nsio_restarts,
				      "stop_reason", ns_stop_reason_name(s.stop_reason));

		/* the generated text: not always UTF-8 (a random model's bytes) */
		if (o && s.predict_experts)
			json_object_set_new(o, "predict_io", json_pack("{s:I, s:I, s:I}",
				"reads", (json_int_t)s.predict_reads,
				"claims", (json_int_t)s.predict_claims,
				"promoted", (json_int_t)s.predict_promoted));
		if (o && content)
			json_object_set_new(o, "content", ns_json_text(content->buf ? content->buf :
								       "", content->len));
		if (o && s.draft)
			json_object_set_new(o, "draft", json_pack("{s:I, s:I, s:f, s:I, s:f, s:I}",
				"drafted", (json_int_t)s.drafted, "accepted", (json_int_t)s.accepted,
				"acceptance_rate", s.accept_rate, "draft_passes",
				(json_int_t)s.draft_passes, "passes_per_token", s.passes_per_token,
				"draft_len", (json_int_t)s.draft_k));
		if (o && s.n_image_tokens)
			json_object_set_new(o, "images", json_pack("{s:I, s:f, s:I}",
				"image_tokens", (json_int_t)s.n_image_tokens, "tower_s", s.tower_s,
				"tower_bytes_requested", (json_int_t)s.req_tower));
		if (o && reasoning)
			json_object_set_new(o, "reasoning", ns_json_text(reasoning->buf ?
									 reasoning->buf : "",
									 reasoning->len));
		if (!o || json_dumpf(o, f, JSON_COMPACT) < 0)
			fprintf(f, "{\"error\":\"out of memory\"}");
		fputs("\n", f);
		json_decref(o);
		fflush(f);
		return;
	}
	fprintf(f, "nsctl run: prefill %u tok %.1f tok/s | decode %u tok %.1f tok/s | "
		"%.6f GB read/token (device %.6f GB) | stall %.2f ms/token | arena peak %s of %s"
		" | cache hit %.1f%%%s",
		s.n_prompt, s.prefill_tok_s, s.draft && s.n_gen ? s.n_gen - 1 : s.n_decode,
		s.decode_tok_s, s.gb_per_token,
		s.dev_gb_per_token, s.stall_ms_per_token,
		ns_format_bytes(s.arena_peak, peak, sizeof(peak)),
		ns_format_bytes(s.arena_bytes, budget, sizeof(budget)), 100.0 * s.cache_hit_rate,
		s.nsio_restarts ? " | nsio restarted" : "");
	if (s.predict_experts)
		fprintf(f, " | expert prediction %.1f%%", 100.0 * s.predict_hit_rate);
	if (s.draft)
		fprintf(f, " | draft %u, accepted %u (%.1f%%), %.3f passes/token", s.drafted,
			s.accepted, 100.0 * s.accept_rate, s.passes_per_token);
	if (s.n_image_tokens)
		fprintf(f, " | images %u tok, tower %.3f s %.6f GB", s.n_image_tokens, s.tower_s,
			(double)s.req_tower / 1e9);
	fputs("\n", f);
	fflush(f);
}

int ns_text_append(struct ns_text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t cap = (t->len + n + 1) * 2;
		char *b = realloc(t->buf, cap);

		if (!b)
			return -ENOMEM;
		t->buf = b;
		t->cap = cap;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = 0;
	return 0;
}

int ns_chat_log_add(struct ns_chat_log *l, const char *role, const char *content)
{
	char *r, *c;

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 8;
		struct ns_engine_msg *m = realloc(l->msgs, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		l->msgs = m;
		l->cap = cap;
	}
	r = strdup(role);
	c = strdup(content);
	if (!r || !c) {
		free(r);
		free(c);
		return -ENOMEM;
	}
	l->msgs[l->n++] = (struct ns_engine_msg){ .role = r, .content = c };
	return 0;
}

void ns_chat_log_clear(struct ns_chat_log *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free((char *)l->msgs[i].role);
		free((char *)l->msgs[i].content);
	}
	free(l->msgs);
	memset(l, 0, sizeof(*l));
}
