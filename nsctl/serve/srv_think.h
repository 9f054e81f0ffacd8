/* srv_think.h - splits a reply that opens with a <think> block (Qwen3's thinking, DeepSeek's)
 * into reasoning and answer, as llama-server's reasoning_content does, over streamed text.
 *
 *   "<think>\nLet me see.\n</think>\n\nParis."  ->  reasoning "Let me see.", answer "Paris."
 *
 * Only a block that opens the reply (after whitespace) is thinking; a reply without one is all
 * answer. Whitespace right after <think>, before </think> and right after </think> is the
 * template's layout and dropped. A marker split across pieces ("<thi" + "nk>") is held until
 * it is complete, and so is whitespace that may turn out to end the thinking. A reply cut off
 * inside the block leaves everything in reasoning.
 *
 * Not thread-safe; one per stream. Zero-initialised state is the start of a reply. */
#ifndef NSCTL_SRV_THINK_H
#define NSCTL_SRV_THINK_H

#include "run_report.h"

enum srv_think_state {
	SRV_THINK_LEAD = 0, /* nothing but whitespace yet */
	SRV_THINK_IN,       /* inside <think> */
	SRV_THINK_GAP,      /* after </think>, whitespace dropped until the answer starts */
	SRV_THINK_ANSWER,   /* the rest is answer */
};

struct srv_think {
	enum srv_think_state state;
	struct ns_text held;   /* text whose place is not known yet */
	bool in_started;       /* reasoning text seen (leading whitespace dropped) */
};

/* Add text; reasoning and answer text now final are appended to the two buffers. Returns 0 or
 * -ENOMEM. */
int srv_think_feed(struct srv_think *t, const char *text, size_t len, struct ns_text *reasoning,
		   struct ns_text *answer);
/* End of the reply: held text goes where its state says (whitespace held before </think> is
 * reasoning's trailing layout and dropped). */
int srv_think_finish(struct srv_think *t, struct ns_text *reasoning, struct ns_text *answer);
void srv_think_free(struct srv_think *t);

#endif
