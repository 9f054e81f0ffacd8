/* run_report.h - helpers of nsctl run: the summary line / JSON, a growable text buffer, the
 * chat message log. */
#ifndef NSCTL_RUN_REPORT_H
#define NSCTL_RUN_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "neurostream.h"

/* A NUL-terminated growable string; buf is malloc'd (free it), NULL while empty. */
struct ns_text {
	char *buf;
	size_t len, cap;
};

/* The last call's figures as one line (or one JSON object with json) on f. The JSON object
 * also carries the generated text: "content" (what went to stdout; content may be NULL: left
 * out) and "reasoning" (a harmony model's analysis and commentary channels; NULL: left out,
 * the model's output has no channels). */
void ns_run_report(const struct ns_engine *e, bool json, const struct ns_text *content,
		   const struct ns_text *reasoning, FILE *f);
int ns_text_append(struct ns_text *t, const char *s, size_t n);

/* ns_engine_stats' stop_reason as --json writes it: "none" (the prompt only), "length" (-n
 * reached), "eos" (an end-of-generation token), "context" (the context is full), "stop" (the
 * caller stopped it: stdout closed, Ctrl-C), "unknown" past those. */
const char *ns_stop_reason_name(uint32_t reason);

/* Messages with owned copies of role and content. */
struct ns_chat_log {
	struct ns_engine_msg *msgs;
	size_t n, cap;
};
int ns_chat_log_add(struct ns_chat_log *l, const char *role, const char *content);
void ns_chat_log_clear(struct ns_chat_log *l);

#endif
