/* nsctl serve MODEL [--host 127.0.0.1] [--port 8080] [--api-key K] [--parallel N] [...]
 *
 * An OpenAI-compatible HTTP server (nsctl/serve/): the pipeline (nsio, nsplan, nscompute,
 * nsrouter, started as nsctl run starts it, with run's budget and backend flags) starts once
 * and stays up; requests take one of --parallel sequence slots, wait in order in a bounded
 * queue when all are taken, and advance together one step at a time. SIGTERM / SIGINT: no
 * new connections, waiting requests get 503, running ones finish (up to --grace seconds,
 * then they end with an error), every process is stopped and the session removed; exit 0.
 * nscompute dying ends the server (exit 1) after answering what was in flight with errors. */
#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat.h"
#include "cmd_opt.h"
#include "commands.h"
#include "engine_flags.h"
#include "gguf.h"
#include "model.h"
#include "ns_opt.h"
#include "ns_util.h"
#include "session.h"
#include "srv_engine.h"
#include "srv_http.h"
#include "srv_sched.h"
#include "tokenizer.h"

#define S_WHO "nsctl serve"

static volatile sig_atomic_t s_signalled; /* SIGINT/SIGTERM seen */
static volatile sig_atomic_t s_loading;   /* the pipeline is starting */
static volatile sig_atomic_t s_load_cancel; /* the engine's cancel flag: only while loading */

static void s_on_signal(int sig)
{
	s_signalled = sig;
	if (s_loading)
		s_load_cancel = 1;
}

struct s_opts {
	const char *model, *host, *api_key, *alias;
	uint16_t port;
	uint32_t parallel, queue, prefill_chunk, grace_s, max_conns;
	uint64_t max_body;
	bool no_reuse, print_args;
	struct nsctl_engine_args ea;
};

static void s_usage(FILE *f)
{
	fprintf(f,
		"usage: nsctl serve MODEL [options]   (or -m MODEL; --opt=value and llama-server's\n"
		"       -a/--alias, -np/--parallel, -c/--ctx-size, -t/--threads, -ngl work too)\n"
		"  An OpenAI-compatible server: POST /v1/chat/completions, POST /v1/completions\n"
		"  (whole or streamed), GET /v1/models, GET /health.\n"
		"server:\n"
		"  --host ADDR           numeric address to listen on (127.0.0.1; 0.0.0.0 or :: for\n"
		"                        every interface)\n"
		"  --port N              TCP port (8080; 0: any free port, printed)\n"
		"  --api-key KEY         every request must send \"Authorization: Bearer KEY\"\n"
		"  --api-key-file FILE   the key from the first line of FILE (not on the command\n"
		"                        line, where ps shows it)\n"
		"  --parallel N          sequences generated together, each in its own KV-cache\n"
		"                        slot of -c positions (1; at most 64)\n"
		"  --queue N             requests waiting for a slot at most; more get 503 (64)\n"
		"  --prefill-chunk N     prompt tokens of one request per step, so a long prompt\n"
		"                        does not stall the others (256)\n"
		"  --max-body SIZE       largest request body (8MB); larger: 413\n"
		"  --alias NAME          the model's name in the API (default: the file's name\n"
		"                        without .gguf)\n"
		"  --no-prompt-reuse     evaluate every prompt whole (no cached prefix)\n"
		"  --grace SECONDS       on SIGTERM, how long running requests may finish (10)\n"
		"  --reasoning low|medium|high  harmony (gpt-oss): default reasoning effort\n"
		"pipeline (as nsctl run):\n%s", nsctl_engine_usage);
}

static int s_key_file(struct s_opts *o, const char *path)
{
	static char key[512];
	FILE *f = fopen(path, "r");

	if (!f || !fgets(key, sizeof(key), f)) {
		fprintf(stderr, S_WHO ": --api-key-file %s: %s\n", path,
			f ? "empty" : strerror(errno));
		if (f)
			fclose(f);
		return -EINVAL;
	}
	fclose(f);
	key[strcspn(key, "\r\n")] = 0;
	if (!key[0]) {
		fprintf(stderr, S_WHO ": --api-key-file %s: the first line is empty\n", path);
		return -EINVAL;
	}
	o->api_key = key;
	return 0;
}

enum {
	O_HELP = 1, O_MODEL, O_NO_REUSE, O_HOST, O_PORT, O_API_KEY, O_API_KEY_FILE, O_ALIAS,
	O_PARALLEL, O_QUEUE, O_PREFILL_CHUNK, O_GRACE, O_MAX_BODY, O_PRINT_ARGS,
};

/* serve's own options (llama-server's spellings as aliases); the pipeline's come from
 * nsctl_engine_opts. */
static const struct ns_opt s_serve_opts[] = {
	NSCTL_OPT_HELP(O_HELP),
	NSCTL_OPT_MODEL(O_MODEL),
	{ "no-prompt-reuse", NULL, NS_OPT_SWITCH, O_NO_REUSE },
	{ "host", NULL, NS_OPT_VALUE, O_HOST },
	{ "port", NULL, NS_OPT_VALUE, O_PORT },
	{ "api-key", NULL, NS_OPT_VALUE, O_API_KEY },
	{ "api-key-file", NULL, NS_OPT_VALUE, O_API_KEY_FILE },
	{ "alias", "-a", NS_OPT_VALUE, O_ALIAS },
	{ "parallel", "-np", NS_OPT_VALUE, O_PARALLEL },
	{ "queue", NULL, NS_OPT_VALUE, O_QUEUE },
	{ "prefill-chunk", NULL, NS_OPT_VALUE, O_PREFILL_CHUNK },
	{ "grace", NULL, NS_OPT_VALUE, O_GRACE },
	{ "max-body", NULL, NS_OPT_VALUE, O_MAX_BODY },
	NSCTL_OPT_PRINT_ARGS(O_PRINT_ARGS),
};

/* A count option of serve into *out (lo..hi). */
static int s_count(const char *f, const char *v, uint64_t lo, uint64_t hi, uint32_t *out)
{
	uint64_t u = 0;
	int rc = nsctl_arg_count(S_WHO, f, v, lo, hi, &u);

	*out = (uint32_t)u;
	return rc;
}

static int s_on_opt(void *user, const struct ns_opt *opt, const char *f, const char *v)
{
	struct s_opts *o = user;
	uint32_t port = 0;
	int rc = 0;

	if (!opt || opt->id == O_MODEL) {
		if (o->model) {
			fprintf(stderr, S_WHO ": unexpected argument '%s'\n", v);
			return -EINVAL;
		}
		o->model = v;
		return 0;
	}
	if (opt->id >= NSE_O_MEM) /* budgets, backend, context, ... (as nsctl run) */
		return nsctl_engine_opt(&o->ea, S_WHO, opt, f, v);
	switch (opt->id) {
	case O_HELP:
		s_usage(stdout);
		exit(0);
	case O_PRINT_ARGS:
		o->print_args = true;
		break;
	case O_NO_REUSE:
		o->no_reuse = true;
		break;
	case O_HOST:
		o->host = v;
		break;
	case O_PORT:
		rc = s_count(f, v, 0, 65535, &port);
		o->port = (uint16_t)port;
		break;
	case O_API_KEY:
		o->api_key = v;
		if (!*v) {
			fprintf(stderr, S_WHO ": --api-key: the key is empty\n");
			rc = -EINVAL;
		}
		break;
	case O_API_KEY_FILE:
		rc = s_key_file(o, v);
		break;
	case O_ALIAS:
		o->alias = v;
		if (!*v || strlen(v) > 256) {
			fprintf(stderr, S_WHO ": --alias: 1 to 256 bytes\n");
			rc = -EINVAL;
		}
		break;
	case O_PARALLEL:
		rc = s_count(f, v, 1, 64, &o->parallel);
		break;
	case O_QUEUE:
		rc = s_count(f, v, 0, 100000, &o->queue);
		break;
	case O_PREFILL_CHUNK:
		rc = s_count(f, v, 1, 1u << 20, &o->prefill_chunk);
		break;
	case O_GRACE:
		rc = s_count(f, v, 0, 86400, &o->grace_s);
		break;
	case O_MAX_BODY:
		rc = nsctl_arg_size(S_WHO, f, v, &o->max_body);
		if (rc == 0 && (o->max_body < 1024 || o->max_body > (1ull << 30))) {
			fprintf(stderr, S_WHO ": --max-body: 1KB to 1GB\n");
			rc = -EINVAL;
		}
		break;
	}
	return rc;
}

static int s_parse(struct s_opts *o, int argc, char **argv)
{
	struct ns_opt t[NS_ARRAY_LEN(s_serve_opts) + NSCTL_ENGINE_N_OPTS];
	int rc;

	nsctl_engine_args_init(&o->ea);
	o->host = "127.0.0.1";
	o->port = 8080;
	o->parallel = 1;
	o->queue = 64;
	o->prefill_chunk = 256;
	o->grace_s = 10;
	o->max_body = 8ull << 20;
	memcpy(t, s_serve_opts, sizeof(s_serve_opts));
	memcpy(t + NS_ARRAY_LEN(s_serve_opts), nsctl_engine_opts, sizeof(nsctl_engine_opts));
	rc = ns_opt_parse(S_WHO, t, NS_ARRAY_LEN(t), argc, argv, s_on_opt, o);
	if (rc < 0)
		return rc;
	if (!o->model) {
		fprintf(stderr, S_WHO ": no MODEL given (usage: nsctl serve MODEL [options]; --help "
			"lists them)\n");
		return -EINVAL;
	}
	o->ea.n_seq = o->parallel;
	o->max_conns = o->parallel + o->queue + 16;
	return nsctl_engine_args_check(&o->ea, S_WHO);
}

/* --print-args: what was parsed, "name=value" lines on stdout (the flag tests). */
static void s_print_args(const struct s_opts *o)
{
	const struct ns_engine_opts *eo = &o->ea.eo;

	printf("model=%s\nhost=%s\nport=%u\nalias=%s\nparallel=%u\nqueue=%u\nprefill_chunk=%u\n"
	       "grace=%u\nmax_body=%" PRIu64 "\nno_prompt_reuse=%d\nthreads=%d\nctx=%u\n"
	       "ngl=%lld\nbackend=%s\n", o->model, o->host, o->port, o->alias ? o->alias : "",
	       o->parallel, o->queue, o->prefill_chunk, o->grace_s, o->max_body, o->no_reuse,
	       eo->threads, eo->n_ctx, (long long)o->ea.ngl, eo->backend ? eo->backend : "cpu");
}

/* The model's API name: --alias, else the file name without ".gguf". */
static void s_model_id(const struct s_opts *o, char *buf, size_t n)
{
	char path[4096];
	const char *base;
	size_t len;

	if (o->alias) {
		snprintf(buf, n, "%s", o->alias);
		return;
	}
	snprintf(path, sizeof(path), "%s", o->model);
	base = basename(path);
	len = strlen(base);
	if (len > 5 && !strcmp(base + len - 5, ".gguf"))
		len -= 5;
	snprintf(buf, n, "%.*s", (int)len, base);
}

/* Tokenizer and chat template of the model, for the API side. */
static int s_model_meta(const struct s_opts *o, struct ns_model **m, struct ns_tok **tok,
			struct srv_model_info *mi)
{
	char err[NS_ERR_LEN];
	struct stat st;

	if (ns_model_open(o->model, m, err, sizeof(err)) < 0 ||
	    !(*tok = ns_tok_new(ns_model_meta(*m), err, sizeof(err)))) {
		fprintf(stderr, S_WHO ": %s\n", err);
		return -EINVAL;
	}
	mi->tok = *tok;
	mi->fam = ns_chat_family_detect(ns_gguf_get_str(ns_model_meta(*m),
							"tokenizer.chat_template"));
	if (o->ea.eo.chat_template) /* --chat-template, already a family name */
		mi->fam = ns_chat_family_from_name(o->ea.eo.chat_template);
	mi->reasoning_effort = o->ea.eo.reasoning_effort;
	mi->created = stat(o->model, &st) == 0 ? (uint64_t)st.st_mtime : 0;
	return 0;
}

/* What nsctl ps shows of a server: a "serve" file in the session's runtime directory beside
 * its "procs" (path: out, "" when not written; removed before the session ends). */
static void s_ps_file(struct ns_engine *ns, char *out, size_t n, const char *url,
		      const char *id, uint32_t parallel)
{
	char dir[PATH_MAX];
	FILE *f;

	out[0] = 0;
	if (ns_session_rundir(ns_engine_session(ns), dir, sizeof(dir)) < 0 ||
	    snprintf(out, n, "%s/serve", dir) >= (int)n || !(f = fopen(out, "w"))) {
		out[0] = 0;
		return;
	}
	fprintf(f, "%s model %s, %u slot%s\n", url, id, parallel, parallel == 1 ? "" : "s");
	if (fclose(f) != 0) {
		unlink(out);
		out[0] = 0;
	}
}

/* Up and serving until a signal or nscompute's death. */
static int s_serve(struct s_opts *o, struct srv_engine *eng, struct srv_model_info *mi)
{
	struct srv_sched_opts so = { .max_waiting = o->queue, .prefill_chunk = o->prefill_chunk,
				     .no_reuse = o->no_reuse };
	struct srv_http_opts ho = { .host = o->host, .port = o->port, .api_key = o->api_key,
				    .max_body = o->max_body, .max_conns = o->max_conns };
	struct srv_sched *sched = NULL;
	struct srv_http *http = NULL;
	char err[512], url[128], psf[PATH_MAX] = "";
	bool dead = false;
	int rc;

	rc = srv_sched_start(eng, mi->tok, &so, &sched);
	if (rc < 0) {
		fprintf(stderr, S_WHO ": cannot start the scheduler: %s\n", strerror(-rc));
		return 1;
	}
	rc = srv_http_start(&ho, mi, sched, &http, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, S_WHO ": %s\n", err);
		srv_sched_free(&sched);
		return rc == -EINVAL ? 2 : 1;
	}
	snprintf(url, sizeof(url), "http://%s%s%s:%u/v1", strchr(o->host, ':') ? "[" : "",
		 o->host, strchr(o->host, ':') ? "]" : "", srv_http_port(http));
	fprintf(stderr, S_WHO ": listening on %s (model '%s', %u slot%s of %u positions%s)\n",
		url, mi->id, o->parallel, o->parallel == 1 ? "" : "s", mi->n_ctx,
		o->api_key ? ", API key required" : "");
	s_ps_file(srv_engine_ns(eng), psf, sizeof(psf), url, mi->id, o->parallel);
	while (!s_signalled && !(dead = srv_sched_dead(sched)))
		usleep(50000);
	srv_http_quiesce(http);
	if (dead)
		fprintf(stderr, S_WHO ": the pipeline is gone; stopping\n");
	else
		fprintf(stderr, S_WHO ": %s: finishing running requests (up to %u s), then "
			"stopping\n", strsignal(s_signalled), o->grace_s);
	srv_sched_stop(sched, (uint64_t)o->grace_s * 1000);
	/* what was generated goes out before the connections close (a client reading slowly
	 * is given the grace period again) */
	if (!srv_http_drain(http, (uint64_t)o->grace_s * 1000 + 2000))
		fprintf(stderr, S_WHO ": closing connections whose clients did not read their "
			"answers\n");
	srv_http_stop(&http);
	srv_sched_free(&sched);
	if (psf[0])
		unlink(psf); /* before the session removes its directory */
	return dead ? 1 : 0;
}

int cmd_serve(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = s_on_signal };
	struct s_opts o;
	struct ns_model *m = NULL;
	struct ns_tok *tok = NULL;
	struct srv_model_info mi = { 0 };
	struct srv_engine *eng = NULL;
	char id[300], err[512];
	struct ns_engine *ns;
	int rc;

	memset(&o, 0, sizeof(o));
	if (s_parse(&o, argc, argv) < 0)
		return 2;
	if (o.print_args) {
		s_print_args(&o);
		return 0;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	rc = nsctl_engine_budgets(&o.ea, S_WHO, o.model);
	if (rc)
		return rc;
	if (s_model_meta(&o, &m, &tok, &mi) < 0) {
		rc = 2;
		goto out;
	}
	s_model_id(&o, id, sizeof(id));
	mi.id = id;
	o.ea.eo.cancel = &s_load_cancel;
	s_loading = 1;
	rc = srv_engine_open(o.model, &o.ea.eo, o.parallel, &eng, err, sizeof(err));
	s_loading = 0;
	if (rc < 0) {
		if (s_signalled)
			fprintf(stderr, S_WHO ": interrupted; session removed\n");
		else
			fprintf(stderr, S_WHO ": %s\n", err);
		rc = s_signalled ? 130 : rc == -EINVAL || rc == -ENOSPC ? 2 : 1;
		goto out;
	}
	ns = srv_engine_ns(eng);
	mi.n_ctx = srv_engine_n_ctx(eng);
	mi.n_vocab = srv_engine_n_vocab(eng);
	fprintf(stderr, S_WHO ": session %s: nsio pid %d, nscompute pid %d", ns_engine_session(ns),
		ns_engine_pid(ns, NS_PROC_NSIO), ns_engine_pid(ns, NS_PROC_NSCOMPUTE));
	if (ns_engine_pid(ns, NS_PROC_NSPLAN))
		fprintf(stderr, ", nsplan pid %d", ns_engine_pid(ns, NS_PROC_NSPLAN));
	fprintf(stderr, " (nsctl ps shows their counters)\n");
	rc = s_signalled ? 0 : s_serve(&o, eng, &mi);
out:
	srv_engine_close(&eng);
	ns_tok_destroy(&tok);
	ns_model_close(&m);
	if (rc == 0 && s_signalled)
		fprintf(stderr, S_WHO ": stopped; children stopped, session removed\n");
	return rc;
}
