/* api_sampler.c - the sampler chain of neurostream.h: ns_gen_params over the sampler that
 * nscompute and nsctl serve run (nscompute/sampling/sampling.h), so a caller's choices equal
 * theirs. */
#include <errno.h>
#include <stdlib.h>

#include "neurostream.h"
#include "sampling.h"

/* The public name of the internal chain: no state of its own. */
struct ns_sampler_chain {
	struct ns_sampler *s;
};

int ns_sampler_chain_new(const struct ns_gen_params *g, uint32_t n_vocab,
			 struct ns_sampler_chain **out)
{
	struct ns_sampler_params p;
	struct ns_sampler_chain *c;
	int rc;

	*out = NULL;
	if (!g)
		return -EINVAL;
	ns_sampler_params_default(&p); /* the fields below are all ns_gen_params has */
	p.temperature = g->temperature;
	p.top_k = g->top_k;
	p.top_p = g->top_p;
	p.min_p = g->min_p;
	p.repeat_penalty = g->repeat_penalty;
	p.repeat_last_n = g->repeat_last_n;
	p.seed = g->seed;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	rc = ns_sampler_new(&p, n_vocab, &c->s);
	if (rc < 0) {
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int32_t ns_sampler_chain_sample(struct ns_sampler_chain *s, const float *logits)
{
	return ns_sampler_sample(s->s, logits);
}

void ns_sampler_chain_accept(struct ns_sampler_chain *s, int32_t token)
{
	ns_sampler_accept(s->s, token);
}

void ns_sampler_chain_free(struct ns_sampler_chain **s)
{
	if (!s || !*s)
		return;
	ns_sampler_destroy(&(*s)->s);
	free(*s);
	*s = NULL;
}
