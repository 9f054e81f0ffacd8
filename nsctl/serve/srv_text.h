/* srv_text.h - the text of one generated reply, token by token: detokenized (whole UTF-8
 * characters), split into reasoning and answer by the model's format, the answer cut at the
 * request's stop strings.
 *
 *   SRV_SPLIT_NONE     everything is answer (completions; a chat model without thinking)
 *   SRV_SPLIT_HARMONY  gpt-oss: the final channel (and text outside messages) is the answer,
 *                      analysis and commentary are reasoning, messages joined by '\n' (as
 *                      nsctl run shows them; modelfile/tokenizer/harmony.h)
 *   SRV_SPLIT_THINK    a leading <think> block is reasoning (srv_think.h)
 *   SRV_SPLIT_THINK_OPEN  the prompt opened the block: the reply is reasoning until </think>
 *
 * Stop strings apply to the answer only (what a client shows as the reply).
 *
 * Lifecycle: srv_text_new / srv_text_free. Not thread-safe; one per reply. */
#ifndef NSCTL_SRV_TEXT_H
#define NSCTL_SRV_TEXT_H

#include <stdint.h>

#include "harmony.h"
#include "run_report.h"
#include "srv_stop.h"
#include "srv_think.h"

struct ns_tok;
struct ns_detok;

enum srv_split {
	SRV_SPLIT_NONE = 0,
	SRV_SPLIT_HARMONY,
	SRV_SPLIT_THINK,
	SRV_SPLIT_THINK_OPEN, /* the prompt opened the block (Qwen3.5 thinking): reasoning until
			       * </think>; srv_text_init makes it SRV_SPLIT_THINK inside the block */
};

struct srv_text {
	const struct ns_tok *tok;     /* borrowed */
	struct ns_detok *dt;
	enum srv_split split;
	struct ns_harmony *h;         /* SRV_SPLIT_HARMONY */
	struct srv_think think;       /* SRV_SPLIT_THINK */
	int32_t think_open, think_close; /* ids of "<think>" / "</think>", -1 if none: a
					  * vocabulary may type them CONTROL, which the
					  * detokenizer does not render */
	unsigned reasoning_msg;       /* harmony: message of the last reasoning text */
	bool reasoning_any;           /* harmony: reasoning text given out (the caller may
					* have emptied its buffer since) */
	struct srv_stop stop;
	/* outputs of the current call, borrowed from the caller */
	struct ns_text *reasoning, *answer;
};

/* Returns 0, -ENOMEM. */
int srv_text_init(struct srv_text *t, const struct ns_tok *tok, enum srv_split split,
		  const char *const *stop, size_t n_stop);
void srv_text_free(struct srv_text *t);

/* One generated token (an end-of-generation token is not text: do not feed it). The text now
 * final is appended to reasoning and answer. Returns 1 when a stop string ended the answer
 * (generation should end), 0, or a negative errno. */
int srv_text_token(struct srv_text *t, int32_t id, struct ns_text *reasoning,
		   struct ns_text *answer);
/* End of the reply: whatever was held back. Returns 0 or -ENOMEM. */
int srv_text_finish(struct srv_text *t, struct ns_text *reasoning, struct ns_text *answer);

#endif
