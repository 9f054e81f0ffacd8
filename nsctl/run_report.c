/* run_report.c - see run_report.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "ns_util.h"
#include "run_report.h"

/* Length of the valid UTF-8 sequence at p (n bytes left), 0 if invalid. */
static size_t s_utf8_len(const unsigned char *p, size_t n)
{
	size_t l = p[0] < 0x80 ? 1 : p[0] < 0xc2 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 :
		   p[0] < 0xf5 ? 4 : 0;

	if (!l || l > n)
		return 0;
	for (size_t i = 1; i < l; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((l == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (l == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (l == 4 && p[0] == 0xf0 && p[1] < 0x90) || (l == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0; /* overlong, surrogate, above U+10FFFF */
	return l;
}

/* ,"key":"escaped text"; bytes that are not UTF-8 (a random model's) become U+FFFD so the
 * object stays valid JSON. */
static void s_json_text(FILE *f, const char *key, const struct ns_text *t)
{
	const unsigned char *p = (const unsigned char *)(t && t->buf ? t->buf : "");
	size_t n = t ? t->len : 0, k = 0;
	struct ns_text v = { 0 };
	struct json_out j;

	if (!t)
		return;
	while (k < n) {
		size_t l = s_utf8_len(p + k, n - k);

		if (ns_text_append(&v, l ? (const char *)p + k : "\xef\xbf\xbd", l ? l : 3) < 0)
			break;
		k += l ? l : 1;
	}
	jo_init(&j, f);
	fprintf(f, ",\"%s\":", key);
	jo_strn(&j, v.buf ? v.buf : "", v.len);
	free(v.buf);
}

void ns_run_report(const struct ns_engine *e, bool json, const struct ns_text *content,
		   const struct ns_text *reasoning, FILE *f)
{
	struct ns_engine_stats s;
	char peak[32], budget[32];

	ns_engine_stats(e, &s);
	if (json) {
		fprintf(f, "{\"session\":\"%s\",\"n_prompt\":%u,\"n_gen\":%u,\"n_decode\":%u,"
			"\"prefill_tok_s\":%.3f,\"decode_tok_s\":%.3f,\"gb_per_token\":%.9f,"
			"\"device_gb_per_token\":%.9f,\"bytes_requested_prefill\":%llu,"
			"\"bytes_requested_decode\":%llu,\"bytes_device_prefill\":%llu,"
			"\"bytes_device_decode\":%llu,\"stall_ms_per_token\":%.4f,"
			"\"arena_peak\":%llu,\"arena_budget\":%llu,\"requests\":%llu,"
			"\"cache_hits\":%llu,\"cache_hit_rate\":%.4f,\"nsio_restarts\":%llu,"
			"\"stop_reason\":%u",
			ns_engine_session(e), s.n_prompt, s.n_gen, s.n_decode, s.prefill_tok_s,
			s.decode_tok_s, s.gb_per_token, s.dev_gb_per_token,
			(unsigned long long)s.req_prefill, (unsigned long long)s.req_decode,
			(unsigned long long)s.dev_prefill, (unsigned long long)s.dev_decode,
			s.stall_ms_per_token, (unsigned long long)s.arena_peak,
			(unsigned long long)s.arena_bytes, (unsigned long long)s.requests,
			(unsigned long long)s.cache_hits, s.cache_hit_rate,
			(unsigned long long)s.nsio_restarts, s.stop_reason);
		s_json_text(f, "content", content);
		s_json_text(f, "reasoning", reasoning);
		fputs("}\n", f);
		fflush(f);
		return;
	}
	fprintf(f, "nsctl run: prefill %u tok %.1f tok/s | decode %u tok %.1f tok/s | "
		"%.6f GB read/token (device %.6f GB) | stall %.2f ms/token | arena peak %s of %s"
		" | cache hit %.1f%%%s\n",
		s.n_prompt, s.prefill_tok_s, s.n_decode, s.decode_tok_s, s.gb_per_token,
		s.dev_gb_per_token, s.stall_ms_per_token,
		ns_format_bytes(s.arena_peak, peak, sizeof(peak)),
		ns_format_bytes(s.arena_bytes, budget, sizeof(budget)), 100.0 * s.cache_hit_rate,
		s.nsio_restarts ? " | nsio restarted" : "");
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
