/* test_ns_util.c - common/ns_util's parsers for command-line numbers: ns_parse_bytes (sizes
 * with units) and ns_parse_count (plain counts).
 *
 * Whole numbers must be exact over all 64 bits (a parse through double rounds 2^53+1 to 2^53
 * and 2^64-1 up to 2^64, which then overflows), overflow must be refused (-ERANGE for sizes),
 * fractions with a unit round down to whole bytes as before ("1.5GB"), and what is no number
 * (space, sign, hex, exponent, nan, empty, NULL) is refused with *out left alone.
 * Exit 0 pass, 1 fail. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "ns_util.h"

#define S_UNTOUCHED 0x5a5a5a5a5a5a5a5aull

static int s_fails;

/* ns_parse_bytes(text) must return want_rc, and *out == want when it returns 0. */
static void s_bytes(const char *text, int want_rc, uint64_t want)
{
	uint64_t v = S_UNTOUCHED;
	int rc = ns_parse_bytes(text, &v);

	if (rc != want_rc || (rc == 0 && v != want) || (rc != 0 && v != S_UNTOUCHED)) {
		printf("FAIL: ns_parse_bytes(%s%s%s) = %d, %" PRIu64 "; want %d, %" PRIu64 "\n",
		       text ? "\"" : "", text ? text : "NULL", text ? "\"" : "", rc, v, want_rc,
		       want_rc ? (uint64_t)S_UNTOUCHED : want);
		s_fails++;
	}
}

/* ns_parse_count(text, lo, hi) must return want_rc, and *out == want when it returns 0. */
static void s_count(const char *text, uint64_t lo, uint64_t hi, int want_rc, uint64_t want)
{
	uint64_t v = S_UNTOUCHED;
	int rc = ns_parse_count(text, lo, hi, &v);

	if (rc != want_rc || (rc == 0 && v != want) || (rc != 0 && v != S_UNTOUCHED)) {
		printf("FAIL: ns_parse_count(%s%s%s, %" PRIu64 ", %" PRIu64 ") = %d, %" PRIu64
		       "; want %d, %" PRIu64 "\n", text ? "\"" : "", text ? text : "NULL",
		       text ? "\"" : "", lo, hi, rc, v, want_rc,
		       want_rc ? (uint64_t)S_UNTOUCHED : want);
		s_fails++;
	}
}

int main(void)
{
	const uint64_t max = UINT64_MAX;

	/* exact whole numbers */
	s_bytes("0", 0, 0);
	s_bytes("4096", 0, 4096);
	s_bytes("9007199254740993", 0, 9007199254740993ull);     /* 2^53 + 1 */
	s_bytes("9007199254740993B", 0, 9007199254740993ull);
	s_bytes("18446744073709551615", 0, max);                 /* 2^64 - 1 */
	s_bytes("18446744073709551615 b", 0, max);
	s_bytes("18446744073709551614", 0, max - 1);
	s_bytes("8796093022207K", 0, 8796093022207ull << 10);    /* 2^53 - 1 KiB */
	s_bytes("16777215TB", 0, 16777215ull << 40);             /* the largest whole TB */
	/* units */
	s_bytes("512K", 0, 512ull << 10);
	s_bytes("512KB", 0, 512ull << 10);
	s_bytes("512KiB", 0, 512ull << 10);
	s_bytes("64mb", 0, 64ull << 20);
	s_bytes("64 MB", 0, 64ull << 20);
	s_bytes("6GB", 0, 6ull << 30);
	s_bytes("2TiB", 0, 2ull << 40);
	/* fractions: rounded down to whole bytes, only with a unit */
	s_bytes("1.5GB", 0, 3ull << 29);
	s_bytes("0.5K", 0, 512);
	s_bytes("0.3K", 0, 307);                                 /* 307.2 */
	s_bytes("2.25 MiB", 0, 9ull << 18);
	s_bytes("16777215.5TB", 0, (16777215ull << 40) + (1ull << 39));
	s_bytes("1.0B", 0, 1);
	s_bytes("1.5B", -EINVAL, 0);
	s_bytes("1.5", -EINVAL, 0);
	s_bytes("1.GB", -EINVAL, 0);
	s_bytes(".5GB", -EINVAL, 0);
	/* overflow */
	s_bytes("18446744073709551616", -ERANGE, 0);             /* 2^64 */
	s_bytes("99999999999999999999", -ERANGE, 0);
	s_bytes("16777216TB", -ERANGE, 0);                       /* 2^64 */
	s_bytes("17179869184G", -ERANGE, 0);                     /* 2^64 */
	s_bytes("16777215.99999999999999999999TB", 0,
		(16777215ull << 40) + (1ull << 40) - 1);              /* 18 digits count */
	s_bytes("99999999999999999999.5TB", -ERANGE, 0);
	/* not numbers */
	s_bytes(" 4", -EINVAL, 0);
	s_bytes("4 ", -EINVAL, 0);
	s_bytes("-1", -EINVAL, 0);
	s_bytes("+1", -EINVAL, 0);
	s_bytes("0x10", -EINVAL, 0);
	s_bytes("1e3", -EINVAL, 0);
	s_bytes("1e99", -EINVAL, 0);
	s_bytes("nan", -EINVAL, 0);
	s_bytes("inf", -EINVAL, 0);
	s_bytes("MB", -EINVAL, 0);
	s_bytes("64MB,", -EINVAL, 0);
	s_bytes("16EB", -EINVAL, 0);
	s_bytes("12abc", -EINVAL, 0);
	s_bytes("", -EINVAL, 0);
	s_bytes(NULL, -EINVAL, 0);

	s_count("0", 0, max, 0, 0);
	s_count("4", 1, 8, 0, 4);
	s_count("9007199254740993", 0, max, 0, 9007199254740993ull);
	s_count("18446744073709551615", 0, max, 0, max);
	s_count("18446744073709551616", 0, max, -EINVAL, 0);
	s_count("99999999999999999999", 0, max, -EINVAL, 0);
	s_count("9", 1, 8, -EINVAL, 0);
	s_count("0", 1, 8, -EINVAL, 0);
	s_count("1.5GB", 0, max, -EINVAL, 0);
	s_count("1.5", 0, max, -EINVAL, 0);
	s_count("1e3", 0, max, -EINVAL, 0);
	s_count(" 4", 0, max, -EINVAL, 0);
	s_count("4 ", 0, max, -EINVAL, 0);
	s_count("-1", 0, max, -EINVAL, 0);
	s_count(" -1", 0, max, -EINVAL, 0);
	s_count("+1", 0, max, -EINVAL, 0);
	s_count("0x10", 0, max, -EINVAL, 0);
	s_count("", 0, max, -EINVAL, 0);
	s_count(NULL, 0, max, -EINVAL, 0);

	if (s_fails) {
		printf("%d failure(s)\n", s_fails);
		return 1;
	}
	printf("ok: ns_parse_bytes and ns_parse_count\n");
	return 0;
}
