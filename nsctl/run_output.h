/* run_output.h - where nsctl run puts one reply's generated text.
 *
 * Plain models: every piece to out as it arrives. Harmony models (gpt-oss chat template): the
 * stream goes through the channel parser (modelfile/tokenizer/harmony.h); the final channel
 * and text outside the format go to out (the answer: stdout), the analysis and commentary
 * channels to err as one "[analysis] ..." block per message ending with a newline (none with
 * final_only). Both texts are kept for --json and the chat history. */
#ifndef NSCTL_RUN_OUTPUT_H
#define NSCTL_RUN_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harmony.h"
#include "run_report.h"

struct ns_run_out {
	FILE *out, *err;          /* not owned; out NULL: the answer is only kept (--json) */
	bool out_closed;          /* a write to out failed (EPIPE): generation was stopped */
	struct ns_harmony *h;     /* NULL: plain text; owned */
	bool final_only;
	bool block_open;          /* a "[channel] " block on err awaits its newline */
	unsigned block_msg;       /* the message that block shows */
	unsigned reasoning_msg;   /* the message of the last reasoning text */
	enum ns_harmony_channel reasoning_ch; /* and its channel */
	bool final_seen;          /* any text on the final channel */
	struct ns_text content;   /* what out got */
	struct ns_text reasoning; /* analysis + commentary, messages separated by '\n' */
};

/* harmony: the prompt ended with the template's "<|start|>assistant". Returns 0 or -ENOMEM. */
int ns_run_out_begin(struct ns_run_out *o, bool harmony, bool final_only, FILE *out, FILE *err);
/* An ns_token_fn (user: the ns_run_out): non-zero when out is closed (a write or its flush
 * failed: out_closed) or memory ran out. */
int ns_run_out_piece(const char *piece, size_t len, int32_t id, void *user);
/* End of the reply: flush the parser, end the lines. When the generation stopped by length
 * (stop_reason 1: "-n N reached inside the analysis channel; ...") or a full context (3)
 * after analysis or commentary text but before any final-channel text, or before any text
 * at all, one line on err says so. */
void ns_run_out_end(struct ns_run_out *o, uint32_t stop_reason, int32_t n_predict);
void ns_run_out_free(struct ns_run_out *o);

#endif
