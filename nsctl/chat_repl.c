/* chat_repl.c - nsctl run --chat's loop (chat_repl.h). */
#include "chat_repl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "chat_file.h"
#include "line_input.h"
#include "ns_util.h"
#include "run_report.h"

#define S_WHO "nsctl run"

static bool s_family(struct ns_engine *e, const char *name)
{
	const char *f = ns_engine_chat_template(e);

	return f && !strcmp(f, name);
}

bool run_is_harmony(struct ns_engine *e)
{
	return s_family(e, "gptoss");
}

bool run_prompt_templated(struct ns_engine *e)
{
	return s_family(e, "gptoss") || s_family(e, "qwen35");
}

bool run_splits_reasoning(struct ns_engine *e)
{
	return s_family(e, "gptoss") || s_family(e, "qwen3") || s_family(e, "qwen35");
}

bool run_thinks_on_request(struct ns_engine *e)
{
	return s_family(e, "gemma4") || s_family(e, "qwen35");
}

/* The marker's id when its text is one token, else -1. */
static int32_t s_marker(struct ns_engine *e, const char *text)
{
	int32_t *ids = NULL, id = -1;
	size_t n = 0;

	if (ns_engine_tokenize(e, text, false, &ids, &n) == 0 && n == 1)
		id = ids[0];
	free(ids);
	return id;
}

int run_out_begin(struct ns_engine *e, struct ns_run_out *out, bool templated, bool final_only,
		  FILE *answer)
{
	struct ns_engine_opts eo;
	enum ns_run_split split = NS_RUN_PLAIN;
	int rc;

	ns_engine_get_opts(e, &eo);
	if (templated && s_family(e, "gptoss"))
		split = NS_RUN_HARMONY;
	else if (templated && s_family(e, "qwen3"))
		split = NS_RUN_THINK;
	else if (templated && s_family(e, "qwen35"))
		split = eo.thinking ? NS_RUN_THINK_OPEN : NS_RUN_THINK;
	if ((rc = ns_run_out_begin(out, split, final_only, answer, stderr)) < 0)
		return rc;
	if (split == NS_RUN_THINK || split == NS_RUN_THINK_OPEN)
		ns_run_out_markers(out, s_marker(e, "<think>"), s_marker(e, "</think>"));
	return 0;
}

int run_show_prompt(struct ns_engine *e, const struct ns_engine_msg *m, size_t n)
{
	char *text = NULL;
	int rc = ns_engine_chat_prompt(e, m, n, &text);

	if (rc == 0)
		fprintf(stderr, "%s\n", text);
	free(text);
	return rc;
}

void run_out_end(struct ns_engine *e, struct ns_run_out *out, int32_t n_predict, int rc)
{
	struct ns_engine_stats st = { 0 };

	if (rc == 0)
		ns_engine_stats(e, &st);
	ns_run_out_end(out, st.stop_reason, n_predict);
}

/* A template file's text (at most 1 MiB; templates are a few KiB): malloc'd, NULL on failure. */
static char *s_read_text(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 1 << 20;
	char *t = f ? malloc(cap + 1) : NULL;

	if (t) {
		*len = fread(t, 1, cap + 1, f);
		if (ferror(f) || *len > cap) {
			free(t);
			t = NULL;
		} else {
			t[*len] = 0;
		}
	}
	if (f)
		fclose(f);
	return t;
}

int chat_template_arg(const char *who, const char *arg, const char **family)
{
	enum ns_chat_family f = ns_chat_family_from_name(arg);
	size_t len = 0;
	char *text;

	if (f != NS_CHAT_UNKNOWN) {
		*family = ns_chat_family_name(f);
		return 0;
	}
	text = s_read_text(arg, &len);
	if (!text) {
		fprintf(stderr, "%s: --chat-template %s: neither a family name (chatml, llama2, "
			"llama3, mistral-v7, phi3, qwen3, ...; see README) nor a file we can read\n",
			who, arg);
		return -EINVAL;
	}
	/* a file's text, trailing newline of an editor kept out of a bare family name */
	while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' '))
		text[--len] = 0;
	f = strlen(text) == len ? ns_chat_family_detect(text) : NS_CHAT_UNKNOWN;
	free(text);
	if (f == NS_CHAT_UNKNOWN) {
		fprintf(stderr, "%s: --chat-template %s: a template of no family we know (we do not "
			"run Jinja; the family is recognised from the text)\n", who, arg);
		return -EINVAL;
	}
	*family = ns_chat_family_name(f);
	return 0;
}

/* The conversation's images (/image, --image), in the order of their marks in the log: the
 * first n_conv are in sent user messages, the rest open the next one. */
struct s_images {
	char *path[NS_ENGINE_MAX_IMAGES];
	uint32_t n, n_conv;
};

static void s_images_clear(struct s_images *im)
{
	for (uint32_t i = 0; i < im->n; i++)
		free(im->path[i]);
	im->n = im->n_conv = 0;
}

/* /image FILE: checked from its header with those before it (ns_engine_set_images: a file
 * the engine refuses, too many tokens for the context) and kept for the next turn. 0, or
 * -ENOMEM; a refusal is one line on stderr and the conversation goes on. */
static int s_image_add(struct ns_engine *e, struct s_images *im, const char *path)
{
	uint32_t tok;
	int rc;

	if (ns_engine_image_token(e) < 0) {
		fprintf(stderr, S_WHO ": /image: no vision tower (start nsctl run with --mmproj FILE, "
			"or with a mmproj*.gguf beside the model that fits it)\n");
		return 0;
	}
	if (im->n >= NS_ENGINE_MAX_IMAGES) {
		fprintf(stderr, S_WHO ": /image %s: at most %d images in a conversation (/reset)\n",
			path, NS_ENGINE_MAX_IMAGES);
		return 0;
	}
	if (!(im->path[im->n] = strdup(path)))
		return -ENOMEM;
	rc = ns_engine_set_images(e, (const char *const *)im->path, im->n + 1);
	tok = rc == 0 ? ns_engine_image_tokens(e, im->n) : 0;
	ns_engine_set_images(e, NULL, 0);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0) {
		fprintf(stderr, S_WHO ": /image %s: %s (not attached)\n", path, ns_engine_error(e));
		free(im->path[im->n]);
		return 0;
	}
	im->n++;
	fprintf(stderr, "(image %s attached to your next message: %u tokens)\n", path, tok);
	return 0;
}

/* The user's text opened by the marks of the images attached to it: malloc'd, NULL when out
 * of memory. */
static char *s_with_marks(const char *text, uint32_t n_marks)
{
	const size_t mark = strlen(NS_ENGINE_IMAGE_MARK);
	char *s = malloc(n_marks * mark + strlen(text) + 1);

	if (!s)
		return NULL;
	for (uint32_t i = 0; i < n_marks; i++)
		memcpy(s + i * mark, NS_ENGINE_IMAGE_MARK, mark);
	strcpy(s + n_marks * mark, text);
	return s;
}

/* ns_run_out_piece, ended early when Ctrl-C asked to stop this reply. */
struct s_reply {
	struct ns_run_out out;
	volatile sig_atomic_t *stop;
};

static int s_piece(const char *piece, size_t len, int32_t id, void *user)
{
	struct s_reply *r = user;

	if (*r->stop)
		return 1;
	return ns_run_out_piece(piece, len, id, &r->out);
}

/* One turn: the user's text added, the reply streamed and added. */
static int s_turn(struct ns_engine *e, const struct chat_repl_opts *o, struct ns_chat_log *log,
		  struct s_images *im, const char *text)
{
	struct s_reply r = { .stop = o->stop_reply };
	char *marked = im->n > im->n_conv ? s_with_marks(text, im->n - im->n_conv) : NULL;
	int rc = im->n > im->n_conv && !marked ? -ENOMEM :
		 ns_chat_log_add(log, "user", marked ? marked : text);

	free(marked);
	if (rc == 0)
		im->n_conv = im->n;
	if (rc == 0 && o->print_prompt)
		rc = run_show_prompt(e, log->msgs, log->n);
	/* the whole conversation with its images, from the start (nscompute runs a prompt with
	 * images from an empty context) */
	if (rc == 0 && im->n)
		rc = ns_engine_set_images(e, (const char *const *)im->path, im->n);
	if (rc < 0 || (rc = run_out_begin(e, &r.out, true, o->final_only, stdout)) < 0)
		return rc;
	*o->stop_reply = 0;
	*o->replying = 1;
	rc = ns_engine_chat(e, log->msgs, log->n, o->g, s_piece, &r);
	*o->replying = 0;
	run_out_end(e, &r.out, o->g->n_predict, rc);
	if (rc == 0 && *o->stop_reply)
		fprintf(stderr, "(reply stopped)\n");
	*o->stop_reply = 0;
	/* the history keeps what stdout got: for harmony the final channel only, for Qwen the
	 * answer after the think block (the templates drop earlier turns' reasoning); a stopped
	 * reply as far as it went */
	if (rc == 0)
		rc = ns_chat_log_add(log, "assistant", r.out.content.buf ? r.out.content.buf : "");
	if (rc == 0)
		ns_run_report(e, o->json, &r.out.content,
			      r.out.split != NS_RUN_PLAIN ? &r.out.reasoning : NULL, stderr);
	ns_run_out_free(&r.out);
	return rc;
}

static int s_reset(struct ns_engine *e, const struct chat_repl_opts *o, struct ns_chat_log *log,
		   struct s_images *im)
{
	s_images_clear(im);
	ns_chat_log_clear(log);
	ns_engine_reset(e);
	return o->system ? ns_chat_log_add(log, "system", o->system) : 0;
}

/* The argument of "/cmd ARG" (NULL when line is not that command). */
static const char *s_cmd(const char *line, const char *cmd)
{
	size_t n = strlen(cmd);

	if (strncmp(line, cmd, n) || (line[n] && line[n] != ' '))
		return NULL;
	line += n;
	while (*line == ' ')
		line++;
	return line;
}

/* A line starting with '/': 1 to quit, 0 to go on, < 0 to fail (out of memory). */
static int s_command(struct ns_engine *e, const struct chat_repl_opts *o,
		     struct ns_chat_log *log, struct s_images *im, const char *line)
{
	char err[512];
	const char *arg;

	if (s_cmd(line, "/quit") || s_cmd(line, "/exit"))
		return 1;
	if (s_cmd(line, "/reset")) {
		if (s_reset(e, o, log, im) < 0)
			return -ENOMEM;
		fprintf(stderr, "(conversation reset)\n");
	} else if ((arg = s_cmd(line, "/image")) && *arg) {
		return s_image_add(e, im, arg);
	} else if ((arg = s_cmd(line, "/save")) && *arg) {
		if (im->n) /* the file holds text: the marks would lose their images */
			fprintf(stderr, S_WHO ": /save: a conversation with images is not saved (its "
				"file holds text only)\n");
		else if (chat_file_save(arg, log, err, sizeof(err)) < 0)
			fprintf(stderr, S_WHO ": /save: %s\n", err);
		else
			fprintf(stderr, "(%zu messages saved to %s)\n", log->n, arg);
	} else if ((arg = s_cmd(line, "/load")) && *arg) {
		if (chat_file_load(arg, log, err, sizeof(err)) < 0) {
			fprintf(stderr, S_WHO ": /load: %s (conversation unchanged)\n", err);
		} else {
			s_images_clear(im); /* the loaded conversation has none */
			ns_engine_reset(e); /* the next turn evaluates the loaded conversation */
			fprintf(stderr, "(%zu messages loaded from %s)\n", log->n, arg);
		}
	} else if (s_cmd(line, "/help")) {
		fprintf(stderr, "/reset  forget the conversation\n/save FILE  write it as JSON "
			"messages\n/load FILE  continue one saved\n/image FILE  an image in your "
			"next message (with a vision tower: --mmproj)\n/quit  end (Ctrl-D too)\n"
			"A line ending in \\ continues; \"\"\" opens and closes a block of lines. "
			"Ctrl-C stops a reply.\n");
	} else {
		fprintf(stderr, "(unknown command %s; /help lists them)\n", line);
	}
	return 0;
}

int chat_repl(struct ns_engine *e, const struct chat_repl_opts *o)
{
	struct ns_chat_log log = { 0 };
	struct s_images im = { 0 };
	struct line_input li;
	char *text = NULL;
	int rc;

	if ((rc = line_input_open(&li, o->interrupted)) < 0)
		return rc;
	if (li.tty)
		fprintf(stderr, "(/help: commands; Ctrl-D or /quit ends)\n");
	if (o->system && (rc = ns_chat_log_add(&log, "system", o->system)) < 0)
		goto out;
	for (uint32_t i = 0; i < o->n_images && i < NS_ENGINE_MAX_IMAGES; i++) {
		if (!(im.path[i] = strdup(o->images[i]))) {
			rc = -ENOMEM;
			goto out;
		}
		im.n = i + 1;
	}
	for (;;) {
		rc = line_input_read(&li, &text);
		if (*o->interrupted) {
			rc = -ECANCELED;
			break;
		}
		if (rc <= 0)
			break;
		rc = 0; /* an empty turn is skipped */
		if (text[0] == '/')
			rc = s_command(e, o, &log, &im, text);
		else if (text[0])
			rc = s_turn(e, o, &log, &im, text);
		free(text);
		text = NULL;
		if (rc) {
			rc = rc > 0 ? 0 : rc;
			break;
		}
	}
out:
	free(text);
	line_input_close(&li);
	ns_chat_log_clear(&log);
	s_images_clear(&im);
	return rc;
}
