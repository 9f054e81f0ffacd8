/* test_router.c - routing drives I/O (nsrouter) through the real pipeline (nsctl run).
 *
 *   test_router NSCTL MODEL(relative to the oracle) BLOCK_ROWS [BACKEND [COMPUTE]]
 *
 * BACKEND (default cpu) is passed to nsctl run --backend; with cuda, COMPUTE is the
 * nscompute-cuda to run (set as $NS_NSCOMPUTE_CUDA: nscompute-cudaemu, the kernels emulated
 * on the CPU, in CI), through the same checks.
 * 1. Without nsrouter: nsio's bytes-requested counter per decoded token equals the model's
 *    non-expert bytes (token_embd: one row, unless tied) plus exactly n_used / n_expert of each
 *    layer's expert bytes (the active experts only); the arena peak is at most
 *    (lookahead + 1) blocks of BLOCK_ROWS rows, fewer bytes than one expert's window.
 * 2. With nsrouter: the same tokens, the same bytes requested, and prefetch hits (> 0).
 * 3. nsrouter killed (SIGKILL) repeatedly mid-generation: the same tokens, and nsctl
 *    restarted it (more than one nsrouter pid seen). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../run/run_testlib.h"
#include "hparams.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"

#define CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)

#define N_GEN "160"
#define LOOKAHEAD 2

struct run {
	char *text;  /* stdout */
	char *json;  /* stderr */
	uint64_t req_decode, n_decode, peak, hits, requests;
	int kills, pids;
};

/* Children of parent named comm (a scan of /proc). */
static int s_children(pid_t parent, const char *comm, pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)) && n < max) {
		char path[300], buf[512], name[64];
		int pid = atoi(de->d_name), ppid;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f)) {
			char *rp = strrchr(buf, ')'), *lp = strchr(buf, '(');

			if (lp && rp && rp - lp - 1 < (long)sizeof(name) &&
			    sscanf(rp + 2, "%*c %d", &ppid) == 1) {
				memcpy(name, lp + 1, (size_t)(rp - lp - 1));
				name[rp - lp - 1] = 0;
				if (ppid == parent && !strcmp(name, comm))
					out[n++] = pid;
			}
		}
		fclose(f);
	}
	closedir(d);
	return n;
}

static const char *s_backend = "cpu";

static void s_run(const char *nsctl, const char *model, const char *block_rows, bool router,
		  int kills, struct run *r)
{
	char out[] = "/tmp/ns_router_out_XXXXXX", err[] = "/tmp/ns_router_err_XXXXXX";
	char la[8];
	int fo = mkstemp(out), fe = mkstemp(err), st;
	pid_t pid, seen[64];
	int n_seen = 0;

	CHECK(fo >= 0 && fe >= 0, "mkstemp");
	snprintf(la, sizeof(la), "%d", LOOKAHEAD);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(fo, 1);
		dup2(fe, 2);
		if (router)
			unsetenv("NS_NSROUTER");
		else
			setenv("NS_NSROUTER", "off", 1);
		execl(nsctl, nsctl, "run", model, "-p", "Once upon a time", "-n", N_GEN,
		      "--ignore-eos", "--temp", "0", "--block-rows", block_rows, "--lookahead", la,
		      "--threads", "1", "--no-plan", "--json", "--backend", s_backend,
		      (char *)NULL);
		_exit(127);
	}
	memset(r, 0, sizeof(*r));
	/* kill every nsrouter we see (up to kills times), 30 ms apart */
	while (waitpid(pid, &st, WNOHANG) == 0) {
		pid_t ch[8];
		int n = router ? s_children(pid, "nsrouter", ch, 8) : 0;

		for (int i = 0; i < n; i++) {
			bool known = false;

			for (int j = 0; j < n_seen; j++)
				known |= seen[j] == ch[i];
			if (!known && n_seen < 64)
				seen[n_seen++] = ch[i];
			if (r->kills < kills && kill(ch[i], SIGKILL) == 0)
				r->kills++;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 30 * 1000000L }, NULL);
	}
	close(fo);
	close(fe);
	r->text = ns_test_read_text(out);
	r->json = ns_test_read_text(err);
	rt_json_split(&r->text, &r->json); /* the --json object from stdout */
	unlink(out);
	unlink(err);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nsctl run failed (%d): %s", st, r->json);
	r->pids = n_seen;
	r->req_decode = ns_test_json_u64(r->json, "bytes_requested_decode");
	r->n_decode = ns_test_json_u64(r->json, "n_decode");
	r->peak = ns_test_json_u64(r->json, "arena_peak");
	r->hits = ns_test_json_u64(r->json, "cache_hits");
	r->requests = ns_test_json_u64(r->json, "requests");
}

int main(int argc, char **argv)
{
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	char err[NS_ERR_LEN], path[4096];
	uint64_t nonexp = 0, exps = 0, exp_active = 0, max_block = 0, expert_win = 0, br;
	struct run a, b, k;

	CHECK(argc >= 4 && argc <= 6, "usage: test_router NSCTL MODEL BLOCK_ROWS [BACKEND "
	      "[COMPUTE]]");
	if (argc >= 5)
		s_backend = argv[4];
	if (argc == 6)
		setenv("NS_NSCOMPUTE_CUDA", argv[5], 1);
	ns_test_require_oracle();
	ns_test_oracle_path(path, sizeof(path), argv[2]);
	br = strtoull(argv[3], NULL, 10);
	CHECK(br > 0, "block rows");
	CHECK(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
	CHECK(ns_hparams_load(m, &hp, err, sizeof(err)) == 0, "%s", err);
	CHECK(hp.n_expert > 0 && hp.n_expert_used > 0, "not an MoE model");
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];
		uint64_t blk = (br < t->n_rows ? br : t->n_rows) * t->row_bytes;

		if (ns_stream_slot_bytes(blk) > max_block)
			max_block = ns_stream_slot_bytes(blk);
		/* vectors (norms, biases, sinks) and conv kernels (qwen35moe's ssm_conv1d) are
		 * fetched once at start, not per token */
		if (t->n_dims < 2 || strstr(t->name, ".bias") || strstr(t->name, "sinks") ||
		    strstr(t->name, "ssm_conv1d"))
			continue;
		if (strstr(t->name, "_exps.")) {
			exps += t->n_bytes;
			if (strstr(t->name, "ffn_gate_exps") && t->n_bytes / hp.n_expert > expert_win)
				expert_win = t->n_bytes / hp.n_expert;
			continue;
		}
		if (!strcmp(t->name, "token_embd.weight"))
			nonexp += t->row_bytes + (hp.tied_embeddings ? t->n_bytes : 0);
		else
			nonexp += t->n_bytes;
	}
	exp_active = exps / hp.n_expert * hp.n_expert_used;
	CHECK(exps % hp.n_expert == 0, "expert stacks not divisible");

	/* 1: on-demand reads */
	s_run(argv[1], path, argv[3], false, 0, &a);
	printf("%s: %" PRIu64 " decoded tokens; bytes requested per token %" PRIu64
	       " (expected %" PRIu64 " non-expert + %" PRIu64 " = %u/%u of the expert bytes "
	       "%" PRIu64 ")\n", argv[2], a.n_decode, a.req_decode / a.n_decode, nonexp,
	       exp_active, hp.n_expert_used, hp.n_expert, exps);
	CHECK(a.n_decode > 0 && a.req_decode == a.n_decode * (nonexp + exp_active),
	      "bytes requested %" PRIu64 " over %" PRIu64 " tokens, expected %" PRIu64
	      " per token", a.req_decode, a.n_decode, nonexp + exp_active);
	printf("arena peak %" PRIu64 " B = %.2f blocks of %" PRIu64 " B (limit lookahead+1 = %d); "
	       "one expert's gate window: %" PRIu64 " B\n", a.peak, (double)a.peak / max_block,
	       max_block, LOOKAHEAD + 1, expert_win);
	CHECK(a.peak <= (LOOKAHEAD + 1) * max_block, "arena peak above lookahead+1 blocks");
	CHECK(a.peak < (LOOKAHEAD + 1) * expert_win, "blocks not smaller than the expert");

	/* 2: nsrouter prefetching */
	s_run(argv[1], path, argv[3], true, 0, &b);
	printf("with nsrouter: %" PRIu64 " prefetch hits of %" PRIu64 " requests (%.1f%%), "
	       "bytes requested per token %" PRIu64 "\n", b.hits, b.requests,
	       100.0 * (double)b.hits / (double)b.requests, b.req_decode / b.n_decode);
	CHECK(!strcmp(a.text, b.text), "tokens differ with nsrouter:\n%s\n---\n%s", a.text, b.text);
	CHECK(b.req_decode == a.req_decode, "bytes requested changed with nsrouter");
	CHECK(b.hits > 0, "no prefetch hit: nsrouter did nothing");

	/* 3: nsrouter killed mid-generation */
	s_run(argv[1], path, argv[3], true, 6, &k);
	printf("killed nsrouter %d times (%d pids seen): tokens %s\n", k.kills, k.pids,
	       strcmp(a.text, k.text) ? "DIFFER" : "unchanged");
	CHECK(k.kills >= 1, "never saw nsrouter to kill");
	CHECK(k.pids >= 2, "nsrouter not restarted after SIGKILL");
	CHECK(!strcmp(a.text, k.text), "tokens differ after killing nsrouter");
	free(a.text); free(a.json); free(b.text); free(b.json); free(k.text); free(k.json);
	ns_model_close(&m);
	printf("ok\n");
	return 0;
}
