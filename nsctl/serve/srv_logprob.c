/* srv_logprob.c - see srv_logprob.h. */
#include <math.h>

#include "srv_logprob.h"

/* Does a rank before b? Higher logit first, then lower id. */
static int s_before(float la, int32_t a, float lb, int32_t b)
{
	return la > lb || (la == lb && a < b);
}

void srv_logprobs(const float *logits, uint32_t n_vocab, int32_t chosen, uint32_t k,
		  struct srv_token_lp *out)
{
	float mx = -INFINITY;
	double sum = 0.0, lse;

	if (k > SRV_TOP_LOGPROBS_MAX)
		k = SRV_TOP_LOGPROBS_MAX;
	for (uint32_t i = 0; i < n_vocab; i++)
		if (logits[i] > mx)
			mx = logits[i];
	for (uint32_t i = 0; i < n_vocab; i++)
		sum += exp((double)logits[i] - mx);
	lse = (double)mx + log(sum);
	out->chosen.id = chosen;
	out->chosen.lp = (float)((double)logits[chosen] - lse);
	/* the k best by insertion into a sorted list: k <= 20 */
	out->n_top = 0;
	for (uint32_t i = 0; i < n_vocab && k; i++) {
		uint32_t j = out->n_top;

		if (j == k && !s_before(logits[i], (int32_t)i, logits[out->top[j - 1].id],
					out->top[j - 1].id))
			continue;
		if (j == k)
			j--;
		else
			out->n_top++;
		while (j > 0 && s_before(logits[i], (int32_t)i, logits[out->top[j - 1].id],
					 out->top[j - 1].id)) {
			out->top[j] = out->top[j - 1];
			j--;
		}
		out->top[j].id = (int32_t)i;
	}
	for (uint32_t j = 0; j < out->n_top; j++)
		out->top[j].lp = (float)((double)logits[out->top[j].id] - lse);
}
