/* test_table: bench statistics and the md/json/csv tables (llama-bench conventions). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"
#include "table.h"

static char *s_render(enum ns_table_fmt fmt, const struct ns_bench_row *rows, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(ns_table_print(f, fmt, rows, n), 0);
	fclose(f);
	return buf;
}

static void s_row(struct ns_bench_row *r)
{
	ns_bench_row_init(r);
	snprintf(r->model, sizeof(r->model), "qwen3 8B Q4_K - Medium");
	snprintf(r->backend, sizeof(r->backend), "CPU");
	r->size_bytes = 3ull << 30;
	r->n_params = 8190735360ull;
	r->n_gen = 128;
	r->mem_budget = 256ull << 20;
	r->n_samples = 3;
	r->ts[0] = 10;
	r->ts[1] = 12;
	r->ts[2] = 14;
	r->bytes_per_token = 1.5e9; /* roofline 2 t/s at 3 GB/s */
	r->req_bytes_per_token = 1.375e9;
	r->plan_bytes_per_token = 1.25e9;
	r->disk_bps = 3e9;
	r->stall_ms_per_token = 1.25;
	r->arena_peak = 200.0 * 1024 * 1024;
	r->cache_hit_rate = 0.5;
}

START_TEST(mean_sd_median)
{
	const double a[] = { 10, 12, 14 }, b[] = { 1, 2, 3, 4 }, c[] = { 5, 1, 3 };
	double m, sd;

	ns_stats_mean_sd(a, 3, &m, &sd);
	ck_assert_double_eq_tol(m, 12, 1e-12);
	ck_assert_double_eq_tol(sd, 2, 1e-12); /* sample sd, divisor n - 1 */
	ns_stats_mean_sd(b, 4, &m, &sd);
	ck_assert_double_eq_tol(m, 2.5, 1e-12);
	ck_assert_double_eq_tol(sd, 1.2909944487358056, 1e-12);
	ns_stats_mean_sd(a, 1, &m, &sd);
	ck_assert_double_eq_tol(m, 10, 1e-12);
	ck_assert_double_eq_tol(sd, 0, 1e-15);
	ns_stats_mean_sd(a, 0, &m, &sd);
	ck_assert_double_eq_tol(m, 0, 1e-15);
	ck_assert_int_eq(ns_stats_median(c, 3, &m), 0);
	ck_assert_double_eq_tol(m, 3, 1e-15);
	ck_assert_int_eq(ns_stats_median(b, 4, &m), 0);
	ck_assert_double_eq_tol(m, 2.5, 1e-15);
	ck_assert_int_ne(ns_stats_median(b, 0, &m), 0);
}
END_TEST

START_TEST(large_values_no_cancellation)
{
	const double a[] = { 1e9 + 1, 1e9 + 2, 1e9 + 3 };
	double m, sd;

	ns_stats_mean_sd(a, 3, &m, &sd);
	ck_assert_double_eq_tol(sd, 1, 1e-6);
}
END_TEST

START_TEST(markdown)
{
	struct ns_bench_row r[2];
	char *out, *line2;

	s_row(&r[0]);
	s_row(&r[1]);
	r[1].n_gen = 0;
	r[1].n_prompt = 512;
	r[1].bytes_per_token = -1; /* unknown: no roofline */
	out = s_render(NS_TABLE_MD, r, 2);
	ck_assert_msg(!strncmp(out, "| model ", 8), "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "| size "));
	ck_assert_ptr_nonnull(strstr(out, "| params "));
	ck_assert_ptr_nonnull(strstr(out, "| backend "));
	ck_assert_ptr_nonnull(strstr(out, "| test "));
	ck_assert_ptr_nonnull(strstr(out, "| t/s "));
	ck_assert_ptr_null(strstr(out, "block rows")); /* no row sets it */
	line2 = strchr(out, '\n') + 1;
	ck_assert_msg(!strncmp(line2, "| ---", 5), "%s", out);
	ck_assert_ptr_nonnull(strstr(line2, ": |")); /* numeric columns right-aligned */
	ck_assert_ptr_nonnull(strstr(out, "12.00 ± 2.00"));
	ck_assert_ptr_nonnull(strstr(out, "3.00 GiB"));
	ck_assert_ptr_nonnull(strstr(out, "8.19 B"));
	ck_assert_ptr_nonnull(strstr(out, "mem 256M"));
	ck_assert_ptr_nonnull(strstr(out, "tg128"));
	ck_assert_ptr_nonnull(strstr(out, "pp512"));
	/* GB/tok, req GB/tok, plan GB/tok */
	ck_assert_ptr_nonnull(strstr(out, " 1.500 |      1.375 |       1.250 |"));
	ck_assert_ptr_nonnull(strstr(out, " 200.0 MiB |"));
	ck_assert_ptr_nonnull(strstr(out, " 50.0 |"));
	ck_assert_ptr_nonnull(strstr(out, " 2.00 |  6.00 |")); /* roofline 2 t/s, ratio 12/2 */
	/* every line has the same number of columns */
	{
		int bars = -1;
		for (char *l = out; *l; ) {
			char *e = strchr(l, '\n');
			int k = 0;
			for (char *p = l; p < e; p++)
				k += *p == '|';
			if (bars < 0)
				bars = k;
			ck_assert_int_eq(k, bars);
			l = e + 1;
		}
	}
	free(out);
	r[1].block_rows = 64;
	out = s_render(NS_TABLE_MD, r, 2);
	ck_assert_ptr_nonnull(strstr(out, "block rows"));
	free(out);
}
END_TEST

START_TEST(json)
{
	struct ns_bench_row r;
	char *out;

	s_row(&r);
	snprintf(r.model, sizeof(r.model), "a \"quoted\" name");
	r.cache_hit_rate = -1;
	out = s_render(NS_TABLE_JSON, &r, 1);
	ck_assert_msg(out[0] == '[', "%s", out);
	ck_assert_ptr_nonnull(strstr(out, "\"model_type\": \"a \\\"quoted\\\" name\""));
	ck_assert_ptr_nonnull(strstr(out, "\"model_size\": 3221225472"));
	ck_assert_ptr_nonnull(strstr(out, "\"n_gen\": 128"));
	ck_assert_ptr_nonnull(strstr(out, "\"avg_ts\": 12,"));
	ck_assert_ptr_nonnull(strstr(out, "\"stddev_ts\": 2,"));
	ck_assert_ptr_nonnull(strstr(out, "\"samples_ts\": [10, 12, 14]"));
	ck_assert_ptr_nonnull(strstr(out, "\"cache_hit_rate\": null"));
	ck_assert_ptr_nonnull(strstr(out, "\"plan_bytes_per_token\": 1250000000,"));
	ck_assert_ptr_nonnull(strstr(out, "\"req_bytes_per_token\": 1375000000,"));
	ck_assert_ptr_nonnull(strstr(out, "\"roofline_ts\": 2,"));
	ck_assert_ptr_nonnull(strstr(out, "\"roofline_ratio\": 6,"));
	/* a teacher-forced row: no drafter, its figures unknown */
	ck_assert_ptr_nonnull(strstr(out, "\"draft\": \"\", \"drafted\": null, \"accepted\": "
				      "null, \"accept_rate\": null, \"passes_per_token\": null}"));
	free(out);
	r.n_depth = 512; /* llama-bench's label and column for a test after 512 tokens */
	out = s_render(NS_TABLE_JSON, &r, 1);
	ck_assert_ptr_nonnull(strstr(out, "\"n_depth\": 512,"));
	ck_assert_ptr_nonnull(strstr(out, "\"test\": \"tg128 @ d512\","));
	free(out);
	out = s_render(NS_TABLE_JSON, &r, 0);
	ck_assert_str_eq(out, "[]\n");
	free(out);
}
END_TEST

START_TEST(csv)
{
	struct ns_bench_row r;
	char *out, *l2;

	s_row(&r);
	snprintf(r.model, sizeof(r.model), "x,\"y\"");
	out = s_render(NS_TABLE_CSV, &r, 1);
	ck_assert_msg(!strncmp(out, "model_type,model_size,model_n_params,", 37), "%s", out);
	l2 = strchr(out, '\n') + 1;
	ck_assert_msg(!strncmp(l2, "\"x,\"\"y\"\"\",3221225472,8190735360,\"CPU\",0,128,0,\"tg128\"",
			       52), "%s", l2);
	ck_assert_ptr_nonnull(strstr(l2, ",\"10 12 14\","));
	ck_assert_int_eq(l2[strlen(l2) - 1], '\n');
	free(out);
}
END_TEST

/* speculative rows: the drafter's columns beside t/s and the roofline, in all three formats */
START_TEST(draft_columns)
{
	struct ns_bench_row r[2];
	char *out;

	s_row(&r[0]);
	s_row(&r[1]);
	snprintf(r[0].draft, sizeof(r[0].draft), "none");
	r[0].passes_per_token = 1;
	r[0].drafted = r[0].accepted = 0;
	snprintf(r[1].draft, sizeof(r[1].draft), "oracle:0.80");
	r[1].drafted = 40;
	r[1].accepted = 30;
	r[1].passes_per_token = 0.375;
	out = s_render(NS_TABLE_MD, r, 2);
	for (const char *h = "draft\0drafted\0accepted\0accept %\0passes/tok\0"; *h;
	     h += strlen(h) + 1)
		ck_assert_msg(strstr(out, h) != NULL, "%s: %s", h, out);
	ck_assert_msg(strstr(out, "| oracle:0.80 |") != NULL, "%s", out);
	/* drafted, accepted, 75 %, passes per token */
	ck_assert_msg(strstr(out, "|    40.0 |     30.0 |     75.0 |      0.375 |") != NULL, "%s",
		      out);
	/* nothing drafted: no rate */
	ck_assert_msg(strstr(out, "|     0.0 |      0.0 |        - |      1.000 |") != NULL, "%s",
		      out);
	free(out);
	out = s_render(NS_TABLE_JSON, &r[1], 1);
	ck_assert_msg(strstr(out, "\"draft\": \"oracle:0.80\", \"drafted\": 40, \"accepted\": 30, "
			      "\"accept_rate\": 0.75, \"passes_per_token\": 0.375}") != NULL, "%s", out);
	free(out);
	out = s_render(NS_TABLE_CSV, &r[1], 1);
	ck_assert_msg(strstr(out, ",draft,drafted,accepted,accept_rate,passes_per_token\n") != NULL,
		      "%s", out);
	ck_assert_msg(strstr(out, ",\"oracle:0.80\",40,30,0.75,0.375\n") != NULL, "%s", out);
	free(out);
	/* no row with a drafter: no draft columns */
	r[0].draft[0] = r[1].draft[0] = 0;
	out = s_render(NS_TABLE_MD, r, 2);
	ck_assert_ptr_null(strstr(out, "passes/tok"));
	free(out);
}
END_TEST

START_TEST(parse_fmt)
{
	enum ns_table_fmt f;

	ck_assert_int_eq(ns_table_parse_fmt("md", &f), 0);
	ck_assert_int_eq(f, NS_TABLE_MD);
	ck_assert_int_eq(ns_table_parse_fmt("json", &f), 0);
	ck_assert_int_eq(f, NS_TABLE_JSON);
	ck_assert_int_eq(ns_table_parse_fmt("csv", &f), 0);
	ck_assert_int_eq(f, NS_TABLE_CSV);
	ck_assert_int_ne(ns_table_parse_fmt("xml", &f), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bench_table");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int nf;

	tcase_add_test(tc, mean_sd_median);
	tcase_add_test(tc, large_values_no_cancellation);
	tcase_add_test(tc, markdown);
	tcase_add_test(tc, json);
	tcase_add_test(tc, csv);
	tcase_add_test(tc, draft_columns);
	tcase_add_test(tc, parse_fmt);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	nf = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nf ? 1 : 0;
}
