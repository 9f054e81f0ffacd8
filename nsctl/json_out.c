/* json_out.c - see json_out.h. */
#include "json_out.h"
#include "json_text.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

void jo_init(struct json_out *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
	j->first[0] = true;
}

static void s_sep(struct json_out *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
}

static void s_open(struct json_out *j, char c)
{
	s_sep(j);
	fputc(c, j->f);
	if (j->depth + 1 < JO_MAX_DEPTH)
		j->depth++;
	j->first[j->depth] = true;
}

static void s_close(struct json_out *j, char c)
{
	fputc(c, j->f);
	if (j->depth > 0)
		j->depth--;
	if (j->depth == 0)
		fputc('\n', j->f);
}

void jo_begin_obj(struct json_out *j) { s_open(j, '{'); }
void jo_end_obj(struct json_out *j) { s_close(j, '}'); }
void jo_begin_arr(struct json_out *j) { s_open(j, '['); }
void jo_end_arr(struct json_out *j) { s_close(j, ']'); }

static void s_escaped(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		size_t l = ns_utf8_seq_len((const unsigned char *)s + i, n - i);

		if (!l) { /* not UTF-8 (a byte token's piece, a name from a file): U+FFFD */
			fputs("\xef\xbf\xbd", f);
			continue;
		}
		if (l > 1) {
			fwrite(s + i, 1, l, f);
			i += l - 1;
			continue;
		}
		switch (c) {
		case '"': fputs("\\\"", f); break;
		case '\\': fputs("\\\\", f); break;
		case '\n': fputs("\\n", f); break;
		case '\r': fputs("\\r", f); break;
		case '\t': fputs("\\t", f); break;
		default:
			if (c < 0x20)
				fprintf(f, "\\u%04x", c);
			else
				fputc(c, f);
		}
	}
	fputc('"', f);
}

void jo_key(struct json_out *j, const char *key)
{
	s_sep(j);
	s_escaped(j->f, key, strlen(key));
	fputc(':', j->f);
	j->after_key = true;
}

void jo_strn(struct json_out *j, const char *s, size_t n)
{
	s_sep(j);
	s_escaped(j->f, s, n);
}

void jo_str(struct json_out *j, const char *s)
{
	jo_strn(j, s, strlen(s));
}

void jo_u64(struct json_out *j, uint64_t v)
{
	s_sep(j);
	fprintf(j->f, "%" PRIu64, v);
}

void jo_i64(struct json_out *j, int64_t v)
{
	s_sep(j);
	fprintf(j->f, "%" PRId64, v);
}

void jo_f64(struct json_out *j, double v)
{
	s_sep(j);
	if (isfinite(v))
		fprintf(j->f, "%.17g", v);
	else
		fputs("null", j->f);
}

void jo_bool(struct json_out *j, bool v)
{
	s_sep(j);
	fputs(v ? "true" : "false", j->f);
}

void jo_null(struct json_out *j)
{
	s_sep(j);
	fputs("null", j->f);
}
