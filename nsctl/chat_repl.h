/* chat_repl.h - nsctl run --chat: the conversation loop (turns from line_input.h, commands,
 * replies streamed through run_output.h), and --chat-template's NAME|FILE. */
#ifndef NSCTL_CHAT_REPL_H
#define NSCTL_CHAT_REPL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "neurostream.h"
#include "run_output.h"

struct chat_repl_opts {
	const char *system;  /* --system: the first message, again after /reset */
	bool print_prompt, final_only, json;
	const struct ns_gen_params *g;
	/* --image: attached to the first user turn as /image attaches them (needs a tower) */
	const char *const *images;
	uint32_t n_images;
	/* Signals (cmd_run.c's handler): while *replying is set a first SIGINT sets *stop_reply
	 * (that reply ends, the session goes on) instead of *interrupted (the session ends). */
	volatile sig_atomic_t *replying, *stop_reply, *interrupted;
};

/* Commands: /quit (also Ctrl-D, end of input), /reset, /save FILE, /load FILE, /image FILE
 * (with a vision tower: the image opens the next user message, as Qwen-VL's chat template
 * places image parts; a conversation with images is evaluated anew at each turn, its images
 * through the tower again), /help. Returns
 * 0 at the end of input or /quit, a negative errno when the engine fails (ns_engine_error) or
 * -ECANCELED when *interrupted was set. */
int chat_repl(struct ns_engine *e, const struct chat_repl_opts *o);

/* --chat-template NAME|FILE: a family name (chat.h), or a file whose text (a Jinja template,
 * or a family name) is recognised as the GGUF's tokenizer.chat_template is. *family: the
 * family's name (static). 0, or -EINVAL after one line on stderr starting with who. */
int chat_template_arg(const char *who, const char *arg, const char **family);

/* nsctl run's pieces shared with its -p path: the model's template is harmony (gpt-oss); -p
 * goes through the template (harmony, Qwen3.5: chat models whose raw completion is not what
 * a prompt means); the replies carry reasoning (harmony, Qwen3, Qwen3.5:
 * --final-only); the template thinks only when asked (--thinking: Gemma 4, Qwen3.5); one
 * reply's output begun as its format divides it (templated: the prompt was rendered with
 * the template; run_output.h), answer on `answer` (NULL: kept only), reasoning on stderr;
 * the rendered conversation on stderr (--print-prompt); the end of one reply (the -n line
 * needs the call's stop reason). */
bool run_is_harmony(struct ns_engine *e);
bool run_prompt_templated(struct ns_engine *e);
bool run_splits_reasoning(struct ns_engine *e);
bool run_thinks_on_request(struct ns_engine *e);
int run_out_begin(struct ns_engine *e, struct ns_run_out *out, bool templated, bool final_only,
		  FILE *answer);
int run_show_prompt(struct ns_engine *e, const struct ns_engine_msg *m, size_t n);
void run_out_end(struct ns_engine *e, struct ns_run_out *out, int32_t n_predict, int rc);

#endif
