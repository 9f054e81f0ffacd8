/* ns_util.c - see ns_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "ns_util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

char *ns_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return err;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	/* Names quoted from hostile files may hold control bytes: an error stays one line. */
	for (char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return err;
}

struct unit {
	const char *suffix;
	unsigned shift;
};

static const struct unit s_units[] = {
	{ "", 0 },    { "B", 0 },    { "K", 10 },   { "KB", 10 },  { "KIB", 10 },
	{ "M", 20 },  { "MB", 20 },  { "MIB", 20 }, { "G", 30 },   { "GB", 30 },
	{ "GIB", 30 }, { "T", 40 },  { "TB", 40 },  { "TIB", 40 },
};

int ns_parse_count(const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end = NULL;
	unsigned long long x;

	if (!text || *text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	x = strtoull(text, &end, 10);
	if (*end || errno || x < lo || x > hi)
		return -EINVAL;
	*out = x;
	return 0;
}

int ns_parse_bytes(const char *text, uint64_t *out)
{
	char *end = NULL;
	char suffix[8];
	size_t n = 0;
	double v;

	if (!text || !*text || isspace((unsigned char)*text) || *text == '-' || *text == '+')
		return -EINVAL;
	errno = 0;
	v = strtod(text, &end);
	if (end == text || errno == ERANGE || !isfinite(v) || v < 0)
		return end == text ? -EINVAL : -ERANGE;
	while (*end == ' ')
		end++;
	while (end[n]) {
		if (n + 1 >= sizeof(suffix))
			return -EINVAL;
		suffix[n] = (char)toupper((unsigned char)end[n]);
		n++;
	}
	suffix[n] = '\0';
	for (size_t i = 0; i < NS_ARRAY_LEN(s_units); i++) {
		if (strcmp(suffix, s_units[i].suffix) != 0)
			continue;
		double bytes = ldexp(v, (int)s_units[i].shift);
		if (bytes >= 18446744073709551616.0)
			return -ERANGE;
		/* Fractions of a byte are meaningless: "1.5B" is refused, "1.5GB" rounds down. */
		if (s_units[i].shift == 0 && bytes != floor(bytes))
			return -EINVAL;
		*out = (uint64_t)bytes;
		return 0;
	}
	return -EINVAL;
}

char *ns_format_bytes(uint64_t bytes, char *buf, size_t buflen)
{
	static const char *const names[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	size_t i = 0;

	if (bytes < 1024) {
		snprintf(buf, buflen, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024.0 && i + 1 < NS_ARRAY_LEN(names)) {
		v /= 1024.0;
		i++;
	}
	snprintf(buf, buflen, "%.2f %s", v, names[i]);
	return buf;
}

uint64_t ns_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
