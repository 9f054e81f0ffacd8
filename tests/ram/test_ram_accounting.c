/* test_ram_accounting: the RAM tier and honest accounting (DESIGN.md, Residency).
 *
 * For one dense model, at RAM budgets 0, a tenth, a half and all of the weight bytes a token
 * touches: `nsctl plan --json` predicts the disk bytes per token (per_token.disk_dense, exact),
 * then `nsctl run --temp 0 -n N --json` with the same budgets decodes N tokens. The bytes nsio
 * was asked for while decoding, divided by the decoded tokens, must equal the prediction
 * exactly; the device bytes (aligned reads) are printed beside them; the text must be the
 * same at every budget; and more RAM must never mean more bytes per token.
 *
 * Two gaps between the planner's "touched" and what the forward pass asks nsio for, both
 * checked exactly here and reported beside the prediction (the planner should absorb them):
 *   - norm vectors and other 1-D tensors are read once, at ns_fwd_new, not per token: their
 *     disk bytes are in the prediction but never in a decoded token's requests;
 *   - a tied token_embd on disk is read whole for the output projection and once more by
 *     row for the next token's embedding: one extra row per token.
 * Where both gaps are zero (the norms and the output resident) the measured bytes must equal
 * the plan's prediction itself.
 *
 * usage: test_ram_accounting NSCTL MODEL (MODEL relative to the oracle directory) */
#include "../run/run_testlib.h"

#define S_N_GEN "24"
#define S_MEM "1MB"
#define S_CTX "256"

static unsigned long long s_key_u64(const char *json, const char *key)
{
	char pat[64];
	const char *p;
	unsigned long long v = 0;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = json ? strstr(json, pat) : NULL;
	RT_CHECK(p && sscanf(p + strlen(pat), "%llu", &v) == 1, "no integer \"%s\" in: %s", key,
		 json ? json : "(nothing)");
	return v;
}

/* nsctl plan --json at ram bytes: the exact disk bytes per token and the RAM placed. */
/* Disk bytes of kind in the plan's by_kind, 0 when the kind is absent. */
static unsigned long long s_kind_disk(const char *json, const char *kind)
{
	char pat[64];
	const char *p = strstr(json, "\"by_kind\":");

	snprintf(pat, sizeof(pat), "\"%s\":{", kind);
	p = p ? strstr(p, pat) : NULL;
	return p ? s_key_u64(p, "disk") : 0;
}

/* The gap (see the header): bytes per token the forward pass requests minus the prediction. */
struct s_gap {
	unsigned long long once;    /* 1-D tensors on disk: read once, not per token */
	unsigned long long row;     /* a tied token_embd on disk: one extra row per token */
};

static void s_plan(const char *nsctl, const char *model, unsigned long long ram,
		   const char *out, const char *errf, unsigned long long *disk,
		   unsigned long long *touched, unsigned long long *placed, struct s_gap *gap,
		   unsigned long long tied_row)
{
	char rb[32];
	char *json, *p;
	size_t len;
	int rc;

	snprintf(rb, sizeof(rb), "%llu", ram);
	{
		char *a[] = { (char *)nsctl, "plan", (char *)model, "--mem-budget", S_MEM,
			      "--ram-budget", rb, "--vram-budget", "0", "-c", S_CTX, "--json", NULL };
		rc = rt_run(a, out, errf);
	}
	json = ns_test_read_file(out, &len);
	RT_CHECK(rc == 0 && json, "nsctl plan --ram-budget %s: exit %d", rb, rc);
	p = strstr(json, "\"per_token\":");
	RT_CHECK(p, "no per_token in the plan");
	*disk = s_key_u64(p, "disk_dense");
	*touched = s_key_u64(p, "touched_dense");
	RT_CHECK(s_key_u64(p, "disk_expert_bytes") == 0, "not a dense model");
	p = strstr(json, "\"placed\":");
	*placed = s_key_u64(p, "ram");
	gap->once = s_kind_disk(json, "norm") + s_kind_disk(json, "vector");
	gap->row = s_kind_disk(json, "output") ? tied_row : 0;
	free(json);
}

/* Row bytes of token_embd.weight when the model ties it to the output, else 0. */
static unsigned long long s_tied_row(const char *nsctl, const char *model, const char *out,
				     const char *errf)
{
	char *json, *p;
	size_t len;
	unsigned long long ne0 = 0, ne1 = 0, bytes, row = 0;
	int rc;

	{
		char *a[] = { (char *)nsctl, "info", (char *)model, "--json", "--tensors", NULL };
		rc = rt_run(a, out, errf);
	}
	json = ns_test_read_file(out, &len);
	RT_CHECK(rc == 0 && json, "nsctl info --json: exit %d", rc);
	if (strstr(json, "\"tied_embeddings\":true")) {
		p = strstr(json, "\"name\":\"token_embd.weight\"");
		RT_CHECK(p, "tied, but no token_embd.weight");
		p = strstr(p, "\"ne\":[");
		RT_CHECK(p && sscanf(p + 6, "%llu,%llu", &ne0, &ne1) == 2 && ne1, "no ne");
		bytes = s_key_u64(p, "bytes");
		RT_CHECK(bytes % ne1 == 0, "token_embd bytes %llu not whole rows", bytes);
		row = bytes / ne1;
	}
	free(json);
	return row;
}

int main(int argc, char **argv)
{
	char nsctl_buf[PATH_MAX], model[PATH_MAX], out[128], errf[128];
	const char *nsctl = rt_nsctl(argc, argv, nsctl_buf, sizeof(nsctl_buf));
	unsigned long long disk, touched, placed, budgets[4], prev = ~0ull, tied_row;
	char *first_text = NULL;
	struct s_gap gap;
	int exact = 0;

	RT_CHECK(argc == 3, "usage: test_ram_accounting NSCTL MODEL");
	ns_test_require_oracle();
	ns_test_oracle_path(model, sizeof(model), argv[2]);
	snprintf(out, sizeof(out), "/tmp/ns_ram_acct_%d.out", (int)getpid());
	snprintf(errf, sizeof(errf), "/tmp/ns_ram_acct_%d.err", (int)getpid());
	tied_row = s_tied_row(nsctl, model, out, errf);
	s_plan(nsctl, model, 0, out, errf, &disk, &touched, &placed, &gap, tied_row);
	budgets[0] = 0;
	budgets[1] = touched / 10;
	budgets[2] = touched / 2;
	budgets[3] = touched * 2;
	printf("%s: %llu weight bytes touched per token\n", argv[2], touched);
	printf("%12s %12s %14s %10s %10s %14s %14s %14s\n", "ram_budget", "ram_placed",
	       "predicted/tok", "-once", "+tied_row", "requested/tok", "device/tok",
	       "total-resident");
	for (int i = 0; i < 4; i++) {
		char rb[32], *res, *text;
		unsigned long long req, dev, n_dec;
		size_t len;
		int rc;

		s_plan(nsctl, model, budgets[i], out, errf, &disk, &touched, &placed, &gap,
		       tied_row);
		snprintf(rb, sizeof(rb), "%llu", budgets[i]);
		{
			char *a[] = { (char *)nsctl, "run", model, "-p", "Once upon a time", "-n",
				      S_N_GEN, "--temp", "0", "--mem-budget", S_MEM, "--ram-budget",
				      rb, "-c", S_CTX, "--json", NULL };
			rc = rt_run(a, out, errf);
		}
		text = ns_test_read_file(out, &len);
		res = ns_test_read_file(errf, &len);
		if (rc != 0)
			fprintf(stderr, "--- nsctl run stderr ---\n%s------\n", res ? res : "");
		RT_CHECK(rc == 0 && text && res, "nsctl run --ram-budget %s: exit %d", rb, rc);
		RT_CHECK(!strstr(res, "no RAM tier"), "nsio had no RAM tier:\n%s", res);
		n_dec = s_key_u64(strstr(res, "{\"session\""), "n_decode");
		req = s_key_u64(strstr(res, "{\"session\""), "bytes_requested_decode");
		dev = s_key_u64(strstr(res, "{\"session\""), "bytes_device_decode");
		RT_CHECK(n_dec > 0, "nothing decoded");
		printf("%12llu %12llu %14llu %10llu %10llu %14.1f %14.1f %14llu\n", budgets[i],
		       placed, disk, gap.once, gap.row, (double)req / n_dec, (double)dev / n_dec,
		       touched - placed);
		RT_CHECK(req == (disk - gap.once + gap.row) * n_dec, "RAM budget %llu: %llu bytes "
			 "requested over %llu decoded tokens, the plan predicts %llu per token "
			 "(- %llu read once + %llu tied row)", budgets[i], req, n_dec, disk,
			 gap.once, gap.row);
		if (!gap.once && !gap.row) {
			RT_CHECK(req == disk * n_dec, "not the plan's prediction");
			exact++;
		}
		RT_CHECK(disk <= prev, "more RAM predicted more disk bytes per token");
		prev = disk;
		if (!first_text)
			first_text = text;
		else {
			RT_CHECK(!strcmp(first_text, text), "text differs at RAM budget %llu:\n"
				 "'%s'\nvs '%s'", budgets[i], text, first_text);
			free(text);
		}
		free(res);
	}
	RT_CHECK(placed > 0, "nothing was placed in RAM at the largest budget");
	RT_CHECK(exact >= 2, "only %d budgets without a gap", exact);
	printf("bytes requested per decoded token == the plan's prediction at every RAM budget; "
	       "same text at every budget\n");
	free(first_text);
	unlink(out);
	unlink(errf);
	return 0;
}
