/* test_ram_fill: nsio fills the RAM tier through the arena (issue 6, nsio/ramcache.h).
 *
 * With a tiny --mem-budget (an arena smaller than the model's largest tensor) and a RAM budget
 * that holds every weight (or part of them):
 *   - the largest RAM-resident tensor is larger than the arena and still loads: nsio's line
 *     says every placed byte was filled through leases of at most the arena's size;
 *   - the arena's peak reservation over the whole run (fill included) never exceeds the budget;
 *   - the fill is not per-token traffic: with every weight resident, nsio's bytes requested
 *     and device bytes are 0 for the prompt and for every decoded token;
 *   - logits of a whole sequence (nsctl logits) are bit-identical to a run without RAM cache,
 *     and greedy text is identical.
 *
 * usage: test_ram_fill NSCTL MODEL MEM_BUDGET (MODEL relative to the oracle directory) */
#include "../run/run_testlib.h"
#include "model.h"
#include "ns_util.h"

static unsigned long long s_after(const char *text, const char *key)
{
	const char *p = text ? strstr(text, key) : NULL;
	unsigned long long v = 0;

	RT_CHECK(p && sscanf(p + strlen(key), "%llu", &v) == 1, "no \"%s\" in: %s", key,
		 text ? text : "(nothing)");
	return v;
}

/* nsctl logits on tokens 0..n-1 of the oracle's sequence into out. */
static void s_logits(const char *nsctl, const char *model, const char *toks, const char *mem,
		     const char *ram, const char *out, const char *errf)
{
	char *a[] = { (char *)nsctl, "logits", (char *)model, "--tokens", (char *)toks, "-o",
		      (char *)out, "--mem-budget", (char *)mem, "--ram-budget", (char *)ram, NULL };
	int rc;
	size_t len;
	char *e;

	if (!ram) /* no RAM cache, as run's --ram-budget 0 */
		a[10] = "0";
	rc = rt_run(a, NULL, errf);
	e = ns_test_read_file(errf, &len);
	RT_CHECK(rc == 0, "nsctl logits --ram-budget %s: exit %d: %s", ram ? ram : "(none)", rc,
		 e ? e : "");
	free(e);
}

/* nsctl run greedy; returns the text (malloc'd), stderr in *err_text. */
static char *s_run(const char *nsctl, const char *model, const char *mem, const char *ram,
		   const char *out, const char *errf, char **err_text)
{
	char *a[] = { (char *)nsctl, "run", (char *)model, "-p", "Once upon a time", "-n", "16",
		      "--temp", "0", "--ignore-eos", "--mem-budget", (char *)mem, "--ram-budget",
		      (char *)ram, "-c", "256", "--verbose", "--json", NULL };
	int rc = rt_run(a, out, errf);
	size_t len;
	char *text = ns_test_read_file(out, &len);

	*err_text = ns_test_read_file(errf, &len);
	rt_json_split(&text, err_text); /* the --json object from stdout */
	RT_CHECK(rc == 0 && text && *err_text, "nsctl run --ram-budget %s: exit %d: %s", ram, rc,
		 *err_text ? *err_text : "");
	return text;
}

int main(int argc, char **argv)
{
	char nsctl_buf[PATH_MAX], model[PATH_MAX], sidecar[PATH_MAX];
	char *out, *errf, *la, *lb;
	char toks[512] = "", err[NS_ERR_LEN];
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	const char *rams[] = { "4MB", "200KB" };
	struct ns_model *m = NULL;
	unsigned long long biggest = 0, total = 0, arena;
	char *base_text, *base_err, *json;
	size_t len;
	int64_t ids[64];
	size_t n_ids = 0;

	RT_CHECK(argc == 4, "usage: test_ram_fill NSCTL MODEL MEM_BUDGET");
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), argv[2]);
	RT_CHECK(ns_model_open(model, &m, err, sizeof(err)) == 0, "%s", err);
	for (uint64_t t = 0; t < m->n_tensors; t++) {
		total += m->tensors[t].n_bytes;
		if (m->tensors[t].n_bytes > biggest)
			biggest = m->tensors[t].n_bytes;
	}
	ns_model_close(&m);
	/* the oracle's token sequence, first 8 positions */
	snprintf(sidecar, sizeof(sidecar), "%s", model);
	RT_CHECK(strlen(sidecar) > 5, "model path");
	snprintf(sidecar + strlen(sidecar) - 5, sizeof(sidecar) - strlen(sidecar) + 5,
		 ".seqA.json");
	json = ns_test_read_file(sidecar, &len);
	RT_CHECK(json, "cannot read %s", sidecar);
	RT_CHECK(json_ints(json, "tokens", ids, 64, &n_ids) == 0 && n_ids >= 8,
		 "no tokens in %s", sidecar);
	for (int i = 0; i < 8; i++)
		snprintf(toks + strlen(toks), sizeof(toks) - strlen(toks), "%s%lld", i ? "," : "",
			 (long long)ids[i]);
	free(json);

	atexit(ns_test_scratch_remove);
	out = ns_test_scratch("ns_ram_fill", "out");
	errf = ns_test_scratch("ns_ram_fill", "err");
	la = ns_test_scratch("ns_ram_fill", "a.f32");
	lb = ns_test_scratch("ns_ram_fill", "b.f32");

	base_text = s_run(nsctl, model, argv[3], "0", out, errf, &base_err);
	arena = s_after(strstr(base_err, "{"), "\"arena_budget\":");
	printf("%s: %llu weight bytes, largest tensor %llu bytes, arena %llu bytes\n", argv[2],
	       total, biggest, arena);
	RT_CHECK(biggest > arena, "the largest tensor (%llu) fits the arena (%llu): pick a "
		 "smaller MEM_BUDGET", biggest, arena);
	s_logits(nsctl, model, toks, argv[3], NULL, la, errf);

	for (size_t b = 0; b < sizeof(rams) / sizeof(rams[0]); b++) {
		char *text, *etext, *a, *bb, *line, *js;
		unsigned long long resident, filled, reads, lease, l_arena, peak, budget;
		size_t na = 0, nb = 0;

		text = s_run(nsctl, model, argv[3], rams[b], out, errf, &etext);
		line = strstr(etext, "nsio: RAM tier: plan generation 1:");
		RT_CHECK(line, "no RAM tier line from nsio at --ram-budget %s:\n%s", rams[b], etext);
		resident = s_after(line, "generation 1: ");
		filled = s_after(line, "filled through the arena: ");
		reads = s_after(strstr(line, " bytes in "), " bytes in ");
		lease = s_after(line, "leases of at most ");
		l_arena = s_after(line, "(arena ");
		js = strstr(etext, "{\"session\"");
		RT_CHECK(js, "no JSON summary");
		peak = s_after(js, "\"arena_peak\":");
		budget = s_after(js, "\"arena_budget\":");
		printf("--ram-budget %-6s resident %llu, filled %llu in %llu reads, lease max %llu, "
		       "arena peak %llu of %llu, requested prefill %llu decode %llu\n", rams[b],
		       resident, filled, reads, lease, peak, budget,
		       s_after(js, "\"bytes_requested_prefill\":"),
		       s_after(js, "\"bytes_requested_decode\":"));
		RT_CHECK(filled == resident && resident > 0, "filled %llu != resident %llu", filled,
			 resident);
		RT_CHECK(lease <= l_arena && l_arena == budget && budget == arena,
			 "fill lease %llu over the arena %llu (budget %llu)", lease, l_arena, budget);
		RT_CHECK(peak <= budget, "arena peak %llu over the budget %llu", peak, budget);
		RT_CHECK(reads >= resident / arena, "%llu reads cannot fill %llu bytes in leases of "
			 "%llu", reads, resident, arena);
		if (b == 0) { /* everything resident: the largest tensor (> arena) came in too */
			RT_CHECK(resident == total, "resident %llu of %llu weight bytes", resident,
				 total);
			RT_CHECK(s_after(js, "\"bytes_requested_prefill\":") == 0 &&
				 s_after(js, "\"bytes_requested_decode\":") == 0 &&
				 s_after(js, "\"bytes_device_prefill\":") == 0 &&
				 s_after(js, "\"bytes_device_decode\":") == 0,
				 "the fill was counted as per-token traffic: %s", js);
		}
		RT_CHECK(strcmp(text, base_text) == 0, "text differs at --ram-budget %s:\n%s\nvs "
			 "without RAM cache:\n%s", rams[b], text, base_text);
		s_logits(nsctl, model, toks, argv[3], rams[b], lb, errf);
		a = ns_test_read_file(la, &na);
		bb = ns_test_read_file(lb, &nb);
		RT_CHECK(a && bb && na == nb && na > 0 && memcmp(a, bb, na) == 0,
			 "logits at --ram-budget %s are not bit-identical to a run without RAM "
			 "cache (%zu vs %zu bytes)", rams[b], nb, na);
		printf("  logits of %s: %zu bytes bit-identical to the run without RAM cache\n",
		       toks, na);
		free(a);
		free(bb);
		free(text);
		free(etext);
	}
	free(base_text);
	free(base_err);
	rt_json_used();
	printf("ok\n");
	return 0;
}
