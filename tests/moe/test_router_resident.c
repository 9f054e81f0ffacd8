/* test_router_resident.c - nsrouter never prefetches expert rows the RAM cache holds.
 *
 *   test_router_resident NSCTL MODEL(relative to the oracle; an MoE model)
 *
 * At a RAM budget that makes some expert rows resident (nsctl plan --json --windows says
 * which: for tiny-qwen3moe, every expert of layer 0 and part of expert 0 of layer 1), a run
 * through the whole pipeline (nsctl run, nsplan publishing the plan, nsio's RAM tier, nsrouter)
 * with 32-row blocks. nsrouter runs with --stats (through an NS_NSROUTER wrapper), so its hit
 * counter says how many of its decisions chose each (layer, expert) (a one-token prompt: every
 * decision is one token). Computed here from the plan's windows and the block cuts alone:
 * c(l, e) = the blocks of expert e's gate, up and down windows in layer l that lie wholly in
 * RAM windows, and their bytes. Then nsrouter's own counters must say exactly
 *   resident windows skipped == sum over (l, e) of hits(l, e) * c(l, e)   (and the bytes),
 * i.e. every decision left out exactly the resident blocks of its experts, no more, no fewer.
 * Also: nsrouter announced the plan's RAM bytes; the tokens are the same with nsrouter, without
 * it and at RAM 0; the bytes requested are the same with and without nsrouter; at RAM 0
 * nothing is skipped and windows are prefetched; with every expert resident nothing at all is
 * prefetched. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../run/run_testlib.h"
#include "hparams.h"
#include "model.h"
#include "ns_test.h"
#include "ns_util.h"

#define CHECK(cond, ...) NS_REQUIRE(cond, __VA_ARGS__)

#define BLOCK_ROWS 32
#define N_GEN "160"
#define MAX_WIN 4096

struct s_win {
	char name[96];
	uint64_t row0, row1;
};

struct s_run {
	char *text, *json;         /* stdout, stderr */
	uint64_t req_decode;
	uint64_t decisions, prefetched, skipped, skipped_bytes, announced;
	bool router_line;
};

/* Run argv with stdout/stderr to files, env NS_NSROUTER=router (NULL: unset, "off": none). */
static int s_exec(char *const *argv, const char *router, char **out, char **err)
{
	char fo[] = "/tmp/ns_rres_out_XXXXXX", fe[] = "/tmp/ns_rres_err_XXXXXX";
	int o = mkstemp(fo), e = mkstemp(fe), st;
	pid_t pid;

	CHECK(o >= 0 && e >= 0, "mkstemp");
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		dup2(o, 1);
		dup2(e, 2);
		if (router)
			setenv("NS_NSROUTER", router, 1);
		else
			unsetenv("NS_NSROUTER");
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		CHECK(errno == EINTR, "waitpid");
	close(o);
	close(e);
	*out = ns_test_read_text(fo);
	*err = ns_test_read_text(fe);
	unlink(fo);
	unlink(fe);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The RAM windows of `nsctl plan --json --windows` at ram bytes, adjacent ones merged. */
static int s_plan_windows(const char *nsctl, const char *model, const char *ram,
			  struct s_win *w, uint64_t *placed)
{
	char *argv[] = { (char *)nsctl, "plan", (char *)model, "--ram-budget", (char *)ram,
			 "--mem-budget", "4MB", "-c", "256", "--json", "--windows", NULL };
	char *out, *err;
	const char *p;
	int n = 0;

	CHECK(s_exec(argv, NULL, &out, &err) == 0, "nsctl plan: %s", err);
	*placed = ns_test_json_u64(strstr(out, "\"placed\":"), "ram");
	p = strstr(out, "\"windows\":");
	CHECK(p, "no windows");
	while ((p = strstr(p, "{\"tensor\":\""))) {
		char name[96];
		unsigned long long a, b;
		const char *r, *tier;

		p += strlen("{\"tensor\":\"");
		CHECK(sscanf(p, "%95[^\"]", name) == 1, "window name");
		r = strstr(p, "\"rows\":[");
		tier = strstr(p, "\"tier\":\"");
		CHECK(r && tier && sscanf(r + 8, "%llu,%llu", &a, &b) == 2, "window rows");
		if (strncmp(tier + 8, "RAM\"", 4) || a == b)
			continue;
		if (n && !strcmp(w[n - 1].name, name) && w[n - 1].row1 == a) {
			w[n - 1].row1 = b;
			continue;
		}
		CHECK(n < MAX_WIN, "too many windows");
		snprintf(w[n].name, sizeof(w[n].name), "%s", name);
		w[n].row0 = a;
		w[n].row1 = b;
		n++;
	}
	free(out);
	free(err);
	return n;
}

static bool s_in_ram(const struct s_win *w, int n, const char *name, uint64_t a, uint64_t b)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(w[i].name, name) && w[i].row0 <= a && b <= w[i].row1)
			return true;
	return false;
}

static void s_run(const char *nsctl, const char *model, const char *ram, const char *router,
		  struct s_run *r)
{
	char *argv[] = { (char *)nsctl, "run", (char *)model, "-p", "a", "-n", N_GEN,
			 "--ignore-eos", "--temp", "0", "--block-rows", "32", "--lookahead", "2",
			 "--threads", "1", "--mem-budget", "4MB", "--ram-budget", (char *)ram,
			 "-c", "256", "--json", "--verbose", NULL };
	const char *p;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = s_exec(argv, router, &r->text, &r->json);
	rt_json_split(&r->text, &r->json); /* the --json object from stdout */
	CHECK(rc == 0, "nsctl run --ram-budget %s: exit %d: %s", ram, rc, r->json);
	r->req_decode = ns_test_json_u64(strstr(r->json, "{\"session\""),
					 "bytes_requested_decode");
	p = strstr(r->json, "nsrouter: plan generation ");
	if (p)
		CHECK(sscanf(strstr(p, "windows, ") + 9, "%" SCNu64, &r->announced) == 1, "announce");
	p = strstr(r->json, " decisions, ");
	if (p) {
		const char *w = strstr(p, " plans, "), *s = strstr(p, "malformed, ");
		const char *b = s ? strstr(s, "skipped (") : NULL;

		const char *n = p;

		while (n > r->json && n[-1] >= '0' && n[-1] <= '9')
			n--;
		r->decisions = strtoull(n, NULL, 10);
		CHECK(w && s && b && sscanf(w + 8, "%" SCNu64, &r->prefetched) == 1 &&
		      sscanf(s + 11, "%" SCNu64, &r->skipped) == 1 &&
		      sscanf(b + 9, "%" SCNu64, &r->skipped_bytes) == 1, "nsrouter line: %.200s", p);
		r->router_line = true;
	}
}

/* Hits per (layer, expert) from an nsrouter --stats file ("L E HITS" lines). */
static void s_hits(const char *path, uint64_t *hits, uint32_t n_layer, uint32_t n_expert)
{
	FILE *f = fopen(path, "r");
	char line[256];

	CHECK(f, "no stats file %s (nsrouter did not write it)", path);
	memset(hits, 0, sizeof(*hits) * n_layer * n_expert);
	while (fgets(line, sizeof(line), f)) {
		unsigned l, e;
		unsigned long long h;

		if (sscanf(line, "%u %u %llu", &l, &e, &h) == 3) {
			CHECK(l < n_layer && e < n_expert, "stats line %s", line);
			hits[l * n_expert + e] = h;
		}
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	static struct s_win win[MAX_WIN];
	static const char *const proj[3] = { "gate", "up", "down" };
	char path[PATH_MAX], err[NS_ERR_LEN], ram[32], all[32], router[PATH_MAX];
	char *wrapper, *stats;
	const char *root = getenv("NS_BUILD_ROOT");
	struct ns_model *m = NULL;
	struct ns_hparams hp;
	uint64_t attn_out = 0, l0_experts = 0, l1_down = 0, l1_gate = 0, placed, total = 0;
	uint64_t want_w = 0, want_b = 0, *hits;
	struct s_run a, b, c, d;
	int n_win;
	FILE *f;

	CHECK(argc == 3, "usage: test_router_resident NSCTL MODEL");
	ns_test_require_oracle();
	ns_test_oracle_path(path, sizeof(path), argv[2]);
	CHECK(ns_model_open(path, &m, err, sizeof(err)) == 0, "%s", err);
	CHECK(ns_hparams_load(m, &hp, err, sizeof(err)) == 0, "%s", err);
	CHECK(hp.n_expert > 0 && hp.n_layer >= 2, "not an MoE model of two layers");

	/* the budget: every matrix that is not an expert or the input embedding (the planner
	 * places those first), all of layer 0's experts, expert 0's down slab of layer 1 and
	 * half its gate slab (norms, read once at start, come last and do not fit) */
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];

		total += t->n_bytes;
		if (t->n_rows == 1 || !strcmp(t->name, "token_embd.weight"))
			continue;
		if (!strstr(t->name, "_exps."))
			attn_out += t->n_bytes;
		else if (!strncmp(t->name, "blk.0.", 6))
			l0_experts += t->n_bytes;
		else if (!strcmp(t->name, "blk.1.ffn_down_exps.weight"))
			l1_down = t->n_bytes / hp.n_expert;
		else if (!strcmp(t->name, "blk.1.ffn_gate_exps.weight"))
			l1_gate = t->n_bytes / hp.n_expert / 2;
	}
	snprintf(ram, sizeof(ram), "%" PRIu64, attn_out + l0_experts + l1_down + l1_gate);
	snprintf(all, sizeof(all), "%" PRIu64, 2 * total);
	n_win = s_plan_windows(argv[1], path, ram, win, &placed);

	/* c(l, e) from the plan's windows and the block cuts */
	hits = calloc((size_t)hp.n_layer * hp.n_expert, sizeof(*hits));
	CHECK(hits, "calloc");
	atexit(ns_test_scratch_remove); /* they go whether the test passes or fails */
	stats = ns_test_scratch("ns_rres_stats", "txt");
	wrapper = ns_test_scratch("ns_rres_router", "sh");
	snprintf(router, sizeof(router), "%s/nsrouter/nsrouter", root && *root ? root : ".");
	f = fopen(wrapper, "w");
	CHECK(f, "write %s", wrapper);
	fprintf(f, "#!/bin/sh\nexec '%s' \"$@\" --stats '%s'\n", router, stats);
	fclose(f);
	CHECK(chmod(wrapper, 0700) == 0, "chmod");
	unlink(stats);

	s_run(argv[1], path, ram, wrapper, &a);     /* nsrouter, some experts resident */
	s_run(argv[1], path, ram, "off", &b);       /* no nsrouter */
	s_run(argv[1], path, "0", NULL, &c);        /* nsrouter, nothing resident */
	s_run(argv[1], path, all, NULL, &d);        /* nsrouter, every expert resident */
	s_hits(stats, hits, hp.n_layer, hp.n_expert);

	for (uint32_t l = 0; l < hp.n_layer; l++) {
		for (uint32_t e = 0; e < hp.n_expert; e++) {
			uint64_t cw = 0, cb = 0;

			for (int k = 0; k < 3; k++) {
				char name[96];
				const struct ns_model_tensor *t;
				uint64_t rows, r0;

				snprintf(name, sizeof(name), "blk.%u.ffn_%s_exps.weight", l, proj[k]);
				t = ns_model_find(m, name);
				CHECK(t && t->n_dims == 3, "%s", name);
				rows = t->ne[1];
				r0 = (uint64_t)e * rows;
				for (uint64_t r = r0; r < r0 + rows; r += BLOCK_ROWS) {
					uint64_t nr = r0 + rows - r < BLOCK_ROWS ? r0 + rows - r
										 : BLOCK_ROWS;
					if (s_in_ram(win, n_win, name, r, r + nr)) {
						cw++;
						cb += nr * t->row_bytes;
					}
				}
			}
			if (hits[l * hp.n_expert + e])
				printf("layer %u expert %u: %" PRIu64 " decisions x %" PRIu64
				       " resident blocks (%" PRIu64 " B)\n", l, e,
				       hits[l * hp.n_expert + e], cw, cb);
			want_w += hits[l * hp.n_expert + e] * cw;
			want_b += hits[l * hp.n_expert + e] * cb;
		}
	}
	printf("RAM budget %s: %" PRIu64 " bytes placed in %d RAM windows; nsrouter announced "
	       "%" PRIu64 "\n", ram, placed, n_win, a.announced);
	printf("nsrouter: %" PRIu64 " windows prefetched, %" PRIu64 " resident skipped (%" PRIu64
	       " B); expected from its hits and the plan: %" PRIu64 " (%" PRIu64 " B)\n",
	       a.prefetched, a.skipped, a.skipped_bytes, want_w, want_b);
	printf("RAM 0: %" PRIu64 " decisions, %" PRIu64 " prefetched, %" PRIu64 " skipped; "
	       "everything resident: %" PRIu64 " decisions, %" PRIu64 " prefetched, %" PRIu64
	       " skipped\n", c.decisions, c.prefetched, c.skipped, d.decisions, d.prefetched,
	       d.skipped);
	CHECK(a.router_line && c.router_line && d.router_line, "no nsrouter summary line");
	CHECK(a.announced == placed, "nsrouter saw %" PRIu64 " resident bytes, the plan places %"
	      PRIu64, a.announced, placed);
	CHECK(want_w > 0, "no decision chose a resident expert");
	CHECK(a.skipped == want_w && a.skipped_bytes == want_b, "nsrouter skipped %" PRIu64
	      " windows (%" PRIu64 " B), expected %" PRIu64 " (%" PRIu64 " B)", a.skipped,
	      a.skipped_bytes, want_w, want_b);
	CHECK(a.prefetched > 0, "nothing prefetched for the experts on disk");
	CHECK(c.skipped == 0 && c.prefetched > 0, "RAM 0: skipped %" PRIu64, c.skipped);
	CHECK(d.decisions > 0 && d.prefetched == 0 && d.skipped > 0, "every expert resident: %"
	      PRIu64 " decisions, yet %" PRIu64 " windows prefetched", d.decisions, d.prefetched);
	CHECK(!strcmp(a.text, b.text) && !strcmp(a.text, c.text) && !strcmp(a.text, d.text),
	      "tokens differ:\n%s\n---\n%s\n---\n%s\n---\n%s", a.text, b.text, c.text, d.text);
	CHECK(a.req_decode == b.req_decode, "bytes requested %" PRIu64 " with nsrouter, %" PRIu64
	      " without", a.req_decode, b.req_decode);
	free(hits);
	free(a.text); free(a.json); free(b.text); free(b.json);
	free(c.text); free(c.json); free(d.text); free(d.json);
	ns_model_close(&m);
	printf("ok\n");
	return 0;
}
