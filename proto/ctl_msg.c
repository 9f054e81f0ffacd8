/* ctl_msg.c - the nsctl <-> nscompute messages (ctl_msg.h) on zmsg's envelope (wire.h). */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ctl_msg.h"
#include "wire.h"

int ns_cmsg_type(const void *buf, size_t len)
{
	int t = ns_zmsg_type(buf, len);

	return t >= NS_CMSG_HELLO && t <= NS_CMSG_IMAGES ? t : -EPROTO;
}

/* --- sizes --- */

#define S_SAMPLING_BYTES (4 * 6 + 8)
#define S_DONE_BYTES (6 * 4 + 11 * 8)
#define S_PROGRESS_BYTES (3 * 4 + 8)
#define S_EVAL_FIXED (5 * 4 + S_SAMPLING_BYTES)
#define S_DRAFT_FIXED (4 * 4)
#define S_SPEC_BYTES (4 * 4 + 2 * 8)

size_t ns_cmsg_size_eval(uint32_t n_tokens, uint32_t n_stop)
{
	return NS_CMSG_HDR + S_EVAL_FIXED + 4 * ((size_t)n_tokens + n_stop);
}

size_t ns_cmsg_size_eval_msg(const struct ns_cmsg_eval *m)
{
	size_t n = ns_cmsg_size_eval(m->n_tokens, m->n_stop);

	if (m->flags & NS_EVAL_DRAFT)
		n += S_DRAFT_FIXED + 4 * (size_t)m->draft.n_oracle;
	return n;
}

size_t ns_cmsg_size_logits(uint32_t n_vocab)
{
	return NS_CMSG_HDR + 8 + 4 * (size_t)n_vocab;
}

/* --- encoders --- */

int ns_cmsg_enc_hello(const struct ns_cmsg_hello *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_HELLO, 12);
	ns_wr_u32(&w, m->n_vocab);
	ns_wr_u32(&w, m->n_ctx);
	ns_wr_u32(&w, (uint32_t)m->pid);
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_eval(const struct ns_cmsg_eval *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	if (m->n_tokens == 0 || m->n_tokens > NS_CMSG_MAX_TOKENS || m->n_stop > NS_CMSG_MAX_STOP ||
	    ((m->flags & NS_EVAL_DRAFT) && m->draft.n_oracle > NS_CMSG_MAX_TOKENS))
		return -EINVAL;
	ns_wr_envelope(&w, NS_CMSG_EVAL, ns_cmsg_size_eval_msg(m) - NS_CMSG_HDR);
	ns_wr_u32(&w, m->flags);
	ns_wr_u32(&w, m->n_predict);
	ns_wr_u32(&w, m->keep);
	ns_wr_f32(&w, m->sampling.temperature);
	ns_wr_u32(&w, (uint32_t)m->sampling.top_k);
	ns_wr_f32(&w, m->sampling.top_p);
	ns_wr_f32(&w, m->sampling.min_p);
	ns_wr_f32(&w, m->sampling.repeat_penalty);
	ns_wr_u32(&w, (uint32_t)m->sampling.repeat_last_n);
	ns_wr_u64(&w, m->sampling.seed);
	ns_wr_u32(&w, m->n_tokens);
	ns_wr_u32(&w, m->n_stop);
	ns_wr_put(&w, m->tokens, 4 * (size_t)m->n_tokens);
	if (m->n_stop)
		ns_wr_put(&w, m->stop, 4 * (size_t)m->n_stop);
	if (m->flags & NS_EVAL_DRAFT) {
		ns_wr_u32(&w, m->draft.kind);
		ns_wr_u32(&w, m->draft.max);
		ns_wr_u32(&w, m->draft.min);
		ns_wr_u32(&w, m->draft.n_oracle);
		if (m->draft.n_oracle)
			ns_wr_put(&w, m->draft.oracle, 4 * (size_t)m->draft.n_oracle);
	}
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_spec(const struct ns_cmsg_spec *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_SPEC, S_SPEC_BYTES);
	ns_wr_u32(&w, m->drafted);
	ns_wr_u32(&w, m->accepted);
	ns_wr_u32(&w, m->draft_passes);
	ns_wr_u32(&w, m->k_last);
	ns_wr_u64(&w, m->one_ns);
	ns_wr_u64(&w, m->chunk_ns);
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_token(const struct ns_cmsg_token *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_TOKEN, 8);
	ns_wr_u32(&w, (uint32_t)m->id);
	ns_wr_u32(&w, m->n_past);
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_logits(const struct ns_cmsg_logits *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	if (m->n_vocab == 0 || m->n_vocab > NS_CMSG_MAX_VOCAB)
		return -EINVAL;
	ns_wr_envelope(&w, NS_CMSG_LOGITS, ns_cmsg_size_logits(m->n_vocab) - NS_CMSG_HDR);
	ns_wr_u32(&w, m->pos);
	ns_wr_u32(&w, m->n_vocab);
	ns_wr_put(&w, m->logits, 4 * (size_t)m->n_vocab);
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_done(const struct ns_cmsg_done *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_DONE, S_DONE_BYTES);
	ns_wr_u32(&w, m->reason);
	ns_wr_u32(&w, m->n_prompt);
	ns_wr_u32(&w, m->n_gen);
	ns_wr_u32(&w, m->n_past);
	ns_wr_u32(&w, m->n_decode);
	ns_wr_u64(&w, m->prefill_ns);
	ns_wr_u64(&w, m->decode_ns);
	ns_wr_u64(&w, m->wait_ns);
	ns_wr_u64(&w, m->blocks);
	ns_wr_u64(&w, m->block_bytes);
	ns_wr_u64(&w, m->req_prefill);
	ns_wr_u64(&w, m->req_decode);
	ns_wr_u64(&w, m->dev_prefill);
	ns_wr_u64(&w, m->dev_decode);
	ns_wr_u32(&w, m->n_image_tokens);
	ns_wr_u64(&w, m->tower_ns);
	ns_wr_u64(&w, m->tower_req);
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_error(const struct ns_cmsg_error *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };
	size_t n = strnlen(m->text, NS_CMSG_ERR_LEN - 1);

	ns_wr_envelope(&w, NS_CMSG_ERROR, 8 + n);
	ns_wr_u32(&w, (uint32_t)m->code);
	ns_wr_u32(&w, (uint32_t)n);
	ns_wr_put(&w, m->text, n);
	return ns_wr_finish(&w);
}

int ns_cmsg_enc_quit(void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_QUIT, 0);
	return ns_wr_finish(&w);
}

/* --- decoders --- */

int ns_cmsg_dec_hello(const void *buf, size_t len, struct ns_cmsg_hello *m)
{
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_HELLO) || len != NS_CMSG_HDR + 12)
		return -EPROTO;
	m->n_vocab = ns_rd_u32(&r);
	m->n_ctx = ns_rd_u32(&r);
	m->pid = (int32_t)ns_rd_u32(&r);
	if (r.bad || m->n_vocab == 0 || m->n_vocab > NS_CMSG_MAX_VOCAB || m->n_ctx == 0 ||
	    m->pid <= 0)
		return -EPROTO;
	return 0;
}

static int s_ids(struct ns_rd *r, int32_t *out, uint32_t n, uint32_t n_vocab)
{
	for (uint32_t i = 0; i < n; i++) {
		out[i] = (int32_t)ns_rd_u32(r);
		if (out[i] < 0 || (uint32_t)out[i] >= n_vocab)
			return -EPROTO;
	}
	return r->bad ? -EPROTO : 0;
}

/* The draft block after an EVAL's stop ids (r stands there); its oracle ids into out (cap). */
static int s_dec_draft(struct ns_rd *r, size_t len, uint32_t n_vocab, int32_t *out, uint32_t cap,
		       struct ns_cmsg_eval *m)
{
	struct ns_cmsg_draft *d = &m->draft;

	d->kind = ns_rd_u32(r);
	d->max = ns_rd_u32(r);
	d->min = ns_rd_u32(r);
	d->n_oracle = ns_rd_u32(r);
	if (r->bad || (d->kind != NS_DRAFT_NGRAM && d->kind != NS_DRAFT_ORACLE &&
	     d->kind != NS_DRAFT_MODEL && d->kind != NS_DRAFT_MTP) ||
	    d->min < 1 || d->min > d->max || d->max > NS_CMSG_MAX_DRAFT ||
	    (d->kind != NS_DRAFT_ORACLE && d->n_oracle) || d->n_oracle > cap ||
	    len != ns_cmsg_size_eval(m->n_tokens, m->n_stop) + S_DRAFT_FIXED + 4 * (size_t)d->n_oracle)
		return -EPROTO;
	if (s_ids(r, out, d->n_oracle, n_vocab))
		return -EPROTO;
	d->oracle = out;
	return 0;
}

int ns_cmsg_dec_eval(const void *buf, size_t len, uint32_t n_vocab, int32_t *tokens_out,
		     uint32_t n_tokens_cap, int32_t *stop_out, struct ns_cmsg_eval *m)
{
	struct ns_cmsg_sampling *s = &m->sampling;
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_EVAL) || len < NS_CMSG_HDR + S_EVAL_FIXED)
		return -EPROTO;
	m->flags = ns_rd_u32(&r);
	m->n_predict = ns_rd_u32(&r);
	m->keep = ns_rd_u32(&r);
	s->temperature = ns_rd_f32(&r);
	s->top_k = (int32_t)ns_rd_u32(&r);
	s->top_p = ns_rd_f32(&r);
	s->min_p = ns_rd_f32(&r);
	s->repeat_penalty = ns_rd_f32(&r);
	s->repeat_last_n = (int32_t)ns_rd_u32(&r);
	s->seed = ns_rd_u64(&r);
	m->n_tokens = ns_rd_u32(&r);
	m->n_stop = ns_rd_u32(&r);
	if (r.bad || (m->flags & ~(uint32_t)(NS_EVAL_RESET | NS_EVAL_LOGITS_ALL | NS_EVAL_FORCED |
					   NS_EVAL_KEEP | NS_EVAL_DRAFT)) ||
	    (!(m->flags & NS_EVAL_KEEP) && m->keep) ||
	    ((m->flags & NS_EVAL_KEEP) && (m->flags & NS_EVAL_RESET)) ||
	    ((m->flags & NS_EVAL_FORCED) && (m->n_predict == 0 || m->n_predict >= m->n_tokens)) ||
	    ((m->flags & NS_EVAL_DRAFT) && (m->flags & (NS_EVAL_FORCED | NS_EVAL_LOGITS_ALL))) ||
	    m->n_tokens == 0 || m->n_tokens > n_tokens_cap || m->n_tokens > NS_CMSG_MAX_TOKENS ||
	    m->n_stop > NS_CMSG_MAX_STOP || len < ns_cmsg_size_eval(m->n_tokens, m->n_stop) ||
	    (!(m->flags & NS_EVAL_DRAFT) && len != ns_cmsg_size_eval(m->n_tokens, m->n_stop)) ||
	    !isfinite(s->temperature) || !isfinite(s->top_p) || !isfinite(s->min_p) ||
	    !isfinite(s->repeat_penalty) || s->repeat_penalty <= 0 || s->repeat_last_n < 0)
		return -EPROTO;
	if (s_ids(&r, tokens_out, m->n_tokens, n_vocab) || s_ids(&r, stop_out, m->n_stop, n_vocab))
		return -EPROTO;
	m->tokens = tokens_out;
	m->stop = stop_out;
	memset(&m->draft, 0, sizeof(m->draft));
	return m->flags & NS_EVAL_DRAFT ? s_dec_draft(&r, len, n_vocab, tokens_out + m->n_tokens,
						      n_tokens_cap - m->n_tokens, m) : 0;
}

int ns_cmsg_dec_token(const void *buf, size_t len, uint32_t n_vocab, struct ns_cmsg_token *m)
{
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_TOKEN) || len != NS_CMSG_HDR + 8)
		return -EPROTO;
	m->id = (int32_t)ns_rd_u32(&r);
	m->n_past = ns_rd_u32(&r);
	if (r.bad || m->id < 0 || (uint32_t)m->id >= n_vocab)
		return -EPROTO;
	return 0;
}

int ns_cmsg_dec_logits(const void *buf, size_t len, uint32_t n_vocab, uint32_t *pos,
		       float *out)
{
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_LOGITS) || len != ns_cmsg_size_logits(n_vocab))
		return -EPROTO;
	*pos = ns_rd_u32(&r);
	if (ns_rd_u32(&r) != n_vocab)
		return -EPROTO;
	ns_rd_get(&r, out, 4 * (size_t)n_vocab);
	return r.bad ? -EPROTO : 0;
}

int ns_cmsg_dec_done(const void *buf, size_t len, struct ns_cmsg_done *m)
{
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_DONE) || len != NS_CMSG_HDR + S_DONE_BYTES)
		return -EPROTO;
	m->reason = ns_rd_u32(&r);
	m->n_prompt = ns_rd_u32(&r);
	m->n_gen = ns_rd_u32(&r);
	m->n_past = ns_rd_u32(&r);
	m->n_decode = ns_rd_u32(&r);
	m->prefill_ns = ns_rd_u64(&r);
	m->decode_ns = ns_rd_u64(&r);
	m->wait_ns = ns_rd_u64(&r);
	m->blocks = ns_rd_u64(&r);
	m->block_bytes = ns_rd_u64(&r);
	m->req_prefill = ns_rd_u64(&r);
	m->req_decode = ns_rd_u64(&r);
	m->dev_prefill = ns_rd_u64(&r);
	m->dev_decode = ns_rd_u64(&r);
	m->n_image_tokens = ns_rd_u32(&r);
	m->tower_ns = ns_rd_u64(&r);
	m->tower_req = ns_rd_u64(&r);
	if (r.bad || m->reason > NS_DONE_STOPPED || m->n_decode > m->n_gen ||
	    m->n_image_tokens > m->n_prompt || m->tower_req > m->req_prefill)
		return -EPROTO;
	return 0;
}

int ns_cmsg_dec_error(const void *buf, size_t len, struct ns_cmsg_error *m)
{
	struct ns_rd r;
	uint32_t n;

	if (ns_rd_open(&r, buf, len, NS_CMSG_ERROR) || len < NS_CMSG_HDR + 8)
		return -EPROTO;
	m->code = (int32_t)ns_rd_u32(&r);
	n = ns_rd_u32(&r);
	if (r.bad || n >= NS_CMSG_ERR_LEN || len != NS_CMSG_HDR + 8 + (size_t)n || m->code >= 0)
		return -EPROTO;
	ns_rd_get(&r, m->text, n);
	m->text[n] = 0;
	for (uint32_t i = 0; i < n; i++)
		if ((unsigned char)m->text[i] < 0x20)
			m->text[i] = ' ';
	return r.bad ? -EPROTO : 0;
}

int ns_cmsg_enc_stop(void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_STOP, 0);
	return ns_wr_finish(&w);
}

/* --- STEP --- */

size_t ns_cmsg_size_step(uint32_t n_seq, uint64_t n_tokens)
{
	return NS_CMSG_HDR + 4 + 16 * (size_t)n_seq + 4 * (size_t)n_tokens;
}

int ns_cmsg_enc_step(const struct ns_cmsg_step *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };
	uint64_t total = 0;

	if (m->n_seq == 0 || m->n_seq > NS_CMSG_MAX_SEQ)
		return -EINVAL;
	for (uint32_t i = 0; i < m->n_seq; i++)
		total += m->seq[i].n_tokens;
	if (total > NS_CMSG_MAX_TOKENS)
		return -EINVAL;
	ns_wr_envelope(&w, NS_CMSG_STEP, ns_cmsg_size_step(m->n_seq, total) - NS_CMSG_HDR);
	ns_wr_u32(&w, m->n_seq);
	for (uint32_t i = 0; i < m->n_seq; i++) {
		ns_wr_u32(&w, m->seq[i].slot);
		ns_wr_u32(&w, m->seq[i].keep);
		ns_wr_u32(&w, m->seq[i].n_tokens);
		ns_wr_u32(&w, m->seq[i].want_logits);
	}
	ns_wr_put(&w, m->tokens, 4 * (size_t)total);
	return ns_wr_finish(&w);
}

int ns_cmsg_dec_step(const void *buf, size_t len, uint32_t n_vocab, uint32_t n_slots,
		     int32_t *tokens_out, uint32_t tokens_cap, struct ns_cmsg_step *m)
{
	uint64_t used = 0, total = 0;
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_STEP))
		return -EPROTO;
	m->n_seq = ns_rd_u32(&r);
	if (r.bad || m->n_seq == 0 || m->n_seq > NS_CMSG_MAX_SEQ || n_slots > 64)
		return -EPROTO;
	for (uint32_t i = 0; i < m->n_seq; i++) {
		struct ns_cmsg_step_seq *q = &m->seq[i];

		q->slot = ns_rd_u32(&r);
		q->keep = ns_rd_u32(&r);
		q->n_tokens = ns_rd_u32(&r);
		q->want_logits = ns_rd_u32(&r);
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

int ns_cmsg_dec_spec(const void *buf, size_t len, struct ns_cmsg_spec *m)
{
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_SPEC) || len != NS_CMSG_HDR + S_SPEC_BYTES)
		return -EPROTO;
	m->drafted = ns_rd_u32(&r);
	m->accepted = ns_rd_u32(&r);
	m->draft_passes = ns_rd_u32(&r);
	m->k_last = ns_rd_u32(&r);
	m->one_ns = ns_rd_u64(&r);
	m->chunk_ns = ns_rd_u64(&r);
	if (r.bad || m->accepted > m->drafted || m->k_last > NS_CMSG_MAX_DRAFT)
		return -EPROTO;
	return 0;
}

int ns_cmsg_enc_progress(const struct ns_cmsg_progress *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };

	ns_wr_envelope(&w, NS_CMSG_PROGRESS, S_PROGRESS_BYTES);
	ns_wr_u32(&w, m->n_tokens);
	ns_wr_u32(&w, m->layers_done);
	ns_wr_u32(&w, m->n_layers);
	ns_wr_u64(&w, m->elapsed_ns);
	return ns_wr_finish(&w);
}

int ns_cmsg_dec_progress(const void *buf, size_t len, struct ns_cmsg_progress *m)
{
	struct ns_rd r;

	if (ns_rd_open(&r, buf, len, NS_CMSG_PROGRESS) || len != NS_CMSG_HDR + S_PROGRESS_BYTES)
		return -EPROTO;
	m->n_tokens = ns_rd_u32(&r);
	m->layers_done = ns_rd_u32(&r);
	m->n_layers = ns_rd_u32(&r);
	m->elapsed_ns = ns_rd_u64(&r);
	if (r.bad || !m->n_layers || m->n_layers > NS_CMSG_MAX_LAYERS ||
	    m->layers_done > m->n_layers || m->n_tokens > NS_CMSG_MAX_TOKENS)
		return -EPROTO;
	return 0;
}

/* --- IMAGES --- */

size_t ns_cmsg_size_images(const struct ns_cmsg_images *m)
{
	size_t n = NS_CMSG_HDR + 28;

	if (m->n_images == 0 || m->n_images > NS_CMSG_MAX_IMAGES)
		return 0;
	for (uint32_t i = 0; i < m->n_images; i++) {
		size_t l = m->path[i] ? strlen(m->path[i]) : 0;

		if (l == 0 || l > NS_CMSG_MAX_PATH)
			return 0;
		n += 4 + l;
	}
	return n;
}

int ns_cmsg_enc_images(const struct ns_cmsg_images *m, void *buf, size_t cap)
{
	struct ns_wr w = { .p = buf, .cap = cap };
	size_t n = ns_cmsg_size_images(m);

	if (!n)
		return -EINVAL;
	ns_wr_envelope(&w, NS_CMSG_IMAGES, (uint32_t)(n - NS_CMSG_HDR));
	ns_wr_u32(&w, m->image_id);
	ns_wr_u32(&w, m->max_tokens);
	ns_wr_u32(&w, m->n_images);
	ns_wr_u64(&w, m->min_pixels);
	ns_wr_u64(&w, m->max_pixels);
	for (uint32_t i = 0; i < m->n_images; i++) {
		size_t l = strlen(m->path[i]);

		ns_wr_u32(&w, (uint32_t)l);
		ns_wr_put(&w, m->path[i], l);
	}
	return ns_wr_finish(&w);
}

int ns_cmsg_dec_images(const void *buf, size_t len, uint32_t n_vocab, char *strbuf, size_t cap,
		       struct ns_cmsg_images *m)
{
	struct ns_rd r;
	size_t used = 0;

	if (ns_rd_open(&r, buf, len, NS_CMSG_IMAGES) || len < NS_CMSG_HDR + 28)
		return -EPROTO;
	m->image_id = ns_rd_u32(&r);
	m->max_tokens = ns_rd_u32(&r);
	m->n_images = ns_rd_u32(&r);
	m->min_pixels = ns_rd_u64(&r);
	m->max_pixels = ns_rd_u64(&r);
	if (r.bad || m->image_id >= n_vocab || m->n_images == 0 ||
	    m->n_images > NS_CMSG_MAX_IMAGES)
		return -EPROTO;
	for (uint32_t i = 0; i < m->n_images; i++) {
		uint32_t l = ns_rd_u32(&r);

		if (r.bad || l == 0 || l > NS_CMSG_MAX_PATH || l > len || used + l + 1 > cap)
			return -EPROTO;
		ns_rd_get(&r, strbuf + used, l);
		if (r.bad || memchr(strbuf + used, 0, l))
			return -EPROTO;
		strbuf[used + l] = 0;
		m->path[i] = strbuf + used;
		used += (size_t)l + 1;
	}
	return ns_rd_close(&r) ? -EPROTO : 0;
}
