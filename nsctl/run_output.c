/* run_output.c - see run_output.h. */
#include "run_output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ns_run_out_begin(struct ns_run_out *o, bool harmony, bool final_only, FILE *out, FILE *err)
{
	memset(o, 0, sizeof(*o));
	o->out = out;
	o->err = err;
	o->final_only = final_only;
	/* the template ends the prompt with "<|start|>assistant": a header comes first */
	if (harmony && !(o->h = ns_harmony_new(true)))
		return -ENOMEM;
	return 0;
}

/* The answer's text to out as it comes (nowhere when out is NULL: --json keeps it for the
 * object). A failed write or flush (EPIPE: the reader of stdout went away) is -EPIPE, noted
 * in out_closed; the stream buffer would otherwise hide it until the end. */
static int s_write(struct ns_run_out *o, const char *text, size_t len)
{
	if (!o->out)
		return 0;
	if (o->out_closed || (len && fwrite(text, 1, len, o->out) != len) || fflush(o->out)) {
		o->out_closed = true;
		return -EPIPE;
	}
	return 0;
}

static void s_block_close(struct ns_run_out *o)
{
	if (o->block_open)
		fputc('\n', o->err);
	o->block_open = false;
}

static int s_on_channel(enum ns_harmony_channel ch, const char *text, size_t len, void *user)
{
	struct ns_run_out *o = user;
	unsigned msg = ns_harmony_n_messages(o->h);

	if (ch == NS_HARMONY_FINAL || ch == NS_HARMONY_NONE) {
		s_block_close(o);
		o->final_seen |= ch == NS_HARMONY_FINAL;
		if (s_write(o, text, len) < 0)
			return 1; /* stdout closed: stop */
		return ns_text_append(&o->content, text, len) < 0;
	}
	if ((o->reasoning.len && msg != o->reasoning_msg &&
	     ns_text_append(&o->reasoning, "\n", 1) < 0) ||
	    ns_text_append(&o->reasoning, text, len) < 0)
		return 1;
	o->reasoning_msg = msg;
	o->reasoning_ch = ch;
	if (o->final_only)
		return 0;
	if (!o->block_open || o->block_msg != msg) {
		s_block_close(o);
		fprintf(o->err, "[%s] ", ns_harmony_channel_name(ch));
		o->block_open = true;
		o->block_msg = msg;
	}
	fwrite(text, 1, len, o->err);
	fflush(o->err);
	return 0;
}

int ns_run_out_piece(const char *piece, size_t len, int32_t id, void *user)
{
	struct ns_run_out *o = user;

	(void)id;
	if (o->h)
		return ns_harmony_feed(o->h, piece, len, s_on_channel, o) != 0;
	if (s_write(o, piece, len) < 0)
		return 1; /* stdout closed: stop */
	return ns_text_append(&o->content, piece, len) < 0;
}

void ns_run_out_end(struct ns_run_out *o, uint32_t stop_reason, int32_t n_predict)
{
	const char *where, *name;

	if (o->h)
		ns_harmony_finish(o->h, s_on_channel, o);
	s_block_close(o);
	s_write(o, "\n", 1);
	if (!o->h || o->final_seen || (stop_reason != 1 && stop_reason != 3))
		return;
	if (!o->reasoning.len && !o->content.len) { /* still in the first header */
		if (stop_reason == 1)
			fprintf(o->err, "nsctl run: -n %d reached before any message text; no "
				"answer yet (raise -n)\n", (int)n_predict);
		else
			fprintf(o->err, "nsctl run: the context filled up before any message "
				"text (raise -c)\n");
		fflush(o->err);
		return;
	}
	if (!o->reasoning.len)
		return;
	/* inside: the reasoning message is still open; after: its end (or a later header,
	 * or an empty final message) came */
	where = ns_harmony_in_body(o->h) && ns_harmony_n_messages(o->h) == o->reasoning_msg ?
		"inside" : "after";
	name = ns_harmony_channel_name(o->reasoning_ch);
	if (stop_reason == 1)
		fprintf(o->err, "nsctl run: -n %d reached %s the %s channel; no final answer yet "
			"(raise -n)\n", (int)n_predict, where, name);
	else if (stop_reason == 3)
		fprintf(o->err, "nsctl run: the context filled up %s the %s channel; no final "
			"answer (raise -c)\n", where, name);
	fflush(o->err);
}

void ns_run_out_free(struct ns_run_out *o)
{
	ns_harmony_destroy(&o->h);
	free(o->content.buf);
	free(o->reasoning.buf);
	memset(o, 0, sizeof(*o));
}
