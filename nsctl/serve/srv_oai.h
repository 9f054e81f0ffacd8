/* srv_oai.h - the OpenAI API's JSON: requests of /v1/chat/completions and /v1/completions
 * parsed and checked into srv_params (the prompt rendered with the model's chat template and
 * tokenized), and the responses, stream chunks and error objects built back.
 *
 * Requests are checked as OpenAI checks them: an unknown field, a wrong type, a value out of
 * range, a model name that is not ours is refused with OpenAI's error object
 *   {"error": {"message": ..., "type": "invalid_request_error", "param": ..., "code": ...}}
 * and its status (400; 404 for an unknown model). Fields OpenAI has that we do not implement
 * (tools, n > 1, echo, suffix, response formats other than text, images) are refused by
 * name rather than ignored. Extensions llama-server also takes: top_k, min_p,
 * repeat_penalty, repeat_last_n, ignore_eos, chat_template_kwargs.enable_thinking.
 * Defaults are nsctl run's (llama.cpp's): temperature 0.8, top_k 40, top_p 0.95, min_p 0.05,
 * penalties off over the last 64 tokens; a request without a seed gets a random one; no
 * max_tokens: until an end-of-generation token or the full context. */
#ifndef NSCTL_SRV_OAI_H
#define NSCTL_SRV_OAI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat.h"
#include "srv_req.h"
#include "srv_sched.h"

struct ns_tok;

/* What parsing and responses need of the model being served. */
struct srv_model_info {
	const char *id;               /* the name /v1/models lists and requests must use */
	const struct ns_tok *tok;
	enum ns_chat_family fam;      /* NS_CHAT_UNKNOWN: /v1/chat/completions is refused */
	const char *reasoning_effort; /* harmony default ("low", "medium", "high"), or NULL */
	uint32_t n_ctx, n_vocab;
	uint64_t created;             /* the model file's time, /v1/models' "created" */
};

struct srv_error {
	int status;                   /* HTTP status */
	const char *type;             /* "invalid_request_error", "server_error", ... */
	const char *code;             /* or NULL */
	char param[64];               /* "" when no parameter is at fault */
	char message[480];
};

/* Fill e (printf-style message). Returns -1 (for `return srv_err(...)`). */
int srv_err(struct srv_error *e, int status, const char *type, const char *code,
	    const char *param, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* Parse a request body. Returns 0 with p filled (the caller frees it with srv_params_free,
 * also after an error), or -1 with e filled. */
int srv_oai_parse(const struct srv_model_info *mi, enum srv_kind kind, const char *body,
		  size_t len, struct srv_params *p, struct srv_error *e);

/* {"error": {...}}. NULL when out of memory. */
json_t *srv_oai_error(const struct srv_error *e);

/* The response of one request. */
struct srv_resp {
	const struct srv_model_info *mi;
	enum srv_kind kind;
	const char *model;            /* as the client named it */
	char id[48];                  /* "chatcmpl-..." / "cmpl-..." */
	uint64_t created;
	bool logprobs;
	uint32_t top_logprobs;
	uint32_t n_prompt;
	uint64_t text_offset;         /* completions' logprobs: bytes streamed before */
};

/* id and created for a new response. */
void srv_resp_init(struct srv_resp *r, const struct srv_model_info *mi, enum srv_kind kind,
		   const struct srv_params *p);

/* The whole response (stream false) from everything taken (t done). */
json_t *srv_oai_full(const struct srv_resp *r, const struct srv_take *t);
/* A stream chunk with what t holds now (text, logprobs); role: the first chunk of a chat
 * stream (delta.role); finish: its finish_reason (the last chunk) or NULL. */
json_t *srv_oai_chunk(struct srv_resp *r, const struct srv_take *t, bool role,
		      const char *finish);
/* The stream's last chunk with stream_options.include_usage: no choices, the usage. */
json_t *srv_oai_usage_chunk(const struct srv_resp *r, const struct srv_take *t);
/* "stop", "length", or NULL while not finished. */
const char *srv_finish_name(enum srv_finish f);

/* GET /v1/models. */
json_t *srv_oai_models(const struct srv_model_info *mi);

#endif
