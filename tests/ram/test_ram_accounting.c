/* test_ram_accounting: the RAM tier and honest accounting (DESIGN.md, Residency).
 *
 * For one dense model, at several RAM budgets: `nsctl plan --json --windows` predicts the
 * disk bytes per decoded token (per_token.disk_dense) and lists every window with its tier;
 * then `nsctl run --temp 0 -n N --json` with the same budgets decodes N tokens. At EVERY
 * budget, with no correction term:
 *   bytes nsio was asked for while decoding / decoded tokens == the prediction
 *                                                          == the figure recomputed here,
 * where the figure recomputed here comes from the GGUF tensor list (shapes and names) and the
 * plan's windows alone: every disk window of a tensor the forward pass requests per token
 * (not a held one: a tensor of one row - norms, biases - is copied once at start and kept),
 * one row of an untied token_embd on disk, and a tied token_embd on disk whole (the logits)
 * plus one row (the embedding lookup). The held bytes on disk (per_token.held_disk) must be
 * the held tensors' disk windows. The device bytes (aligned reads) are printed beside them;
 * the text must be the same at every budget; more RAM never means more bytes per token.
 * The budgets include 0 (every norm on disk), exactly the attention matrices, and the largest
 * budget below the one at which the output projection fits whole (a tied embedding stays on
 * disk with its lookup row) - the budgets where the plan and the forward pass used to differ.
 *
 * usage: test_ram_accounting NSCTL MODEL (MODEL relative to the oracle directory) */
#include "../run/run_testlib.h"

#include "model.h"
#include "ns_util.h"

#define S_N_GEN "24"
#define S_MEM "1MB"
#define S_CTX "256"
#define S_MAX_BUDGETS 8

static unsigned long long s_key_u64(const char *json, const char *key)
{
	char pat[64];
	const char *p;
	unsigned long long v = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = json ? strstr(json, pat) : NULL;
	RT_CHECK(p && sscanf(p + strlen(pat), "%llu", &v) == 1, "no integer \"%s\" in: %.300s", key,
		 json ? json : "(nothing)");
	return v;
}

/* A tensor the forward pass copies once at start (one row: norms, biases, sinks). */
static bool s_held(const struct ns_model_tensor *t)
{
	for (uint32_t d = 1; d < t->n_dims; d++)
		if (t->ne[d] != 1)
			return false;
	return true;
}

/* Recompute from the plan's windows: per-token bytes and the held bytes on disk. */
static void s_hand(const struct ns_model *m, bool tied, const char *json,
		   unsigned long long *per_token, unsigned long long *held_disk)
{
	const char *p = strstr(json, "\"windows\":");

	*per_token = *held_disk = 0;
	RT_CHECK(p, "no windows in the plan (--windows)");
	while ((p = strstr(p, "{\"tensor\":\""))) {
		char name[128];
		unsigned long long a, b;
		const struct ns_model_tensor *t;
		const char *r, *tier;

		p += strlen("{\"tensor\":\"");
		RT_CHECK(sscanf(p, "%127[^\"]", name) == 1, "bad window near %.80s", p);
		r = strstr(p, "\"rows\":[");
		tier = strstr(p, "\"tier\":\"");
		RT_CHECK(r && tier && sscanf(r + 8, "%llu,%llu", &a, &b) == 2 && a <= b,
			 "bad window of %s", name);
		t = ns_model_find(m, name);
		RT_CHECK(t && b <= t->n_rows, "window of unknown tensor %s", name);
		if (strncmp(tier + 8, "disk\"", 5))
			continue;
		if (s_held(t))
			*held_disk += (b - a) * t->row_bytes;
		else if (!strcmp(name, "token_embd.weight") && !tied)
			*per_token += t->row_bytes; /* one row by lookup (placed whole or not) */
		else if (!strcmp(name, "token_embd.weight"))
			*per_token += (b - a) * t->row_bytes + t->row_bytes; /* logits + lookup */
		else
			*per_token += (b - a) * t->row_bytes;
	}
}

static int s_cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

/* nsctl plan --json --windows at ram bytes. Returns the JSON (caller frees). */
static char *s_plan(const char *nsctl, const char *model, unsigned long long ram,
		    const char *out, const char *errf)
{
	char rb[32], *json;
	size_t len;
	int rc;

	snprintf(rb, sizeof(rb), "%llu", ram);
	{
		char *a[] = { (char *)nsctl, "plan", (char *)model, "--mem-budget", S_MEM,
			      "--ram-budget", rb, "--vram-budget", "0", "-c", S_CTX, "--json",
			      "--windows", NULL };
		rc = rt_run(a, out, errf);
	}
	json = ns_test_read_file(out, &len);
	RT_CHECK(rc == 0 && json && strstr(json, "\"per_token\":"), "nsctl plan --ram-budget %s: "
		 "exit %d", rb, rc);
	RT_CHECK(s_key_u64(strstr(json, "\"per_token\":"), "disk_expert_bytes") == 0,
		 "not a dense model");
	return json;
}

int main(int argc, char **argv)
{
	char nsctl_buf[PATH_MAX], model[PATH_MAX], *out, *errf, err[NS_ERR_LEN];
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	unsigned long long budgets[S_MAX_BUDGETS], prev = ~0ull, total = 0, attn = 0, output = 0;
	unsigned long long n_tied_disk = 0, n_once = 0;
	struct ns_model *m = NULL;
	char *first_text = NULL;
	bool tied;
	int nb = 0;

	RT_CHECK(argc == 3, "usage: test_ram_accounting NSCTL MODEL");
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), argv[2]);
	atexit(ns_test_scratch_remove); /* also when a check fails */
	out = ns_test_scratch("ns_ram_acct", "out");
	errf = ns_test_scratch("ns_ram_acct", "err");
	RT_CHECK(ns_model_open(model, &m, err, sizeof(err)) == 0, "%s", err);
	tied = ns_model_find(m, "output.weight") == NULL;
	for (uint64_t i = 0; i < m->n_tensors; i++) {
		const struct ns_model_tensor *t = &m->tensors[i];

		total += t->n_bytes;
		if (strstr(t->name, "attn_") && !s_held(t))
			attn += t->n_bytes;
		if (!strcmp(t->name, tied ? "token_embd.weight" : "output.weight"))
			output = t->n_bytes;
	}
	budgets[nb++] = 0;                    /* every norm on disk, read once at start */
	budgets[nb++] = attn;                 /* the attention matrices exactly */
	budgets[nb++] = attn + output - 1;    /* the output projection one byte short */
	budgets[nb++] = attn + output;        /* ... and whole */
	budgets[nb++] = total / 10;
	budgets[nb++] = total / 2;
	budgets[nb++] = total * 2;            /* everything resident */
	qsort(budgets, (size_t)nb, sizeof(budgets[0]), s_cmp_ull);
	printf("%s: %llu weight bytes, %s embeddings, attention %llu, output %llu\n", argv[2],
	       total, tied ? "tied" : "untied", attn, output);
	printf("%12s %12s %14s %14s %14s %10s %14s %14s\n", "ram_budget", "ram_placed",
	       "predicted/tok", "hand/tok", "requested/tok", "once", "device/tok",
	       "total-resident");
	for (int i = 0; i < nb; i++) {
		char rb[32], *res, *text, *json = s_plan(nsctl, model, budgets[i], out, errf);
		const char *pt = strstr(json, "\"per_token\":");
		unsigned long long disk = s_key_u64(pt, "disk_dense");
		unsigned long long held_disk = s_key_u64(pt, "held_disk");
		unsigned long long tied_row = s_key_u64(pt, "tied_row");
		unsigned long long placed = s_key_u64(strstr(json, "\"placed\":"), "ram");
		unsigned long long hand, hand_held, req, dev, n_dec;
		size_t len;
		int rc;

		s_hand(m, tied, json, &hand, &hand_held);
		free(json);
		snprintf(rb, sizeof(rb), "%llu", budgets[i]);
		{
			char *a[] = { (char *)nsctl, "run", model, "-p", "Once upon a time", "-n",
				      S_N_GEN, "--temp", "0", "--mem-budget", S_MEM, "--ram-budget",
				      rb, "-c", S_CTX, "--json", NULL };
			rc = rt_run(a, out, errf);
		}
		text = ns_test_read_file(out, &len);
		res = ns_test_read_file(errf, &len);
		rt_json_split(&text, &res); /* the --json object from stdout */
		if (rc != 0)
			fprintf(stderr, "--- nsctl run stderr ---\n%s------\n", res ? res : "");
		RT_CHECK(rc == 0 && text && res, "nsctl run --ram-budget %s: exit %d", rb, rc);
		RT_CHECK(!strstr(res, "no RAM tier"), "nsio had no RAM tier:\n%s", res);
		n_dec = s_key_u64(strstr(res, "{\"session\""), "n_decode");
		req = s_key_u64(strstr(res, "{\"session\""), "bytes_requested_decode");
		dev = s_key_u64(strstr(res, "{\"session\""), "bytes_device_decode");
		RT_CHECK(n_dec > 0, "nothing decoded");
		printf("%12llu %12llu %14llu %14llu %14.1f %10llu %14.1f %14llu\n", budgets[i],
		       placed, disk, hand, (double)req / n_dec, held_disk, (double)dev / n_dec,
		       total - placed);
		RT_CHECK(disk == hand, "RAM budget %llu: the plan predicts %llu bytes per token, "
			 "recomputed from its windows %llu", budgets[i], disk, hand);
		RT_CHECK(held_disk == hand_held, "RAM budget %llu: held on disk %llu, recomputed "
			 "%llu", budgets[i], held_disk, hand_held);
		RT_CHECK(req == disk * n_dec, "RAM budget %llu: %llu bytes requested over %llu "
			 "decoded tokens (%.1f per token), the plan predicts %llu per token",
			 budgets[i], req, n_dec, (double)req / n_dec, disk);
		RT_CHECK(disk <= prev, "more RAM predicted more disk bytes per token");
		prev = disk;
		n_tied_disk += tied_row != 0;
		n_once += held_disk != 0;
		if (!first_text)
			first_text = text;
		else {
			RT_CHECK(!strcmp(first_text, text), "text differs at RAM budget %llu:\n"
				 "'%s'\nvs '%s'", budgets[i], text, first_text);
			free(text);
		}
		free(res);
	}
	RT_CHECK(prev == 0 || !tied, "everything resident, still %llu bytes per token", prev);
	RT_CHECK(n_once >= 2, "only %llu budgets left held tensors on disk", n_once);
	RT_CHECK(!tied || n_tied_disk >= 2, "only %llu budgets left the tied embedding on disk",
		 n_tied_disk);
	printf("bytes requested per decoded token == the plan's prediction == the figure "
	       "recomputed from its windows at every RAM budget; same text at every budget\n");
	free(first_text);
	ns_model_close(&m);
	return 0;
}
