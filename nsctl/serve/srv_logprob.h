/* srv_logprob.h - log-probabilities of generated tokens (OpenAI's logprobs / top_logprobs):
 * log softmax of the logits the token was sampled from (after logit_bias, before
 * temperature and truncation, as llama-server reports them), the chosen token's and the k
 * most likely ones', most likely first (ties: lower id first). */
#ifndef NSCTL_SRV_LOGPROB_H
#define NSCTL_SRV_LOGPROB_H

#include <stdint.h>

#define SRV_TOP_LOGPROBS_MAX 20 /* as OpenAI */

struct srv_logprob {
	int32_t id;
	float lp;
};

struct srv_token_lp {
	struct srv_logprob chosen;
	struct srv_logprob top[SRV_TOP_LOGPROBS_MAX];
	uint32_t n_top;
};

/* k <= SRV_TOP_LOGPROBS_MAX (clamped), n_vocab >= 1. */
void srv_logprobs(const float *logits, uint32_t n_vocab, int32_t chosen, uint32_t k,
		  struct srv_token_lp *out);

#endif
