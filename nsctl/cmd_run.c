/* nsctl run MODEL [-p PROMPT | --chat] [-n N] [sampling] [budgets] [--wrap PROC='CMD']
 *
 * Starts the pipeline (nsio, nsplan, nscompute) on a private session through the C API
 * (neurostream.h), streams the generated text to stdout as tokens arrive, and prints a summary
 * line (or --json) on stderr. Ctrl-C / SIGTERM: children stopped, shm and runtime dir removed,
 * exit 130.
 *
 * Harmony and Qwen3.5 (chat models): -p is sent as one user message rendered with the
 * template (--system, --reasoning, --thinking). The generated stream is split by its format
 * (run_output.h): the answer on stdout, harmony's analysis and commentary and a Qwen <think>
 * block on stderr as "[analysis] ..." / "[thinking] ..." blocks (none with --final-only). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "chat.h"
#include "chat_repl.h"
#include "cmd_opt.h"
#include "commands.h"
#include "engine_flags.h"
#include "gguf.h"
#include "hparams.h"
#include "hub.h"
#include "image_args.h"
#include "model.h"
#include "neurostream.h"
#include "ns_progress.h"
#include "ns_util.h"
#include "run_draft.h"
#include "run_output.h"
#include "run_report.h"

static volatile sig_atomic_t s_interrupted; /* SIGINT/SIGTERM seen: the engine's cancel flag */
static volatile sig_atomic_t s_replying;    /* --chat: a reply is streaming */
static volatile sig_atomic_t s_stop_reply;  /* --chat: Ctrl-C asked to end that reply */

/* In a chat reply the first SIGINT ends the reply (chat_repl.c), a second one the session. */
static void s_on_signal(int sig)
{
	if (sig == SIGINT && s_replying && !s_stop_reply)
		s_stop_reply = 1;
	else
		s_interrupted = sig;
}

struct s_opts {
	const char *model, *prompt, *system;
	const char *prompt_file;  /* -f: the prompt is this file's text */
	char *prompt_buf;         /* owned: -f's text or -p's with -e's escapes replaced */
	bool escape;              /* -e: \n \t ... in the prompt */
	bool seed_given;          /* else a random seed, printed */
	bool print_args;          /* print the parsed values and exit (the flag tests) */
	bool quiet;               /* -q: no progress line on a terminal */
	struct ns_progress pf;    /* the prompt's progress line (s_on_progress) */
	struct ns_progress ram;   /* the RAM cache's fill while the load waits for it */
	bool stdout_closed;       /* a write to stdout failed: the run stopped (exit 1) */
	bool chat, json;
	bool final_only, raw, print_prompt; /* harmony display; -p as plain text; show prompt */
	const char *warmup;       /* --warmup: prompt whose expert hits pin experts in RAM */
	char stats_tmp[64];       /* the statistics file we made for --warmup ("" if none) */
	struct nsctl_engine_args ea; /* the pipeline's flags (engine_flags.h) */
	struct ns_gen_params g;
	struct nsctl_images img;  /* --image, --mmproj, ... (image_args.h) */
};

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl run MODEL [-p PROMPT | --chat] [options]   (or -m MODEL)\n"
		"  Streams the generated text to stdout; a summary line goes to stderr. Options\n"
		"  take --opt=value or --opt value; short ones bundle (-n5 -t4); llama.cpp's\n"
		"  names are accepted where the meaning is ours too.\n"
		"generation:\n"
		"  -m, --model FILE      the model (instead of the MODEL argument)\n"
		"  -p, --prompt TEXT     prompt (BOS added as the vocabulary asks); default empty\n"
		"  -f, --file FILE       the prompt is FILE's text\n"
		"  -e, --escape          replace \\n \\r \\t \\' \\\" \\\\ in the prompt\n"
		"  -n, --n-predict, --predict N  tokens to generate at most (-1: until the context\n"
		"                        is full; default 128); also stops at end-of-generation\n"
		"  --ignore-eos          do not stop at end-of-generation tokens\n"
		"  --chat                interactive conversation on stdin with the model's chat\n"
		"                        template: line editing and history on a terminal,\n"
		"                        /reset, /save FILE, /load FILE, /image FILE, /quit\n"
		"                        (README: Chat)\n"
		"  -sys, --system, --system-prompt TEXT  system message for --chat (and for -p\n"
		"                        with a harmony or Qwen3.5 model)\n"
		"reasoning: with the harmony (gpt-oss) or Qwen3.5 chat template -p is sent as a user\n"
		"  message with the template; the answer goes to stdout, the reasoning to stderr:\n"
		"  harmony's analysis and commentary as '[analysis] ...' blocks, a Qwen3/Qwen3.5\n"
		"  <think> block (also in --chat) as '[thinking] ...' (2>/dev/null: the answer only)\n"
		"  --reasoning low|medium|high  harmony: the system message's reasoning effort\n"
		"  --final-only          do not show the reasoning on stderr\n"
		"  --thinking            Gemma 4, Qwen3.5 chat templates: let the model think first\n"
		"                        (off by default; Qwen3 thinks unless told /no_think)\n"
		"  --raw                 send -p as plain text (no template, no channel split)\n"
		"  --print-prompt        print the text the model is given on stderr first\n"
		"sampling (as llama.cpp; --temp 0 is greedy):\n"
		"  --temp T (0.8)  --top-k K (40)  --top-p P (0.95)  --min-p P (0.05)\n"
		"  --repeat-penalty R (1.0)  --repeat-last-n N (64)\n"
		"  -s, --seed S          sampler seed; default (or -1) a random one, printed on\n"
		"                        stderr (\"seed S\") so that -s S repeats the run\n"
		"  --draft ngram         speculative decoding: prompt lookup drafts tokens, one pass\n"
		"                        over the weights verifies them (same greedy output, same\n"
		"                        sampling distribution)\n"
		"  --draft DRAFT.gguf    the same, drafted by a small model of the same vocabulary\n"
		"                        held in RAM (counted in the budgets)\n"
		"  --draft mtp           the same, drafted by the model's own MTP block (Qwen3.5\n"
		"                        checkpoints: qwen35, qwen35moe), held in RAM\n"
		"  --draft-max N --draft-min N  tokens drafted per pass, adaptive in [min, max]\n"
		"                        (defaults 16 and 1)\n"
		"pipeline:\n%s"
		"  --warmup TEXT         MoE: evaluate TEXT first (with the chat template when the\n"
		"                        run uses one), then re-plan so the experts it routed to\n"
		"                        most are pinned in the --ram-budget; the context is then\n"
		"                        forgotten (tokens are unchanged, only bytes read drop)\n"
		"output:\n"
		NSCTL_IMAGE_USAGE
		"                        (-p: the images open the prompt, as the chat template puts\n"
		"                        them, or go at each <|image_pad|> of it; --chat: they open\n"
		"                        the first message, and /image FILE attaches one to the next)\n"
		"  -q, --quiet           no progress lines: the RAM cache's fill and the prompt's\n"
		"                        evaluation (tokens, tok/s) are drawn on a terminal only\n"
		"  --json                stdout gets one JSON object and nothing else: the\n"
		"                        summary's figures, the generated text in \"content\" and,\n"
		"                        for harmony models, \"reasoning\"; \"stop_reason\" is\n"
		"                        \"length\" (-n), \"eos\", \"context\" (full), \"stop\"\n"
		"                        (stopped: stdout closed, Ctrl-C) or \"none\"\n"
		"                        (with --chat: one object per reply on stderr)\n"
		"exit status: 0 done, 1 failed or stdout closed (the reader went away: generation\n"
		"  stops at the next token, the session is removed), 2 bad usage, 130 interrupted\n",
		nsctl_engine_usage);
}

/* The whole of a file (-f), NUL-terminated, in *out (caller frees). 0 or negative errno. */
static int s_read_file(const char *path, char **out)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	if (!f)
		return -errno;
	errno = 0;
	for (;;) {
		size_t got;

		if (cap - len < 4096) {
			char *b = cap > ((size_t)1 << 30) ? NULL : realloc(buf, cap + 65536);

			if (!b) {
				rc = cap > ((size_t)1 << 30) ? -EFBIG : -ENOMEM;
				break;
			}
			buf = b;
			cap += 65536;
		}
		got = fread(buf + len, 1, cap - len - 1, f);
		len += got;
		if (got == 0) {
			rc = ferror(f) ? (errno ? -errno : -EIO) : 0; /* EISDIR: a directory */
			break;
		}
	}
	fclose(f);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	buf[len] = 0;
	*out = buf;
	return 0;
}

/* -e: llama.cpp's escapes (\n \r \t \' \" \\) replaced in place; others kept as written. */
static void s_unescape(char *s)
{
	static const char from[] = "nrt'\"\\", to[] = "\n\r\t'\"\\";
	char *w = s;

	for (; *s; s++) {
		const char *k = s[0] == '\\' && s[1] ? strchr(from, s[1]) : NULL;

		if (k) {
			*w++ = to[k - from];
			s++;
		} else {
			*w++ = *s;
		}
	}
	*w = 0;
}

/* The prompt's text after -f and -e. 0, or -EINVAL after one line. */
static int s_prompt_text(struct s_opts *o)
{
	int rc;

	if (o->prompt_file) {
		rc = s_read_file(o->prompt_file, &o->prompt_buf);
		if (rc < 0) {
			fprintf(stderr, "nsctl run: -f %s: %s\n", o->prompt_file, strerror(-rc));
			return -EINVAL;
		}
	} else if (o->escape && !(o->prompt_buf = strdup(o->prompt))) {
		fprintf(stderr, "nsctl run: out of memory\n");
		return -ENOMEM;
	}
	if (o->prompt_buf && o->escape)
		s_unescape(o->prompt_buf);
	if (o->prompt_buf)
		o->prompt = o->prompt_buf;
	return 0;
}

#define S_WHO "nsctl run"

enum {
	O_HELP = 1, O_MODEL, O_PROMPT, O_FILE, O_ESCAPE, O_SYSTEM, O_WARMUP, O_N, O_TEMP, O_TOP_K,
	O_TOP_P, O_MIN_P, O_REPEAT_PENALTY, O_REPEAT_LAST_N, O_SEED, O_CHAT, O_JSON, O_FINAL_ONLY,
	O_RAW, O_PRINT_PROMPT, O_IGNORE_EOS, O_PRINT_ARGS, O_THINKING, O_DRAFT, O_DRAFT_MAX,
	O_DRAFT_MIN,
	O_QUIET,
};

/* run's own options (llama.cpp's spellings as aliases); the pipeline's come from
 * nsctl_engine_opts. */
static const struct ns_opt s_run_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "prompt", "-p", NS_OPT_VALUE, O_PROMPT },
	{ "file", "-f", NS_OPT_VALUE, O_FILE },
	{ "escape", "-e", NS_OPT_SWITCH, O_ESCAPE },
	{ "system", "-sys --system-prompt", NS_OPT_VALUE, O_SYSTEM },
	{ "warmup", NULL, NS_OPT_VALUE, O_WARMUP },
	{ "n-predict", "-n --predict", NS_OPT_VALUE, O_N },
	{ "temp", "--temperature", NS_OPT_VALUE, O_TEMP },
	{ "top-k", NULL, NS_OPT_VALUE, O_TOP_K },
	{ "top-p", NULL, NS_OPT_VALUE, O_TOP_P },
	{ "min-p", NULL, NS_OPT_VALUE, O_MIN_P },
	{ "repeat-penalty", NULL, NS_OPT_VALUE, O_REPEAT_PENALTY },
	{ "repeat-last-n", NULL, NS_OPT_VALUE, O_REPEAT_LAST_N },
	{ "seed", "-s", NS_OPT_VALUE, O_SEED },
	{ "chat", NULL, NS_OPT_SWITCH, O_CHAT },
	{ "json", NULL, NS_OPT_SWITCH, O_JSON },
	{ "final-only", NULL, NS_OPT_SWITCH, O_FINAL_ONLY },
	{ "raw", NULL, NS_OPT_SWITCH, O_RAW },
	{ "print-prompt", NULL, NS_OPT_SWITCH, O_PRINT_PROMPT },
	{ "ignore-eos", NULL, NS_OPT_SWITCH, O_IGNORE_EOS },
	NSCTL_OPT_PRINT_ARGS(O_PRINT_ARGS),
	{ "thinking", NULL, NS_OPT_SWITCH, O_THINKING },
	{ "draft", NULL, NS_OPT_VALUE, O_DRAFT },
	{ "draft-max", NULL, NS_OPT_VALUE, O_DRAFT_MAX },
	{ "draft-min", NULL, NS_OPT_VALUE, O_DRAFT_MIN },
	{ "quiet", "-q", NS_OPT_SWITCH, O_QUIET },
	NSCTL_IMAGE_OPTS,
};

/* The sampling options' values. */
static int s_sampling(struct s_opts *o, int id, const char *f, const char *v)
{
	double x = 0;
	uint64_t u = 0;
	int rc = 0;

	switch (id) {
	case O_N: /* -1: until the context is full */
		if (strcmp(v, "-1"))
			rc = nsctl_arg_count(S_WHO, f, v, 0, 1 << 24, &u);
		o->g.n_predict = strcmp(v, "-1") ? (int32_t)u : -1;
		break;
	case O_TEMP:
		rc = nsctl_arg_num(S_WHO, f, v, 0, 100, &x);
		o->g.temperature = (float)x;
		break;
	case O_TOP_K:
		rc = nsctl_arg_count(S_WHO, f, v, 0, 1 << 30, &u);
		o->g.top_k = (int32_t)u;
		break;
	case O_TOP_P:
		rc = nsctl_arg_num(S_WHO, f, v, 0, 1, &x);
		o->g.top_p = (float)x;
		break;
	case O_MIN_P:
		rc = nsctl_arg_num(S_WHO, f, v, 0, 1, &x);
		o->g.min_p = (float)x;
		break;
	case O_REPEAT_PENALTY:
		rc = nsctl_arg_num(S_WHO, f, v, 0.01, 100, &x);
		o->g.repeat_penalty = (float)x;
		break;
	case O_REPEAT_LAST_N:
		rc = nsctl_arg_count(S_WHO, f, v, 0, 1 << 20, &u);
		o->g.repeat_last_n = (int32_t)u;
		break;
	case O_SEED: /* -1: random, as llama.cpp */
		o->seed_given = strcmp(v, "-1") != 0;
		if (o->seed_given)
			rc = nsctl_arg_count(S_WHO, f, v, 0, UINT64_MAX, &o->g.seed);
		break;
	}
	return rc;
}

static int s_on_opt(void *user, const struct ns_opt *opt, const char *f, const char *v)
{
	struct s_opts *o = user;

	if (!opt) { /* the model: one non-option */
		if (o->model) {
			fprintf(stderr, "nsctl run: unexpected argument '%s' (prompt: -p)\n", v);
			return -EINVAL;
		}
		o->model = v;
		return 0;
	}
	if (opt->id >= NSCTL_IMG_IMAGE && opt->id < NSE_O_MEM)
		return nsctl_images_opt(&o->img, S_WHO, opt->id, f, v);
	if (opt->id >= NSE_O_MEM) /* budgets, backend, context, ... (shared with nsctl serve) */
		return nsctl_engine_opt(&o->ea, S_WHO, opt, f, v);
	switch (opt->id) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_MODEL:
		if (o->model) {
			fprintf(stderr, "nsctl run: %s '%s': a model was given already ('%s')\n", f,
				v, o->model);
			return -EINVAL;
		}
		o->model = v;
		return 0;
	case O_PROMPT:
		o->prompt = v;
		o->prompt_file = NULL;
		return 0;
	case O_FILE:
		o->prompt_file = v;
		return 0;
	case O_ESCAPE:
		o->escape = true;
		return 0;
	case O_SYSTEM:
		o->system = v;
		return 0;
	case O_WARMUP:
		o->warmup = v;
		return 0;
	case O_CHAT:
		o->chat = true;
		return 0;
	case O_JSON:
		o->json = true;
		return 0;
	case O_FINAL_ONLY:
		o->final_only = true;
		return 0;
	case O_RAW:
		o->raw = true;
		return 0;
	case O_PRINT_PROMPT:
		o->print_prompt = true;
		return 0;
	case O_IGNORE_EOS:
		o->g.no_stop = true;
		return 0;
	case O_PRINT_ARGS:
		o->print_args = true;
		return 0;
	case O_QUIET:
		o->quiet = true;
		return 0;
	case O_THINKING:
		o->ea.eo.thinking = true;
		return 0;
	case O_DRAFT:
	case O_DRAFT_MAX:
	case O_DRAFT_MIN: { /* run_draft.c: 2 taken, or < 0 after one line */
		int rc = nsctl_draft_flag(&o->g, &o->ea.eo.draft_model,
					  opt->id == O_DRAFT ? "--draft" :
					  opt->id == O_DRAFT_MAX ? "--draft-max" : "--draft-min", v);

		/* --draft mtp: nscompute opens the model's MTP block (mtp.h) */
		o->ea.eo.draft_mtp = o->g.draft == NS_GEN_DRAFT_MTP;
		return rc < 0 ? rc : 0;
	}
	}
	return s_sampling(o, opt->id, f, v);
}

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	struct ns_opt t[NS_ARRAY_LEN(s_run_opts) + NSCTL_ENGINE_N_OPTS];
	int rc;

	nsctl_engine_args_init(&o->ea);
	ns_gen_params_default(&o->g);
	o->g.n_predict = 128;
	o->prompt = "";
	o->img.image_token = -1;
	memcpy(t, s_run_opts, sizeof(s_run_opts));
	memcpy(t + NS_ARRAY_LEN(s_run_opts), nsctl_engine_opts, sizeof(nsctl_engine_opts));
	rc = ns_opt_parse(S_WHO, t, NS_ARRAY_LEN(t), argc, argv, s_on_opt, o);
	if (rc < 0)
		return rc;
	if (!o->model) {
		fprintf(stderr, "nsctl run: no MODEL given (usage: nsctl run MODEL [-p PROMPT | "
			"--chat] [options]; --help lists them)\n");
		return -EINVAL;
	}
	if (nsctl_engine_args_check(&o->ea, S_WHO) < 0)
		return -EINVAL;
	if (o->raw && (o->chat || o->final_only || o->ea.eo.reasoning_effort || o->ea.eo.thinking)) {
		fprintf(stderr, "nsctl run: --raw sends -p as plain text; it does not go with "
			"--chat, --final-only, --reasoning or --thinking\n");
		return -EINVAL;
	}
	if (o->img.n && o->warmup) {
		fprintf(stderr, "nsctl run: --image goes with -p or --chat; not with --warmup "
			"yet\n");
		return -EINVAL;
	}
	return s_prompt_text(o);
}

/* Progress lines on a terminal (ns_engine_opts.progress): the RAM cache's fill while the
 * load waits for it, then each prompt's evaluation (drawn from its start, erased when it ends,
 * before the first token is printed); a fill still going on then is said in its name. */
static void s_on_progress(enum ns_progress_kind kind, uint64_t done, uint64_t total,
			  double elapsed_s, void *user)
{
	struct s_opts *o = user;
	struct ns_progress *pf = &o->pf;

	(void)elapsed_s;
	if (kind == NS_PROGRESS_RAM_FILL && !pf->on) { /* a line of its own */
		if (!o->ram.on && done < total)
			ns_progress_begin(&o->ram, true, "RAM cache", NULL, total, done);
		ns_progress_set(&o->ram, done);
		if (done >= total)
			ns_progress_end(&o->ram);
		return;
	}
	if (kind == NS_PROGRESS_RAM_FILL) {
		if (done < total)
			snprintf(pf->name, sizeof(pf->name), "prefill (RAM cache %.0f%%)",
				 100.0 * (double)done / (double)total);
		else
			snprintf(pf->name, sizeof(pf->name), "prefill");
		ns_progress_set(pf, pf->done);
		return;
	}
	ns_progress_end(&o->ram); /* (nothing when it is not drawn) */
	if (done == 0) {
		ns_progress_begin(pf, true, "prefill", "tok", total, 0);
		return;
	}
	ns_progress_set(pf, done);
	if (done >= total)
		ns_progress_end(pf);
}

/* --print-args: what was parsed, one "name=value" per line on stdout (the flag tests). */
static void s_print_args(const struct s_opts *o)
{
	const struct ns_engine_opts *eo = &o->ea.eo;
	const struct ns_gen_params *g = &o->g;

	printf("model=%s\nprompt=%s\nsystem=%s\nn_predict=%d\ntemp=%g\ntop_k=%d\n"
	       "top_p=%g\nmin_p=%g\nrepeat_penalty=%g\nrepeat_last_n=%d\n", o->model, o->prompt,
	       o->system ? o->system : "", g->n_predict, g->temperature, g->top_k, g->top_p,
	       g->min_p, g->repeat_penalty, g->repeat_last_n);
	if (o->seed_given)
		printf("seed=%" PRIu64 "\n", g->seed);
	else
		printf("seed=random\n");
	/* budgets not named: NS_BUDGET_AUTO until the picker runs */
	for (int i = 0; i < 2; i++) {
		const uint64_t b = i ? eo->ram_budget : eo->mem_budget;

		if (b == NS_BUDGET_AUTO)
			printf("%s_budget=auto\n", i ? "ram" : "mem");
		else
			printf("%s_budget=%" PRIu64 "\n", i ? "ram" : "mem", b);
	}
	printf("threads=%d\nctx=%u\nbatch=%u\nngl=%lld\nbackend=%s\n"
	       "vram_budget=%" PRIu64 "\ncache_type_k=%s\n"
	       "cache_type_v=%s\nchat=%d\njson=%d\nignore_eos=%d\nno_warmup=%d\n"
	       "verbose=%d\nquiet=%d\n", eo->threads, eo->n_ctx, o->ea.batch, (long long)o->ea.ngl,
	       eo->backend ? eo->backend : "cpu", eo->vram_budget,
	       eo->cache_type_k ? eo->cache_type_k : "f32",
	       eo->cache_type_v ? eo->cache_type_v : "f32", o->chat, o->json,
	       g->no_stop, o->ea.no_warmup, eo->verbose, o->quiet);
}

/* --warmup: the warm-up text formatted as the run formats its prompts (the chat template for
 * --chat and harmony models, else plain); its expert hits pin experts in RAM. */
static int s_warmup(struct ns_engine *e, const struct s_opts *o)
{
	bool tpl = o->chat || (!o->raw && run_prompt_templated(e));
	struct ns_warmup_report w;
	int rc = ns_engine_warmup(e, o->warmup, tpl, o->system, 60000, &w);

	if (rc < 0)
		return rc;
	fprintf(stderr, "nsctl run: warmup: %u tokens%s, %llu expert hits (%u evaluation%s); plan "
		"generation %u pins the most-hit experts, loaded by nsio\n", w.n_tokens,
		tpl ? " (chat template)" : "", (unsigned long long)w.hits, w.passes,
		w.passes == 1 ? "" : "s", w.generation);
	return 0;
}

/* -p: plain text, or (harmony or Qwen3.5 model, no --raw) one user message with the
 * template. */
static int s_single(struct ns_engine *e, struct s_opts *o)
{
	bool tpl = !o->raw && run_prompt_templated(e);
	struct ns_engine_msg m[2];
	struct ns_run_out out;
	size_t n = 0;
	int rc;

	if (tpl && o->system)
		m[n++] = (struct ns_engine_msg){ .role = "system", .content = o->system };
	m[n++] = (struct ns_engine_msg){ .role = "user", .content = o->prompt };
	if (o->print_prompt && tpl && (rc = run_show_prompt(e, m, n)) < 0)
		return rc;
	if (o->print_prompt && !tpl)
		fprintf(stderr, "%s\n", o->prompt);
	/* --json: the object alone on stdout, the text inside it */
	if ((rc = run_out_begin(e, &out, tpl, o->final_only, o->json ? NULL : stdout)) < 0)
		return rc;
	/* --image: placed by the chat template (the images open the user message), or at
	 * each <|image_pad|> of a plain prompt (neurostream.h ns_engine_set_images) */
	if (o->img.n && (rc = ns_engine_set_images(e, o->img.path, o->img.n)) < 0) {
		ns_run_out_free(&out);
		return rc;
	}
	if (tpl)
		rc = ns_engine_chat(e, m, n, &o->g, ns_run_out_piece, &out);
	else
		rc = ns_engine_generate(e, o->prompt, &o->g, ns_run_out_piece, &out);
	run_out_end(e, &out, o->g.n_predict, rc);
	if (rc == 0)
		ns_run_report(e, o->json, &out.content,
			      out.split != NS_RUN_PLAIN ? &out.reasoning : NULL,
			      o->json ? stdout : stderr);
	/* the reader went away: generation stopped at its first failed write (the engine's own
	 * -EPIPE means a dead child, not this) */
	o->stdout_closed = out.out_closed || (rc == 0 && o->json &&
					      (fflush(stdout) || ferror(stdout)));
	if (rc == 0 && o->stdout_closed)
		rc = -EPIPE;
	ns_run_out_free(&out);
	return rc;
}

/* Remove the statistics files we made for --warmup (and the one nsplan read). */
static void s_stats_rm(const struct s_opts *o)
{
	char plan[sizeof(o->stats_tmp) + 8];

	if (!o->stats_tmp[0])
		return;
	unlink(o->stats_tmp);
	snprintf(plan, sizeof(plan), "%s.plan", o->stats_tmp);
	unlink(plan);
}

/* An option that needs one chat template family: 0, or -EINVAL after one line naming the
 * model's template. */
static int s_need_template(const struct ns_model *m, enum ns_chat_family want,
			   const char *option, const char *what)
{
	const char *tpl = ns_gguf_get_str(ns_model_meta(m), "tokenizer.chat_template");
	enum ns_chat_family f = ns_chat_family_detect(tpl);

	if (f == want)
		return 0;
	fprintf(stderr, "nsctl run: %s is for models with %s; this model's is %s\n", option,
		what, f == NS_CHAT_UNKNOWN ? (tpl ? "another" : "missing") :
		ns_chat_family_name(f));
	return -EINVAL;
}

/* Options the model file rules out, refused before any process starts: --warmup on a model
 * without experts, --final-only on a model whose replies carry no reasoning (harmony, Qwen3,
 * Qwen3.5), --thinking on one whose template thinks unprompted or not at all (not Gemma 4
 * or Qwen3.5), --chat on a model without a chat template we know (and no --chat-template).
 * With --chat-template the last two are checked on the engine's family after the load. A
 * model that does not open or whose hyperparameters do not load is left to the engine, which
 * reports it. Returns 0 or -EINVAL (one line on stderr). */
static int s_check_model(const struct s_opts *o)
{
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	char err[NS_ERR_LEN];
	int rc = 0;

	if (!o->warmup && !o->final_only && !o->ea.eo.thinking &&
	    !(o->chat && !o->ea.eo.chat_template))
		return 0;
	if (ns_model_open(o->model, &m, err, sizeof(err)) < 0)
		return 0;
	if (o->warmup && ns_hparams_load(m, &hp, err, sizeof(err)) == 0 && !hp.n_expert) {
		fprintf(stderr, "nsctl run: --warmup pins experts in RAM; this model has no experts "
			"(a dense %s model)\n", hp.arch);
		rc = -EINVAL;
	} else if (o->ea.eo.thinking && !o->ea.eo.chat_template) {
		enum ns_chat_family f = ns_chat_family_detect(ns_gguf_get_str(ns_model_meta(m),
							      "tokenizer.chat_template"));

		if (f != NS_CHAT_QWEN35)
			rc = s_need_template(m, NS_CHAT_GEMMA4, "--thinking", "the Gemma 4 or "
					     "Qwen3.5 chat template (thinking off unless asked)");
	} else if (o->final_only && !o->ea.eo.chat_template) {
		enum ns_chat_family f = ns_chat_family_detect(ns_gguf_get_str(ns_model_meta(m),
							      "tokenizer.chat_template"));

		if (f != NS_CHAT_QWEN3 && f != NS_CHAT_QWEN35)
			rc = s_need_template(m, NS_CHAT_GPTOSS, "--final-only", "the harmony "
					     "(gpt-oss), Qwen3 or Qwen3.5 chat template");
	}
	if (!rc && o->chat && !o->ea.eo.chat_template) {
		const char *tpl = ns_gguf_get_str(ns_model_meta(m), "tokenizer.chat_template");

		if (ns_chat_family_detect(tpl) == NS_CHAT_UNKNOWN) {
			fprintf(stderr, "nsctl run: --chat needs a chat template; this model's is %s "
				"(name one with --chat-template NAME|FILE)\n", tpl ?
				"of no family we know" : "missing");
			rc = -EINVAL;
		}
	}
	ns_model_close(&m);
	return rc;
}

/* Without -s: a seed from getrandom, printed so the run can be repeated. */
static int s_seed(struct s_opts *o)
{
	if (o->seed_given)
		return 0;
	if (getrandom(&o->g.seed, sizeof(o->g.seed), 0) != (ssize_t)sizeof(o->g.seed)) {
		fprintf(stderr, "nsctl run: getrandom: %s\n", strerror(errno));
		return -EIO;
	}
	return 0;
}

static int s_run(struct s_opts *o, int argc, char **argv);

int cmd_run(int argc, char **argv)
{
	struct s_opts o;
	int rc;

	memset(&o, 0, sizeof(o));
	rc = s_run(&o, argc, argv);
	free(o.prompt_buf);
	return rc;
}

static int s_run(struct s_opts *op, int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = s_on_signal };
	struct ns_engine *e = NULL;
	char err[512], pulled[4096];
	int rc;

	if ((rc = s_parse(op, argc, argv)) < 0)
		return rc == -ENOMEM ? 1 : 2;
	if (op->print_args) {
		s_print_args(op);
		return 0;
	}
	if ((rc = nsctl_model_arg("nsctl run", &op->model, pulled, sizeof(pulled))))
		return rc; /* REPO:QUANT -> the cached file */
	if (s_check_model(op) < 0 || nsctl_draft_check(&op->g, op->model,
							    op->ea.eo.draft_model) < 0)
		return 2;
	if (s_seed(op) < 0)
		return 1;
	/* the images and the tower before anything starts or any weight is read; --chat may
	 * take /image FILE later, so it takes the tower beside the model without --image (the
	 * cpu pass only: the cuda one has no tower) */
	op->img.later = op->chat && (!op->ea.eo.backend || !strcmp(op->ea.eo.backend, "cpu"));
	if ((rc = nsctl_images_check(&op->img, S_WHO, op->model, op->ea.eo.n_ctx, &op->ea.eo)))
		return rc;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	op->ea.eo.cancel = &s_interrupted;
	rc = nsctl_engine_budgets(&op->ea, S_WHO, op->model);
	if (rc)
		return rc;
	if (op->warmup && !op->ea.eo.expert_stats) { /* nsrouter writes hits there, nsplan reads them */
		int fd;

		snprintf(op->stats_tmp, sizeof(op->stats_tmp), "/tmp/nsctl-hits-XXXXXX");
		fd = mkstemp(op->stats_tmp);
		if (fd < 0) {
			fprintf(stderr, "nsctl run: --warmup: cannot make a statistics file: %s\n",
				strerror(errno));
			return 1;
		}
		close(fd);
		op->ea.eo.expert_stats = op->stats_tmp;
	}
	if (ns_progress_wanted(op->quiet)) { /* the RAM cache's fill, each prompt's evaluation */
		op->ea.eo.progress = s_on_progress;
		op->ea.eo.progress_user = op;
	}
	rc = ns_engine_load(op->model, &op->ea.eo, &e, err, sizeof(err));
	ns_progress_end(&op->ram); /* a load that failed while it was drawn */
	if (rc == 0) /* said once the load's own refusals are past */
		nsctl_images_say(&op->img, S_WHO);
	if (rc < 0)
		s_stats_rm(op);

	if (rc < 0) {
		if (s_interrupted) {
			fprintf(stderr, "nsctl run: interrupted; session removed\n");
			return 130;
		}
		fprintf(stderr, "nsctl run: %s\n", err);
		return rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
	}
	fprintf(stderr, "nsctl run: session %s: nsio pid %d, nscompute pid %d", ns_engine_session(e),
		ns_engine_pid(e, NS_PROC_NSIO), ns_engine_pid(e, NS_PROC_NSCOMPUTE));
	if (ns_engine_pid(e, NS_PROC_NSPLAN))
		fprintf(stderr, ", nsplan pid %d", ns_engine_pid(e, NS_PROC_NSPLAN));
	if (ns_engine_pid(e, NS_PROC_NSROUTER))
		fprintf(stderr, ", nsrouter pid %d", ns_engine_pid(e, NS_PROC_NSROUTER));
	fprintf(stderr, " (nsctl ps shows their counters)\n");
	fprintf(stderr, "nsctl run: seed %" PRIu64 "%s\n", op->g.seed,
		op->seed_given ? "" : " (random; -s repeats it)");
	if (op->final_only && !run_splits_reasoning(e)) {
		fprintf(stderr, "nsctl run: --final-only is for models with the harmony (gpt-oss), "
			"Qwen3 or Qwen3.5 chat template; this model's is %s\n", ns_engine_chat_template(e) ?
			ns_engine_chat_template(e) : "missing");
		ns_engine_free(&e);
		return 2;
	}
	if (op->ea.eo.thinking && !run_thinks_on_request(e)) { /* --chat-template named it */
		fprintf(stderr, "nsctl run: --thinking is for models with the Gemma 4 or Qwen3.5 "
			"chat template (thinking off unless asked); this model's is %s\n",
			ns_engine_chat_template(e) ? ns_engine_chat_template(e) : "missing");
		ns_engine_free(&e);
		return 2;
	}
	rc = op->warmup ? s_warmup(e, op) : 0;
	if (rc == 0 && op->chat) {
		struct chat_repl_opts co = { .system = op->system, .print_prompt = op->print_prompt,
					     .final_only = op->final_only, .json = op->json,
					     .g = &op->g, .replying = &s_replying,
					     .stop_reply = &s_stop_reply,
					     .interrupted = &s_interrupted,
					     .images = op->img.path, .n_images = op->img.n };

		rc = chat_repl(e, &co);
	}
	else if (rc == 0)
		rc = s_single(e, op);
	if (op->stdout_closed)
		fprintf(stderr, "nsctl run: stdout closed; generation stopped, session removed\n");
	else if (rc < 0 && !s_interrupted)
		fprintf(stderr, "nsctl run: %s\n", ns_engine_error(e));
	ns_engine_free(&e);
	s_stats_rm(op);
	if (s_interrupted) {
		fprintf(stderr, "nsctl run: interrupted; children stopped, session removed\n");
		return 130;
	}
	return rc == 0 ? 0 : rc == -EINVAL ? 2 : 1;
}
