/* table.c - bench results as markdown, JSON or CSV. See table.h. */
#include "table.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ns_util.h"
#include "stats.h"

#define S_MAX_COLS 24
#define S_CELL 64

int ns_table_parse_fmt(const char *s, enum ns_table_fmt *fmt)
{
	if (!strcmp(s, "md"))
		*fmt = NS_TABLE_MD;
	else if (!strcmp(s, "json"))
		*fmt = NS_TABLE_JSON;
	else if (!strcmp(s, "csv"))
		*fmt = NS_TABLE_CSV;
	else
		return -EINVAL;
	return 0;
}

void ns_bench_row_init(struct ns_bench_row *r)
{
	memset(r, 0, sizeof(*r));
	r->bytes_per_token = -1;
	r->req_bytes_per_token = -1;
	r->plan_bytes_per_token = -1;
	r->stall_ms_per_token = -1;
	r->arena_peak = -1;
	r->cache_hit_rate = -1;
	r->predict_hit_rate = -1;
	r->disk_bps = -1;
	r->drafted = r->accepted = r->passes_per_token = -1;
}

double ns_bench_row_accept_rate(const struct ns_bench_row *r)
{
	if (!r->draft[0] || !(r->drafted > 0) || r->accepted < 0)
		return -1;
	return r->accepted / r->drafted;
}

char *ns_bench_row_test(const struct ns_bench_row *r, char *buf, size_t len)
{
	if (r->n_gen && r->n_depth)
		snprintf(buf, len, "tg%u @ d%u", r->n_gen, r->n_depth);
	else if (r->n_gen)
		snprintf(buf, len, "tg%u", r->n_gen);
	else
		snprintf(buf, len, "pp%u", r->n_prompt);
	return buf;
}

double ns_bench_row_roofline(const struct ns_bench_row *r)
{
	if (!(r->disk_bps > 0) || !(r->bytes_per_token > 0))
		return -1;
	return r->disk_bps / r->bytes_per_token;
}

/* ---- cell formatting ---- */

/* "256M", "1G", "1536K", "4097" (binary units, exact multiples only). */
static void s_short_bytes(uint64_t b, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	while (b && b % 1024 == 0 && u < 3) {
		b /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64, b);
	else
		snprintf(buf, len, "%" PRIu64 "%c", b, units[u]);
}

static void s_budgets(const struct ns_bench_row *r, char *buf, size_t len)
{
	static const char *const names[] = { "mem", "ram", "vram" };
	const uint64_t v[] = { r->mem_budget, r->ram_budget, r->vram_budget };
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < NS_ARRAY_LEN(v); i++) {
		char b[32];
		int k;

		if (!v[i])
			continue;
		s_short_bytes(v[i], b, sizeof(b));
		k = snprintf(buf + used, len - used, "%s%s %s", used ? " " : "", names[i], b);
		if (k < 0 || (size_t)k >= len - used)
			break;
		used += (size_t)k;
	}
	if (!used)
		snprintf(buf, len, "-");
}

static void s_num(double v, const char *fmt, char *buf, size_t len)
{
	if (v < 0 || isnan(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, fmt, v);
}

static void s_params(uint64_t n, char *buf, size_t len)
{
	if (n >= 1000000000ull)
		snprintf(buf, len, "%.2f B", (double)n / 1e9);
	else
		snprintf(buf, len, "%.2f M", (double)n / 1e6);
}

/* ---- markdown ---- */

struct col {
	const char *head;
	bool right;
};

static int s_print_md(FILE *f, const struct ns_bench_row *rows, size_t n)
{
	struct col cols[S_MAX_COLS];
	size_t nc = 0, width[S_MAX_COLS] = { 0 };
	bool want_rows = false, want_la = false, want_pred = false, want_draft = false;
	char (*cell)[S_MAX_COLS][S_CELL];
	int ret = 0;

	for (size_t i = 0; i < n; i++) {
		want_rows |= rows[i].block_rows != 0;
		want_la |= rows[i].lookahead != 0;
		want_pred |= rows[i].predict_hit_rate >= 0;
		want_draft |= rows[i].draft[0] != 0;
	}
#define COL(h, r) (cols[nc++] = (struct col){ (h), (r) })
	COL("model", false);
	COL("size", true);
	COL("params", true);
	COL("backend", false);
	COL("budgets", false);
	if (want_rows)
		COL("block rows", true);
	if (want_la)
		COL("lookahead", true);
	COL("test", false);
	if (want_draft)
		COL("draft", false);
	COL("t/s", true);
	COL("GB/tok", true);
	COL("req GB/tok", true);
	COL("plan GB/tok", true);
	COL("stall ms/tok", true);
	COL("arena peak", true);
	COL("hit %", true);
	if (want_pred)
		COL("pred hit %", true);
	COL("roofline t/s", true);
	COL("ratio", true);
	if (want_draft) {
		COL("drafted", true);
		COL("accepted", true);
		COL("accept %", true);
		COL("passes/tok", true);
	}
#undef COL
	cell = calloc(n + 1, sizeof(*cell));
	if (!cell)
		return -ENOMEM;
	for (size_t c = 0; c < nc; c++)
		snprintf(cell[0][c], S_CELL, "%s", cols[c].head);
	for (size_t i = 0; i < n; i++) {
		const struct ns_bench_row *r = &rows[i];
		char (*row)[S_CELL] = cell[i + 1];
		double mean, sd, roof = ns_bench_row_roofline(r);
		size_t c = 0;

		ns_stats_mean_sd(r->ts, r->n_samples, &mean, &sd);
		snprintf(row[c++], S_CELL, "%s", r->model);
		snprintf(row[c++], S_CELL, "%.2f GiB", (double)r->size_bytes / (1024.0 * 1024 * 1024));
		s_params(r->n_params, row[c++], S_CELL);
		snprintf(row[c++], S_CELL, "%s", r->backend);
		s_budgets(r, row[c++], S_CELL);
		if (want_rows)
			s_num(r->block_rows ? r->block_rows : -1.0, "%.0f", row[c++], S_CELL);
		if (want_la)
			s_num(r->lookahead ? r->lookahead : -1.0, "%.0f", row[c++], S_CELL);
		ns_bench_row_test(r, row[c++], S_CELL);
		if (want_draft)
			snprintf(row[c++], S_CELL, "%s", r->draft[0] ? r->draft : "-");
		if (r->n_samples)
			snprintf(row[c++], S_CELL, "%.2f ± %.2f", mean, sd);
		else
			snprintf(row[c++], S_CELL, "-");
		s_num(r->bytes_per_token < 0 ? -1 : r->bytes_per_token / 1e9, "%.3f", row[c++], S_CELL);
		s_num(r->req_bytes_per_token < 0 ? -1 : r->req_bytes_per_token / 1e9, "%.3f",
		      row[c++], S_CELL);
		s_num(r->plan_bytes_per_token < 0 ? -1 : r->plan_bytes_per_token / 1e9, "%.3f",
		      row[c++], S_CELL);
		s_num(r->stall_ms_per_token, "%.2f", row[c++], S_CELL);
		s_num(r->arena_peak < 0 ? -1 : r->arena_peak / (1024.0 * 1024), "%.1f MiB", row[c++],
		      S_CELL);
		s_num(r->cache_hit_rate < 0 ? -1 : 100 * r->cache_hit_rate, "%.1f", row[c++], S_CELL);
		if (want_pred)
			s_num(r->predict_hit_rate < 0 ? -1 : 100 * r->predict_hit_rate, "%.1f",
			      row[c++], S_CELL);
		s_num(roof, "%.2f", row[c++], S_CELL);
		s_num(roof > 0 && r->n_samples ? mean / roof : -1, "%.2f", row[c++], S_CELL);
		if (want_draft) {
			double acc = ns_bench_row_accept_rate(r);

			s_num(r->draft[0] ? r->drafted : -1, "%.1f", row[c++], S_CELL);
			s_num(r->draft[0] ? r->accepted : -1, "%.1f", row[c++], S_CELL);
			s_num(acc < 0 ? -1 : 100 * acc, "%.1f", row[c++], S_CELL);
			s_num(r->draft[0] ? r->passes_per_token : -1, "%.3f", row[c++], S_CELL);
		}
	}
	/* widths in characters: "±" is two bytes of UTF-8 and one column */
	for (size_t i = 0; i <= n; i++) {
		for (size_t c = 0; c < nc; c++) {
			size_t w = 0;
			for (const unsigned char *p = (const unsigned char *)cell[i][c]; *p; p++)
				w += (*p & 0xc0) != 0x80;
			if (w > width[c])
				width[c] = w;
		}
	}
	for (size_t i = 0; i <= n; i++) {
		for (size_t c = 0; c < nc; c++) {
			size_t w = 0;
			for (const unsigned char *p = (const unsigned char *)cell[i][c]; *p; p++)
				w += (*p & 0xc0) != 0x80;
			if (cols[c].right && i)
				fprintf(f, "| %*s%s ", (int)(width[c] - w), "", cell[i][c]);
			else
				fprintf(f, "| %s%*s ", cell[i][c], (int)(width[c] - w), "");
		}
		fprintf(f, "|\n");
		if (i == 0) {
			for (size_t c = 0; c < nc; c++) {
				fputs("| ", f);
				for (size_t k = 0; k + 1 < width[c]; k++)
					fputc('-', f);
				fputs(cols[c].right ? ": " : "- ", f);
			}
			fprintf(f, "|\n");
		}
	}
	free(cell);
	if (ferror(f))
		ret = -EIO;
	return ret;
}

/* ---- JSON and CSV: the same fields, in this order ---- */

enum kind { K_STR, K_U64, K_NUM, K_SAMPLES };

struct field {
	const char *name;
	enum kind kind;
	const char *s;
	uint64_t u;
	double d;
};

/* Fields of one row, into fl (room for S_FIELDS, exactly the list below: one more field
 * without raising it aborts here instead of writing past the caller's array). Returns the
 * count. */
#define S_FIELDS 31
static size_t s_fields(const struct ns_bench_row *r, char *test, size_t test_len,
		       struct field *fl)
{
	double mean, sd, roof = ns_bench_row_roofline(r);
	size_t k = 0;

	ns_stats_mean_sd(r->ts, r->n_samples, &mean, &sd);
	ns_bench_row_test(r, test, test_len);
#define F(nm, kd, ...) \
	(k < S_FIELDS ? (void)(fl[k++] = (struct field){ .name = (nm), .kind = (kd), __VA_ARGS__ }) \
		      : abort())
	F("model_type", K_STR, .s = r->model);
	F("model_size", K_U64, .u = r->size_bytes);
	F("model_n_params", K_U64, .u = r->n_params);
	F("backends", K_STR, .s = r->backend);
	F("n_prompt", K_U64, .u = r->n_prompt);
	F("n_gen", K_U64, .u = r->n_gen);
	F("n_depth", K_U64, .u = r->n_depth);
	F("test", K_STR, .s = test);
	F("mem_budget", K_U64, .u = r->mem_budget);
	F("ram_budget", K_U64, .u = r->ram_budget);
	F("vram_budget", K_U64, .u = r->vram_budget);
	F("block_rows", K_U64, .u = r->block_rows);
	F("lookahead", K_U64, .u = r->lookahead);
	F("avg_ts", K_NUM, .d = r->n_samples ? mean : -1);
	F("stddev_ts", K_NUM, .d = r->n_samples ? sd : -1);
	F("samples_ts", K_SAMPLES);
	F("bytes_per_token", K_NUM, .d = r->bytes_per_token);
	F("req_bytes_per_token", K_NUM, .d = r->req_bytes_per_token);
	F("plan_bytes_per_token", K_NUM, .d = r->plan_bytes_per_token);
	F("stall_ms_per_token", K_NUM, .d = r->stall_ms_per_token);
	F("arena_peak", K_NUM, .d = r->arena_peak);
	F("cache_hit_rate", K_NUM, .d = r->cache_hit_rate);
	F("predict_hit_rate", K_NUM, .d = r->predict_hit_rate);
	F("disk_bps", K_NUM, .d = r->disk_bps);
	F("roofline_ts", K_NUM, .d = roof);
	F("roofline_ratio", K_NUM, .d = roof > 0 && r->n_samples ? mean / roof : -1);
	F("draft", K_STR, .s = r->draft);
	F("drafted", K_NUM, .d = r->draft[0] ? r->drafted : -1);
	F("accepted", K_NUM, .d = r->draft[0] ? r->accepted : -1);
	F("accept_rate", K_NUM, .d = ns_bench_row_accept_rate(r));
	F("passes_per_token", K_NUM, .d = r->draft[0] ? r->passes_per_token : -1);
#undef F
	return k;
}

static void s_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void s_csv_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const char *p = s; *p; p++) {
		if (*p == '"')
			fputc('"', f);
		fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
	}
	fputc('"', f);
}

/* A number, or null (JSON) / empty (CSV) when unknown. %.17g round-trips a double. */
static void s_put_num(FILE *f, double v, bool json)
{
	if (v < 0 || isnan(v) || isinf(v))
		fputs(json ? "null" : "", f);
	else
		fprintf(f, "%.17g", v);
}

static int s_print_json(FILE *f, const struct ns_bench_row *rows, size_t n)
{
	fputs("[", f);
	for (size_t i = 0; i < n; i++) {
		struct field fl[S_FIELDS];
		char test[32];
		size_t nf = s_fields(&rows[i], test, sizeof(test), fl);

		fputs(i ? ",\n  {" : "\n  {", f);
		for (size_t k = 0; k < nf; k++) {
			fprintf(f, "%s\"%s\": ", k ? ", " : "", fl[k].name);
			switch (fl[k].kind) {
			case K_STR: s_json_str(f, fl[k].s); break;
			case K_U64: fprintf(f, "%" PRIu64, fl[k].u); break;
			case K_NUM: s_put_num(f, fl[k].d, true); break;
			case K_SAMPLES:
				fputc('[', f);
				for (size_t s = 0; s < rows[i].n_samples; s++) {
					fputs(s ? ", " : "", f);
					s_put_num(f, rows[i].ts[s], true);
				}
				fputc(']', f);
				break;
			}
		}
		fputs("}", f);
	}
	fputs(n ? "\n]\n" : "]\n", f);
	return ferror(f) ? -EIO : 0;
}

static int s_print_csv(FILE *f, const struct ns_bench_row *rows, size_t n)
{
	struct field fl[S_FIELDS];
	char test[32];
	struct ns_bench_row blank;
	size_t nf;

	ns_bench_row_init(&blank);
	nf = s_fields(&blank, test, sizeof(test), fl);
	for (size_t k = 0; k < nf; k++)
		fprintf(f, "%s%s", k ? "," : "", fl[k].name);
	fputc('\n', f);
	for (size_t i = 0; i < n; i++) {
		nf = s_fields(&rows[i], test, sizeof(test), fl);
		for (size_t k = 0; k < nf; k++) {
			if (k)
				fputc(',', f);
			switch (fl[k].kind) {
			case K_STR: s_csv_str(f, fl[k].s); break;
			case K_U64: fprintf(f, "%" PRIu64, fl[k].u); break;
			case K_NUM: s_put_num(f, fl[k].d, false); break;
			case K_SAMPLES: /* llama-bench style: one quoted field, space separated */
				fputc('"', f);
				for (size_t s = 0; s < rows[i].n_samples; s++) {
					fputs(s ? " " : "", f);
					s_put_num(f, rows[i].ts[s], false);
				}
				fputc('"', f);
				break;
			}
		}
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

int ns_table_print(FILE *f, enum ns_table_fmt fmt, const struct ns_bench_row *rows, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].n_samples > NS_BENCH_MAX_SAMPLES)
			return -EINVAL;
	switch (fmt) {
	case NS_TABLE_MD: return s_print_md(f, rows, n);
	case NS_TABLE_JSON: return s_print_json(f, rows, n);
	case NS_TABLE_CSV: return s_print_csv(f, rows, n);
	}
	return -EINVAL;
}
