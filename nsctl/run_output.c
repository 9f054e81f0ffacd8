/* run_output.c - see run_output.h. */
#include "run_output.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int ns_run_out_begin(struct ns_run_out *o, enum ns_run_split split, bool final_only, FILE *out,
		     FILE *err)
{
	memset(o, 0, sizeof(*o));
	o->out = out;
	o->err = err;
	o->final_only = final_only;
	o->split = split;
	o->think_marker[0] = o->think_marker[1] = -1;
	if (split == NS_RUN_THINK_OPEN)
		o->think.state = SRV_THINK_IN;
	/* the template ends the prompt with "<|start|>assistant": a header comes first */
	if (split == NS_RUN_HARMONY && !(o->h = ns_harmony_new(true)))
		return -ENOMEM;
	return 0;
}

void ns_run_out_markers(struct ns_run_out *o, int32_t open, int32_t close)
{
	o->think_marker[0] = open;
	o->think_marker[1] = close;
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

/* Text the think splitter made final: reasoning to err as one "[thinking] " block, answer to
 * out. Non-zero stops the generation (out closed, no memory). */
static int s_think_out(struct ns_run_out *o, const struct ns_text *r, const struct ns_text *a)
{
	if (r->len) {
		if (ns_text_append(&o->reasoning, r->buf, r->len) < 0)
			return 1;
		if (!o->final_only) {
			if (!o->block_open)
				fputs("[thinking] ", o->err);
			o->block_open = true;
			fwrite(r->buf, 1, r->len, o->err);
			fflush(o->err);
		}
	}
	if (a->len) {
		s_block_close(o);
		if (s_write(o, a->buf, a->len) < 0)
			return 1; /* stdout closed: stop */
		return ns_text_append(&o->content, a->buf, a->len) < 0;
	}
	return 0;
}

static int s_think_piece(struct ns_run_out *o, const char *piece, size_t len, int32_t id)
{
	static const char *const marker[2] = { "<think>", "</think>" };
	struct ns_text r = { 0 }, a = { 0 };
	int rc;

	for (int k = 0; k < 2 && !len; k++) /* a CONTROL marker decodes to nothing */
		if (id >= 0 && id == o->think_marker[k]) {
			piece = marker[k];
			len = strlen(piece);
		}
	rc = srv_think_feed(&o->think, piece, len, &r, &a) < 0 ? 1 : s_think_out(o, &r, &a);
	free(r.buf);
	free(a.buf);
	return rc;
}

int ns_run_out_piece(const char *piece, size_t len, int32_t id, void *user)
{
	struct ns_run_out *o = user;

	if (o->h)
		return ns_harmony_feed(o->h, piece, len, s_on_channel, o) != 0;
	if (o->split == NS_RUN_THINK || o->split == NS_RUN_THINK_OPEN)
		return s_think_piece(o, piece, len, id);
	if (s_write(o, piece, len) < 0)
		return 1; /* stdout closed: stop */
	return ns_text_append(&o->content, piece, len) < 0;
}

void ns_run_out_end(struct ns_run_out *o, uint32_t stop_reason, int32_t n_predict)
{
	const char *where, *name;
	bool in_think = o->think.state == SRV_THINK_IN && (o->split == NS_RUN_THINK ||
							 o->split == NS_RUN_THINK_OPEN);

	if (o->h)
		ns_harmony_finish(o->h, s_on_channel, o);
	if (o->split == NS_RUN_THINK || o->split == NS_RUN_THINK_OPEN) {
		struct ns_text r = { 0 }, a = { 0 };

		if (srv_think_finish(&o->think, &r, &a) == 0)
			s_think_out(o, &r, &a);
		free(r.buf);
		free(a.buf);
	}
	s_block_close(o);
	s_write(o, "\n", 1);
	if (in_think && !o->content.len && (stop_reason == 1 || stop_reason == 3)) {
		if (stop_reason == 1)
			fprintf(o->err, "nsctl run: -n %d reached inside the thinking; no answer yet "
				"(raise -n, or leave out --thinking)\n", (int)n_predict);
		else
			fprintf(o->err, "nsctl run: the context filled up inside the thinking; no "
				"answer (raise -c)\n");
		fflush(o->err);
		return;
	}
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
	srv_think_free(&o->think);
	free(o->content.buf);
	free(o->reasoning.buf);
	memset(o, 0, sizeof(*o));
}
