/* compute_draft_model.c - the resident model drafter (compute_draft_model.h): its state and
 * proposals over any pass; the cpu pass over a RAM copy of its tensors (nsc_dmodel_open). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compute_draft_model.h"
#include "forward.h"
#include "gemv.h"
#include "model.h"
#include "ns_util.h"
#include "weights_fused.h"

struct nsc_dmodel {
	struct ns_model *m;
	struct ns_weights *w;
	struct ns_fwd *f;
	float *logits;    /* (n_vocab) */
	uint32_t n_vocab, cap;
	int32_t *seq;     /* (cap) the target's tokens as the drafter knows them */
	uint32_t n_seq;
	bool lost;        /* the sequence outgrew cap: no proposals until the next request */
	int32_t *kv;      /* (cap) the tokens in the drafter's KV cache */
};

int nsc_dmodel_open_model(const char *path, struct ns_model **m, char *err, size_t errlen)
{
	int rc = ns_model_open_flags(path, NS_MODEL_OPEN_NO_VOCAB, m, err, errlen);

	return rc < 0 && rc != -ENOMEM ? -EINVAL : rc; /* missing, malformed: bad input */
}

int nsc_dmodel_adopt(int rc, struct ns_model *m, struct ns_weights *w, struct ns_fwd *f,
		     uint32_t n_vocab, struct nsc_dmodel **out, char *err, size_t errlen)
{
	struct nsc_dmodel *d = rc < 0 ? NULL : calloc(1, sizeof(*d));

	*out = NULL;
	if (!d) {
		ns_fwd_destroy(&f);
		ns_weights_destroy(&w);
		ns_model_close(&m);
		return rc < 0 ? rc : (ns_errf(err, errlen, "out of memory"), -ENOMEM);
	}
	d->m = m;
	d->w = w;
	d->f = f;
	if (ns_fwd_n_vocab(f) != n_vocab) {
		ns_errf(err, errlen, "the draft model's vocabulary has %u tokens, the model's %u",
			ns_fwd_n_vocab(f), n_vocab);
		nsc_dmodel_free(&d);
		return -EINVAL;
	}
	d->n_vocab = n_vocab;
	d->cap = ns_fwd_n_ctx(f);
	d->logits = malloc((size_t)n_vocab * sizeof(*d->logits));
	d->seq = malloc((size_t)d->cap * sizeof(*d->seq));
	d->kv = malloc((size_t)d->cap * sizeof(*d->kv));
	if (!d->logits || !d->seq || !d->kv) {
		ns_errf(err, errlen, "out of memory for the draft model");
		nsc_dmodel_free(&d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

int nsc_dmodel_open(const char *path, uint32_t n_ctx, int threads, bool act_q8,
		    void (*beat)(void *user), void *beat_user,
		    uint32_t n_vocab, struct nsc_dmodel **out, char *err, size_t errlen)
{
	struct ns_weights_fused_opts wo = { .n_threads = threads,
					    .act = act_q8 ? NS_ACT_Q8 : NS_ACT_F32,
					    .beat = beat, .beat_user = beat_user };
	struct ns_fwd_opts fo = { .n_ctx = n_ctx };
	struct ns_model *m = NULL;
	struct ns_weights *w = NULL;
	struct ns_fwd *f = NULL;
	int rc;

	*out = NULL;
	rc = nsc_dmodel_open_model(path, &m, err, errlen);
	if (rc == 0)
		rc = ns_weights_fused_new(m, &wo, &w, err, errlen);
	if (rc == 0)
		rc = ns_fwd_new(m, w, &fo, &f, err, errlen);
	return nsc_dmodel_adopt(rc, m, w, f, n_vocab, out, err, errlen);
}

void nsc_dmodel_free(struct nsc_dmodel **dp)
{
	struct nsc_dmodel *d = *dp;

	if (!d)
		return;
	ns_fwd_destroy(&d->f);
	ns_weights_destroy(&d->w);
	ns_model_close(&d->m);
	free(d->logits);
	free(d->seq);
	free(d->kv);
	free(d);
	*dp = NULL;
}

struct ns_fwd *nsc_dmodel_fwd(struct nsc_dmodel *d)
{
	return d->f;
}

void nsc_dmodel_begin(struct nsc_dmodel *d, uint32_t keep, const int32_t *tokens, uint32_t n)
{
	/* its record of the kept positions is the target's when it drafted all of them */
	d->n_seq = keep <= d->n_seq ? keep : 0;
	d->lost = false;
	for (uint32_t i = 0; i < n; i++)
		nsc_dmodel_accept(d, tokens[i]);
}

void nsc_dmodel_accept(struct nsc_dmodel *d, int32_t id)
{
	if (d->n_seq < d->cap)
		d->seq[d->n_seq++] = id;
	else
		d->lost = true;
}

static uint32_t s_argmax(const float *x, uint32_t n)
{
	uint32_t best = 0;

	for (uint32_t i = 1; i < n; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

int nsc_dmodel_propose(struct nsc_dmodel *d, uint32_t k, int32_t *out, char *err,
		       size_t errlen)
{
	uint32_t c = 0, n_kv = ns_fwd_n_past(d->f);
	int rc;

	if (k == 0 || d->lost || d->n_seq == 0)
		return 0;
	/* its cache then holds the sequence and k - 1 proposals (the last is not evaluated) */
	if (k - 1 > d->cap - d->n_seq)
		k = d->cap - d->n_seq + 1;
	/* the prefix its cache shares with the sequence, less one: the last token of the
	 * sequence is evaluated again for the logits that propose the first draft */
	while (c < n_kv && c < d->n_seq && d->kv[c] == d->seq[c])
		c++;
	if (c == d->n_seq)
		c--;
	rc = ns_fwd_truncate(d->f, c);
	if (rc == -ERANGE) { /* its sliding layers' rings cannot go back so far: from 0 */
		ns_fwd_reset(d->f);
		c = 0;
		rc = 0;
	}
	if (rc < 0)
		goto fail;
	rc = ns_fwd_eval(d->f, d->seq + c, d->n_seq - c, d->logits, false);
	memcpy(d->kv + c, d->seq + c, (size_t)(d->n_seq - c) * sizeof(*d->kv));
	for (uint32_t i = 0; rc == 0 && i < k; i++) {
		out[i] = (int32_t)s_argmax(d->logits, d->n_vocab);
		if (i + 1 == k)
			return (int)k;
		d->kv[d->n_seq + i] = out[i];
		rc = ns_fwd_eval(d->f, out + i, 1, d->logits, false);
	}
fail:
	/* after an error its sequence must be reset: next time it starts over */
	ns_errf(err, errlen, "draft model: %s", ns_fwd_error(d->f));
	ns_fwd_reset(d->f);
	return rc < 0 ? rc : -EIO;
}
