/* nsctl run MODEL [-p PROMPT | --chat] [-n N] [sampling] [budgets] [--wrap PROC='CMD']
 *
 * Starts the pipeline (nsio, nsplan, nscompute) on a private session through the C API
 * (neurostream.h), streams the generated text to stdout as tokens arrive, and prints a summary
 * line (or --json) on stderr. Ctrl-C / SIGTERM: children stopped, shm and runtime dir removed,
 * exit 130.
 *
 * Harmony (a model whose chat template is gpt-oss's): -p is sent as one user message rendered
 * with the template (--system, --reasoning), and the generated stream is split into channels
 * by modelfile/tokenizer/harmony.h: the final channel on stdout, analysis and commentary on
 * stderr as "[analysis] ..." blocks (none with --final-only). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat.h"
#include "chat_repl.h"
#include "commands.h"
#include "engine_flags.h"
#include "gguf.h"
#include "hparams.h"
#include "hub.h"
#include "model.h"
#include "neurostream.h"
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
	bool chat, json;
	bool final_only, raw, print_prompt; /* harmony display; -p as plain text; show prompt */
	const char *warmup;       /* --warmup: prompt whose expert hits pin experts in RAM */
	char stats_tmp[64];       /* the statistics file we made for --warmup ("" if none) */
	struct nsctl_engine_args ea; /* the pipeline's flags (engine_flags.h) */
	struct ns_gen_params g;
};

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl run MODEL [-p PROMPT | --chat] [options]\n"
		"  Streams the generated text to stdout; a summary line goes to stderr.\n"
		"generation:\n"
		"  -p, --prompt TEXT     prompt (BOS added as the vocabulary asks); default empty\n"
		"  -n N                  tokens to generate at most (-1: until the context is full;\n"
		"                        default 128); also stops at end-of-generation tokens\n"
		"  --ignore-eos          do not stop at end-of-generation tokens\n"
		"  --chat                interactive conversation on stdin with the model's chat\n"
		"                        template: line editing and history on a terminal,\n"
		"                        /reset, /save FILE, /load FILE, /quit (README: Chat)\n"

		"  --system TEXT         system message for --chat (and for -p with a harmony model)\n"
		"harmony (gpt-oss chat template): -p is sent as a user message with the template;\n"
		"  the final channel goes to stdout, the analysis and commentary channels to stderr\n"
		"  as '[analysis] ...' blocks (2>/dev/null keeps only the answer)\n"
		"  --reasoning low|medium|high  the system message's reasoning effort (medium)\n"
		"  --final-only          do not show the analysis and commentary channels\n"
		"  --thinking            Gemma 4 chat template: let the model think first (<|think|>;\n"
		"                        off by default, as the template)\n"
		"  --raw                 send -p as plain text (no template, no channel split)\n"
		"  --print-prompt        print the text the model is given on stderr first\n"
		"  --temp T --top-k K --top-p P --min-p P --repeat-penalty R --repeat-last-n N\n"
		"  --seed S              sampling as llama.cpp (defaults 0.8 40 0.95 0.05 1.0 64 0);\n"
		"                        --temp 0 is greedy\n"
		"  --draft ngram         speculative decoding: prompt lookup drafts tokens, one pass\n"
		"                        over the weights verifies them (same greedy output, same\n"
		"                        sampling distribution); cpu backend, not qwen35\n"
		"  --draft-max N --draft-min N  tokens drafted per pass, adaptive in [min, max]\n"
		"                        (defaults 16 and 1)\n"
		"pipeline:\n%s"
		"  --warmup TEXT         MoE: evaluate TEXT first (with the chat template when the\n"
		"                        run uses one), then re-plan so the experts it routed to\n"
		"                        most are pinned in the --ram-budget; the context is then\n"
		"                        forgotten (tokens are unchanged, only bytes read drop)\n"
		"  --json                the summary as one JSON object on stderr, with the\n"
		"                        generated text in \"content\" (what stdout got) and, for\n"
		"                        harmony models, \"reasoning\" (analysis and commentary)\n",
		nsctl_engine_usage);
}

#define S_WHO "nsctl run"

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	nsctl_engine_args_init(&o->ea);
	ns_gen_params_default(&o->g);
	o->g.n_predict = 128;
	o->prompt = "";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		double x = 0;
		uint64_t u = 0;
		int rc = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			s_usage(stdout);
			exit(0);
		} else if (!strcmp(a, "--chat")) {
			o->chat = true;
			continue;
		} else if (!strcmp(a, "--json")) {
			o->json = true;
			continue;
		} else if (!strcmp(a, "--final-only")) {
			o->final_only = true;
			continue;
		} else if (!strcmp(a, "--thinking")) {
			o->ea.eo.thinking = true;
			continue;
		} else if (!strcmp(a, "--raw")) {
			o->raw = true;
			continue;
		} else if (!strcmp(a, "--print-prompt")) {
			o->print_prompt = true;
			continue;
		} else if (!strcmp(a, "--ignore-eos")) {
			o->g.no_stop = true;
			continue;
		} else if (a[0] != '-' || !a[1]) {
			if (o->model) {
				fprintf(stderr, "nsctl run: unexpected argument '%s' (prompt: -p)\n", a);
				return -EINVAL;
			}
			o->model = a;
			continue;
		}
		/* budgets, backend, context, ... (shared with nsctl serve); drafting */
		rc = nsctl_engine_flag(&o->ea, S_WHO, a, v);
		if (rc == 0)
			rc = nsctl_draft_flag(&o->g, a, v);
		if (rc < 0)
			return rc;
		if (rc) {
			i += rc - 1;
			continue;
		}
		if (!v) {
			fprintf(stderr, "nsctl run: unknown option or missing value: %s\n", a);
			return -EINVAL;
		}
		i++;
		if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) {
			o->prompt = v;
		} else if (!strcmp(a, "--system")) {
			o->system = v;
		} else if (!strcmp(a, "--warmup")) {
			o->warmup = v;
		} else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
			if (strcmp(v, "-1"))
				rc = nsctl_arg_count(S_WHO, a, v, 0, 1 << 24, &u);
			o->g.n_predict = strcmp(v, "-1") ? (int32_t)u : -1;
		} else if (!strcmp(a, "--temp")) {
			rc = nsctl_arg_num(S_WHO, a, v, 0, 100, &x);
			o->g.temperature = (float)x;
		} else if (!strcmp(a, "--top-k")) {
			rc = nsctl_arg_count(S_WHO, a, v, 0, 1 << 30, &u);
			o->g.top_k = (int32_t)u;
		} else if (!strcmp(a, "--top-p")) {
			rc = nsctl_arg_num(S_WHO, a, v, 0, 1, &x);
			o->g.top_p = (float)x;
		} else if (!strcmp(a, "--min-p")) {
			rc = nsctl_arg_num(S_WHO, a, v, 0, 1, &x);
			o->g.min_p = (float)x;
		} else if (!strcmp(a, "--repeat-penalty")) {
			rc = nsctl_arg_num(S_WHO, a, v, 0.01, 100, &x);
			o->g.repeat_penalty = (float)x;
		} else if (!strcmp(a, "--repeat-last-n")) {
			rc = nsctl_arg_count(S_WHO, a, v, 0, 1 << 20, &u);
			o->g.repeat_last_n = (int32_t)u;
		} else if (!strcmp(a, "--seed")) {
			rc = nsctl_arg_count(S_WHO, a, v, 0, UINT64_MAX, &o->g.seed);
		} else {
			fprintf(stderr, "nsctl run: unknown option %s\n", a);
			rc = -EINVAL;
		}
		if (rc)
			return rc;
	}
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
	return 0;
}

/* --warmup: the warm-up text formatted as the run formats its prompts (the chat template for
 * --chat and harmony models, else plain); its expert hits pin experts in RAM. */
static int s_warmup(struct ns_engine *e, const struct s_opts *o)
{
	bool tpl = o->chat || (!o->raw && run_is_harmony(e));
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

/* -p: plain text, or (harmony model, no --raw) one user message with the template. */
static int s_single(struct ns_engine *e, const struct s_opts *o)
{
	bool harmony = !o->raw && run_is_harmony(e);
	struct ns_engine_msg m[2];
	struct ns_run_out out;
	size_t n = 0;
	int rc;

	if (harmony && o->system)
		m[n++] = (struct ns_engine_msg){ .role = "system", .content = o->system };
	m[n++] = (struct ns_engine_msg){ .role = "user", .content = o->prompt };
	if (o->print_prompt && harmony && (rc = run_show_prompt(e, m, n)) < 0)
		return rc;
	if (o->print_prompt && !harmony)
		fprintf(stderr, "%s\n", o->prompt);
	if ((rc = ns_run_out_begin(&out, harmony, o->final_only, stdout, stderr)) < 0)
		return rc;
	if (harmony)
		rc = ns_engine_chat(e, m, n, &o->g, ns_run_out_piece, &out);
	else
		rc = ns_engine_generate(e, o->prompt, &o->g, ns_run_out_piece, &out);
	run_out_end(e, &out, o->g.n_predict, rc);
	if (rc == 0)
		ns_run_report(e, o->json, &out.content, out.h ? &out.reasoning : NULL, stderr);
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
 * without experts, --final-only on a model without the harmony (gpt-oss) chat template,
 * --thinking on one without the Gemma 4 template (the one that thinks only when asked),
 * --chat on a model without a chat template we know (and no --chat-template). A
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
	} else if (o->ea.eo.thinking) {
		rc = s_need_template(m, NS_CHAT_GEMMA4, "--thinking", "the Gemma 4 chat template "
				     "(thinking off unless asked)");
	} else if (o->final_only) {
		rc = s_need_template(m, NS_CHAT_GPTOSS, "--final-only", "the harmony (gpt-oss) "
				     "chat template");
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

int cmd_run(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = s_on_signal };
	struct ns_engine *e = NULL;
	struct s_opts o;
	char err[512], pulled[4096];
	int rc;

	memset(&o, 0, sizeof(o));
	if (s_parse(&o, argc, argv) < 0)
		return 2;
	if ((rc = nsctl_model_arg("nsctl run", &o.model, pulled, sizeof(pulled))))
		return rc; /* REPO:QUANT -> the cached file */
	if (s_check_model(&o) < 0 || nsctl_draft_check(&o.g, o.model, o.ea.eo.backend) < 0)
		return 2;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	o.ea.eo.cancel = &s_interrupted;
	rc = nsctl_engine_budgets(&o.ea, S_WHO, o.model);
	if (rc)
		return rc;
	if (o.warmup && !o.ea.eo.expert_stats) { /* nsrouter writes hits there, nsplan reads them */
		int fd;

		snprintf(o.stats_tmp, sizeof(o.stats_tmp), "/tmp/nsctl-hits-XXXXXX");
		fd = mkstemp(o.stats_tmp);
		if (fd < 0) {
			fprintf(stderr, "nsctl run: --warmup: cannot make a statistics file: %s\n",
				strerror(errno));
			return 1;
		}
		close(fd);
		o.ea.eo.expert_stats = o.stats_tmp;
	}
	rc = ns_engine_load(o.model, &o.ea.eo, &e, err, sizeof(err));
	if (rc < 0)
		s_stats_rm(&o);
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
	if (o.final_only && !run_is_harmony(e)) {
		fprintf(stderr, "nsctl run: --final-only is for models with the harmony (gpt-oss) "
			"chat template; this model's is %s\n", ns_engine_chat_template(e) ?
			ns_engine_chat_template(e) : "missing");
		ns_engine_free(&e);
		return 2;
	}
	rc = o.warmup ? s_warmup(e, &o) : 0;
	if (rc == 0 && o.chat) {
		struct chat_repl_opts co = { .system = o.system, .print_prompt = o.print_prompt,
					     .final_only = o.final_only, .json = o.json, .g = &o.g,
					     .replying = &s_replying, .stop_reply = &s_stop_reply,
					     .interrupted = &s_interrupted };

		rc = chat_repl(e, &co);
	}
	else if (rc == 0)
		rc = s_single(e, &o);
	if (rc < 0 && !s_interrupted)
		fprintf(stderr, "nsctl run: %s\n", ns_engine_error(e));
	ns_engine_free(&e);
	s_stats_rm(&o);
	if (s_interrupted) {
		fprintf(stderr, "nsctl run: interrupted; children stopped, session removed\n");
		return 130;
	}
	return rc == 0 ? 0 : rc == -EINVAL ? 2 : 1;
}
