/* run_output.h - where nsctl run puts one reply's generated text.
 *
 * The answer goes to out (stdout), the model's reasoning to err (stderr), as the reply's
 * format divides them (enum ns_run_split):
 *   PLAIN       every piece to out as it arrives.
 *   HARMONY     gpt-oss chat template: the stream goes through the channel parser
 *               (modelfile/tokenizer/harmony.h); the final channel and text outside the
 *               format to out, the analysis and commentary channels to err as one
 *               "[analysis] ..." block per message ending with a newline.
 *   THINK       Qwen3, Qwen3.5 not thinking: a <think> block opening the reply is reasoning,
 *               shown on err as one "[thinking] ..." block (serve/srv_think.h splits it).
 *   THINK_OPEN  Qwen3.5 thinking: the prompt opened the block; reasoning until </think>.
 * With final_only nothing goes to err. Both texts are kept for --json and the history. */
#ifndef NSCTL_RUN_OUTPUT_H
#define NSCTL_RUN_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harmony.h"
#include "run_report.h"
#include "srv_think.h"

enum ns_run_split {
	NS_RUN_PLAIN = 0,
	NS_RUN_HARMONY,
	NS_RUN_THINK,
	NS_RUN_THINK_OPEN,
};

struct ns_run_out {
	FILE *out, *err;          /* not owned; out NULL: the answer is only kept (--json) */
	bool out_closed;          /* a write to out failed (EPIPE): generation was stopped */
	enum ns_run_split split;
	struct ns_harmony *h;     /* NS_RUN_HARMONY; owned */
	struct srv_think think;   /* NS_RUN_THINK*; owned */
	int32_t think_marker[2];  /* ids of "<think>", "</think>" when each is one token (a
				   * CONTROL one decodes to nothing: its text is fed), else -1 */
	bool final_only;
	bool block_open;          /* a "[channel] " block on err awaits its newline */
	unsigned block_msg;       /* the message that block shows */
	unsigned reasoning_msg;   /* the message of the last reasoning text */
	enum ns_harmony_channel reasoning_ch; /* and its channel */
	bool final_seen;          /* any text on the final channel */
	struct ns_text content;   /* what out got */
	struct ns_text reasoning; /* analysis + commentary, messages separated by '\n' */
};

/* HARMONY: the prompt ended with the template's "<|start|>assistant". The think markers
 * start as -1 (ns_run_out_markers). Returns 0 or -ENOMEM. */
int ns_run_out_begin(struct ns_run_out *o, enum ns_run_split split, bool final_only, FILE *out,
		     FILE *err);
/* The ids of the "<think>" and "</think>" tokens (-1: not one token). */
void ns_run_out_markers(struct ns_run_out *o, int32_t open, int32_t close);
/* An ns_token_fn (user: the ns_run_out): non-zero when out is closed (a write or its flush
 * failed: out_closed) or memory ran out. */
int ns_run_out_piece(const char *piece, size_t len, int32_t id, void *user);
/* End of the reply: flush the parser, end the lines. When the generation stopped by length
 * (stop_reason 1: "-n N reached inside the analysis channel; ...") or a full context (3)
 * after analysis or commentary text but before any final-channel text, or before any text
 * at all, or inside the think block, one line on err says so. */
void ns_run_out_end(struct ns_run_out *o, uint32_t stop_reason, int32_t n_predict);
void ns_run_out_free(struct ns_run_out *o);

#endif
