/* srv_req.h - one request of nsctl serve, shared by the HTTP thread that took it and the
 * scheduler that generates it.
 *
 * The HTTP thread fills the parameters (srv_params, read-only once submitted) and waits on
 * the request's condition variable; the scheduler appends output (answer and reasoning text,
 * logprobs) and finally sets done. Everything after `p` is guarded by the scheduler's mutex.
 * The request is freed by whichever side drops the last reference (srv_sched_release). */
#ifndef NSCTL_SRV_REQ_H
#define NSCTL_SRV_REQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "run_report.h"
#include "sampling.h"
#include "srv_logprob.h"
#include "srv_stop.h"
#include "srv_text.h"

enum srv_kind {
	SRV_CHAT = 0,      /* /v1/chat/completions */
	SRV_COMPLETION,    /* /v1/completions */
};

enum srv_finish {
	SRV_FIN_NONE = 0,
	SRV_FIN_STOP,      /* end-of-generation token or stop string: "stop" */
	SRV_FIN_LENGTH,    /* max_tokens or a full context: "length" */
	SRV_FIN_ERROR,     /* err_status / err say why */
};

struct srv_params {
	enum srv_kind kind;
	bool stream;
	bool include_usage;        /* stream_options.include_usage */
	char *model;               /* the name the client asked for (echoed back) */
	int32_t *prompt;           /* (n_prompt) tokens, BOS / template included */
	uint32_t n_prompt;
	uint32_t max_tokens;       /* 0: until the context is full */
	struct ns_sampler_params sp;
	int32_t *bias_ids;         /* logit_bias: (n_bias) token ids and their additions */
	float *bias;
	uint32_t n_bias;
	char *stop[SRV_STOP_MAX];
	size_t n_stop;
	bool logprobs;
	uint32_t top_logprobs;
	enum srv_split split;      /* how the reply splits into reasoning and answer */
	bool ignore_eos;           /* do not stop at end-of-generation tokens */
};

void srv_params_free(struct srv_params *p);

struct srv_req {
	struct srv_params p;
	pthread_cond_t cv;           /* signalled when output arrives or the request ends */
	int refs;                    /* the HTTP thread's and the scheduler's */
	bool queued, active, done;
	bool cancelled;              /* the client went away or the server stops */
	uint64_t order;              /* arrival number */
	/* output not yet taken by the HTTP thread */
	struct ns_text answer, reasoning;
	struct srv_token_lp *lps;    /* (n_lps) */
	uint32_t n_lps, cap_lps;
	/* totals */
	uint32_t n_gen;              /* tokens generated */
	uint32_t n_cached;           /* prompt tokens taken from the slot's cache */
	enum srv_finish finish;
	int err_status;              /* HTTP status of an error */
	char err[320];
	struct srv_req *next;        /* waiting queue */
};

#endif
