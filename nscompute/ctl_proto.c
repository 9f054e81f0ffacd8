/* ctl_proto.c - see ctl_proto.h. Little-endian host only (checked at compile time). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ctl_proto.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ctl_proto assumes little-endian");

/* --- writer / reader over a byte buffer --- */

struct s_w {
	uint8_t *p;
	size_t n, cap;
	int bad;
};

static void s_put(struct s_w *w, const void *v, size_t n)
{
	if (w->bad || w->cap - w->n < n) {
		w->bad = 1;
		return;
	}
	memcpy(w->p + w->n, v, n);
	w->n += n;
}

static void s_u32(struct s_w *w, uint32_t v) { s_put(w, &v, 4); }
static void s_u64(struct s_w *w, uint64_t v) { s_put(w, &v, 8); }
static void s_f32(struct s_w *w, float v) { s_put(w, &v, 4); }

static void s_hdr(struct s_w *w, uint16_t type, size_t payload)
{
	uint16_t ver = NS_CMSG_VERSION;

	s_u32(w, NS_CMSG_MAGIC);
	s_put(w, &ver, 2);
	s_put(w, &type, 2);
	s_u32(w, (uint32_t)payload);
}

static int s_done_w(struct s_w *w)
{
	return w->bad ? -ENOSPC : (int)w->n;
}

struct s_r {
	const uint8_t *p;
	size_t n, len;
	int bad;
};

static void s_get(struct s_r *r, void *v, size_t n)
{
	if (r->bad || r->len - r->n < n) {
		r->bad = 1;
		memset(v, 0, n);
		return;
	}
	memcpy(v, r->p + r->n, n);
	r->n += n;
}

static uint32_t s_ru32(struct s_r *r) { uint32_t v; s_get(r, &v, 4); return v; }
static uint64_t s_ru64(struct s_r *r) { uint64_t v; s_get(r, &v, 8); return v; }
static float s_rf32(struct s_r *r) { float v; s_get(r, &v, 4); return v; }

/* Envelope of the wanted type with exactly `payload` bytes after it (payload SIZE_MAX: any). */
static int s_open(struct s_r *r, const void *buf, size_t len, int type)
{
	if (ns_cmsg_type(buf, len) != type)
		return -EPROTO;
	*r = (struct s_r){ .p = buf, .n = NS_CMSG_HDR, .len = len };
	return 0;
}

int ns_cmsg_type(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t magic, plen;
	uint16_t ver, type;

	if (!buf || len < NS_CMSG_HDR)
		return -EPROTO;
	memcpy(&magic, p, 4);
	memcpy(&ver, p + 4, 2);
	memcpy(&type, p + 6, 2);
	memcpy(&plen, p + 8, 4);
	if (magic != NS_CMSG_MAGIC || ver != NS_CMSG_VERSION || plen != len - NS_CMSG_HDR ||
	    type < NS_CMSG_HELLO || type > NS_CMSG_STEP)
		return -EPROTO;
	return type;
}

/* --- sizes --- */

#define S_SAMPLING_BYTES (4 * 6 + 8)
#define S_DONE_BYTES (5 * 4 + 9 * 8)
#define S_EVAL_FIXED (5 * 4 + S_SAMPLING_BYTES)

size_t ns_cmsg_size_eval(uint32_t n_tokens, uint32_t n_stop)
{
	return NS_CMSG_HDR + S_EVAL_FIXED + 4 * ((size_t)n_tokens + n_stop);
}

size_t ns_cmsg_size_logits(uint32_t n_vocab)
{
	return NS_CMSG_HDR + 8 + 4 * (size_t)n_vocab;
}

/* --- encoders --- */

int ns_cmsg_enc_hello(const struct ns_cmsg_hello *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	s_hdr(&w, NS_CMSG_HELLO, 12);
	s_u32(&w, m->n_vocab);
	s_u32(&w, m->n_ctx);
	s_u32(&w, (uint32_t)m->pid);
	return s_done_w(&w);
}

int ns_cmsg_enc_eval(const struct ns_cmsg_eval *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	if (m->n_tokens == 0 || m->n_tokens > NS_CMSG_MAX_TOKENS || m->n_stop > NS_CMSG_MAX_STOP)
		return -EINVAL;
	s_hdr(&w, NS_CMSG_EVAL, ns_cmsg_size_eval(m->n_tokens, m->n_stop) - NS_CMSG_HDR);
	s_u32(&w, m->flags);
	s_u32(&w, m->n_predict);
	s_u32(&w, m->keep);
	s_f32(&w, m->sampling.temperature);
	s_u32(&w, (uint32_t)m->sampling.top_k);
	s_f32(&w, m->sampling.top_p);
	s_f32(&w, m->sampling.min_p);
	s_f32(&w, m->sampling.repeat_penalty);
	s_u32(&w, (uint32_t)m->sampling.repeat_last_n);
	s_u64(&w, m->sampling.seed);
	s_u32(&w, m->n_tokens);
	s_u32(&w, m->n_stop);
	s_put(&w, m->tokens, 4 * (size_t)m->n_tokens);
	if (m->n_stop)
		s_put(&w, m->stop, 4 * (size_t)m->n_stop);
	return s_done_w(&w);
}

int ns_cmsg_enc_token(const struct ns_cmsg_token *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	s_hdr(&w, NS_CMSG_TOKEN, 8);
	s_u32(&w, (uint32_t)m->id);
	s_u32(&w, m->n_past);
	return s_done_w(&w);
}

int ns_cmsg_enc_logits(const struct ns_cmsg_logits *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	if (m->n_vocab == 0 || m->n_vocab > NS_CMSG_MAX_VOCAB)
		return -EINVAL;
	s_hdr(&w, NS_CMSG_LOGITS, ns_cmsg_size_logits(m->n_vocab) - NS_CMSG_HDR);
	s_u32(&w, m->pos);
	s_u32(&w, m->n_vocab);
	s_put(&w, m->logits, 4 * (size_t)m->n_vocab);
	return s_done_w(&w);
}

int ns_cmsg_enc_done(const struct ns_cmsg_done *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	s_hdr(&w, NS_CMSG_DONE, S_DONE_BYTES);
	s_u32(&w, m->reason);
	s_u32(&w, m->n_prompt);
	s_u32(&w, m->n_gen);
	s_u32(&w, m->n_past);
	s_u32(&w, m->n_decode);
	s_u64(&w, m->prefill_ns);
	s_u64(&w, m->decode_ns);
	s_u64(&w, m->wait_ns);
	s_u64(&w, m->blocks);
	s_u64(&w, m->block_bytes);
	s_u64(&w, m->req_prefill);
	s_u64(&w, m->req_decode);
	s_u64(&w, m->dev_prefill);
	s_u64(&w, m->dev_decode);
	return s_done_w(&w);
}

int ns_cmsg_enc_error(const struct ns_cmsg_error *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };
	size_t n = strnlen(m->text, NS_CMSG_ERR_LEN - 1);

	s_hdr(&w, NS_CMSG_ERROR, 8 + n);
	s_u32(&w, (uint32_t)m->code);
	s_u32(&w, (uint32_t)n);
	s_put(&w, m->text, n);
	return s_done_w(&w);
}

int ns_cmsg_enc_quit(void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	s_hdr(&w, NS_CMSG_QUIT, 0);
	return s_done_w(&w);
}

/* --- decoders --- */

int ns_cmsg_dec_hello(const void *buf, size_t len, struct ns_cmsg_hello *m)
{
	struct s_r r;

	if (s_open(&r, buf, len, NS_CMSG_HELLO) || len != NS_CMSG_HDR + 12)
		return -EPROTO;
	m->n_vocab = s_ru32(&r);
	m->n_ctx = s_ru32(&r);
	m->pid = (int32_t)s_ru32(&r);
	if (r.bad || m->n_vocab == 0 || m->n_vocab > NS_CMSG_MAX_VOCAB || m->n_ctx == 0 ||
	    m->pid <= 0)
		return -EPROTO;
	return 0;
}

static int s_ids(struct s_r *r, int32_t *out, uint32_t n, uint32_t n_vocab)
{
	for (uint32_t i = 0; i < n; i++) {
		out[i] = (int32_t)s_ru32(r);
		if (out[i] < 0 || (uint32_t)out[i] >= n_vocab)
			return -EPROTO;
	}
	return r->bad ? -EPROTO : 0;
}

int ns_cmsg_dec_eval(const void *buf, size_t len, uint32_t n_vocab, int32_t *tokens_out,
		     uint32_t n_tokens_cap, int32_t *stop_out, struct ns_cmsg_eval *m)
{
	struct ns_cmsg_sampling *s = &m->sampling;
	struct s_r r;

	if (s_open(&r, buf, len, NS_CMSG_EVAL) || len < NS_CMSG_HDR + S_EVAL_FIXED)
		return -EPROTO;
	m->flags = s_ru32(&r);
	m->n_predict = s_ru32(&r);
	m->keep = s_ru32(&r);
	s->temperature = s_rf32(&r);
	s->top_k = (int32_t)s_ru32(&r);
	s->top_p = s_rf32(&r);
	s->min_p = s_rf32(&r);
	s->repeat_penalty = s_rf32(&r);
	s->repeat_last_n = (int32_t)s_ru32(&r);
	s->seed = s_ru64(&r);
	m->n_tokens = s_ru32(&r);
	m->n_stop = s_ru32(&r);
	if (r.bad || (m->flags & ~(uint32_t)(NS_EVAL_RESET | NS_EVAL_LOGITS_ALL | NS_EVAL_FORCED |
					   NS_EVAL_KEEP)) ||
	    (!(m->flags & NS_EVAL_KEEP) && m->keep) ||
	    ((m->flags & NS_EVAL_KEEP) && (m->flags & NS_EVAL_RESET)) ||
	    ((m->flags & NS_EVAL_FORCED) && (m->n_predict == 0 || m->n_predict >= m->n_tokens)) ||
	    m->n_tokens == 0 || m->n_tokens > n_tokens_cap || m->n_tokens > NS_CMSG_MAX_TOKENS ||
	    m->n_stop > NS_CMSG_MAX_STOP || len != ns_cmsg_size_eval(m->n_tokens, m->n_stop) ||
	    !isfinite(s->temperature) || !isfinite(s->top_p) || !isfinite(s->min_p) ||
	    !isfinite(s->repeat_penalty) || s->repeat_penalty <= 0 || s->repeat_last_n < 0)
		return -EPROTO;
	if (s_ids(&r, tokens_out, m->n_tokens, n_vocab) || s_ids(&r, stop_out, m->n_stop, n_vocab))
		return -EPROTO;
	m->tokens = tokens_out;
	m->stop = stop_out;
	return 0;
}

int ns_cmsg_dec_token(const void *buf, size_t len, uint32_t n_vocab, struct ns_cmsg_token *m)
{
	struct s_r r;

	if (s_open(&r, buf, len, NS_CMSG_TOKEN) || len != NS_CMSG_HDR + 8)
		return -EPROTO;
	m->id = (int32_t)s_ru32(&r);
	m->n_past = s_ru32(&r);
	if (r.bad || m->id < 0 || (uint32_t)m->id >= n_vocab)
		return -EPROTO;
	return 0;
}

int ns_cmsg_dec_logits(const void *buf, size_t len, uint32_t n_vocab, uint32_t *pos,
		       float *out)
{
	struct s_r r;

	if (s_open(&r, buf, len, NS_CMSG_LOGITS) || len != ns_cmsg_size_logits(n_vocab))
		return -EPROTO;
	*pos = s_ru32(&r);
	if (s_ru32(&r) != n_vocab)
		return -EPROTO;
	s_get(&r, out, 4 * (size_t)n_vocab);
	return r.bad ? -EPROTO : 0;
}

int ns_cmsg_dec_done(const void *buf, size_t len, struct ns_cmsg_done *m)
{
	struct s_r r;

	if (s_open(&r, buf, len, NS_CMSG_DONE) || len != NS_CMSG_HDR + S_DONE_BYTES)
		return -EPROTO;
	m->reason = s_ru32(&r);
	m->n_prompt = s_ru32(&r);
	m->n_gen = s_ru32(&r);
	m->n_past = s_ru32(&r);
	m->n_decode = s_ru32(&r);
	m->prefill_ns = s_ru64(&r);
	m->decode_ns = s_ru64(&r);
	m->wait_ns = s_ru64(&r);
	m->blocks = s_ru64(&r);
	m->block_bytes = s_ru64(&r);
	m->req_prefill = s_ru64(&r);
	m->req_decode = s_ru64(&r);
	m->dev_prefill = s_ru64(&r);
	m->dev_decode = s_ru64(&r);
	if (r.bad || m->reason > NS_DONE_STOPPED || m->n_decode > m->n_gen)
		return -EPROTO;
	return 0;
}

int ns_cmsg_dec_error(const void *buf, size_t len, struct ns_cmsg_error *m)
{
	struct s_r r;
	uint32_t n;

	if (s_open(&r, buf, len, NS_CMSG_ERROR) || len < NS_CMSG_HDR + 8)
		return -EPROTO;
	m->code = (int32_t)s_ru32(&r);
	n = s_ru32(&r);
	if (r.bad || n >= NS_CMSG_ERR_LEN || len != NS_CMSG_HDR + 8 + (size_t)n || m->code >= 0)
		return -EPROTO;
	s_get(&r, m->text, n);
	m->text[n] = 0;
	for (uint32_t i = 0; i < n; i++)
		if ((unsigned char)m->text[i] < 0x20)
			m->text[i] = ' ';
	return r.bad ? -EPROTO : 0;
}

int ns_cmsg_enc_stop(void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };

	s_hdr(&w, NS_CMSG_STOP, 0);
	return s_done_w(&w);
}

/* --- STEP --- */

size_t ns_cmsg_size_step(uint32_t n_seq, uint64_t n_tokens)
{
	return NS_CMSG_HDR + 4 + 16 * (size_t)n_seq + 4 * (size_t)n_tokens;
}

int ns_cmsg_enc_step(const struct ns_cmsg_step *m, void *buf, size_t cap)
{
	struct s_w w = { .p = buf, .cap = cap };
	uint64_t total = 0;

	if (m->n_seq == 0 || m->n_seq > NS_CMSG_MAX_SEQ)
		return -EINVAL;
	for (uint32_t i = 0; i < m->n_seq; i++)
		total += m->seq[i].n_tokens;
	if (total > NS_CMSG_MAX_TOKENS)
		return -EINVAL;
	s_hdr(&w, NS_CMSG_STEP, ns_cmsg_size_step(m->n_seq, total) - NS_CMSG_HDR);
	s_u32(&w, m->n_seq);
	for (uint32_t i = 0; i < m->n_seq; i++) {
		s_u32(&w, m->seq[i].slot);
		s_u32(&w, m->seq[i].keep);
		s_u32(&w, m->seq[i].n_tokens);
		s_u32(&w, m->seq[i].want_logits);
	}
	s_put(&w, m->tokens, 4 * (size_t)total);
	return s_done_w(&w);
}

int ns_cmsg_dec_step(const void *buf, size_t len, uint32_t n_vocab, uint32_t n_slots,
		     int32_t *tokens_out, uint32_t tokens_cap, struct ns_cmsg_step *m)
{
	uint64_t used = 0, total = 0;
	struct s_r r;

	if (s_open(&r, buf, len, NS_CMSG_STEP))
		return -EPROTO;
	m->n_seq = s_ru32(&r);
	if (r.bad || m->n_seq == 0 || m->n_seq > NS_CMSG_MAX_SEQ || n_slots > 64)
		return -EPROTO;
	for (uint32_t i = 0; i < m->n_seq; i++) {
		struct ns_cmsg_step_seq *q = &m->seq[i];

		q->slot = s_ru32(&r);
		q->keep = s_ru32(&r);
		q->n_tokens = s_ru32(&r);
		q->want_logits = s_ru32(&r);
		if (r.bad || q->slot >= n_slots || (used >> q->slot & 1) || !q->n_tokens ||
		    q->want_logits > 1)
			return -EPROTO;
		used |= 1ull << q->slot;
		total += q->n_tokens;
	}
	if (total > tokens_cap || total > NS_CMSG_MAX_TOKENS ||
	    len != ns_cmsg_size_step(m->n_seq, total) || s_ids(&r, tokens_out, (uint32_t)total,
								  n_vocab))
		return -EPROTO;
	m->tokens = tokens_out;
	return 0;
}
