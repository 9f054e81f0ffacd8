/* ns_util.c - see ns_util.h. */
#define _POSIX_C_SOURCE 200809L
#include "ns_util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* floor(0.DIGITS * 2^shift) exactly, by long division in binary (shift <= 40). Only the first
 * 18 digits count: the rest could move the result only for inputs nobody types. */
static uint64_t s_frac_bytes(const char *digits, size_t n, unsigned shift)
{
	uint64_t num = 0, den = 1, r, q = 0;

	for (size_t i = 0; i < n && i < 18; i++) {
		num = num * 10 + (uint64_t)(digits[i] - '0');
		den *= 10;
	}
	r = num; /* r < den <= 10^18: 2 * r cannot overflow */
	for (unsigned b = 0; b < shift; b++) {
		r *= 2;
		q *= 2;
		if (r >= den) {
			r -= den;
			q++;
		}
	}
	return q;
}

/* Syntax: DIGITS [. DIGITS] [spaces] [unit]. The whole part is parsed exactly (strtoull, all
 * 64 bits), a fraction in binary long division; no sign, space, hex, exponent, nan or inf. */
int ns_parse_bytes(const char *text, uint64_t *out)
{
	const char *p, *num_end, *frac = NULL;
	unsigned long long whole;
	bool overflow;
	char suffix[8];
	size_t n = 0, nfrac = 0;
	char *end = NULL;

	if (!text || *text < '0' || *text > '9')
		return -EINVAL;
	errno = 0;
	whole = strtoull(text, &end, 10);
	overflow = errno == ERANGE;
	p = end;
	if (*p == '.') {
		frac = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		nfrac = (size_t)(p - frac);
		if (!nfrac)
			return -EINVAL;
	}
	num_end = p;
	while (*p == ' ')
		p++;
	if (p != num_end && !*p) /* spaces only between the number and a unit */
		return -EINVAL;
	while (p[n]) {
		if (n + 1 >= sizeof(suffix))
			return -EINVAL;
		suffix[n] = (char)toupper((unsigned char)p[n]);
		n++;
	}
	suffix[n] = '\0';
	for (size_t i = 0; i < NS_ARRAY_LEN(s_units); i++) {
		const unsigned shift = s_units[i].shift;
		uint64_t bytes, part = 0;

		if (strcmp(suffix, s_units[i].suffix) != 0)
			continue;
		/* Fractions of a byte are meaningless: "1.5B" is refused, "1.5GB" rounds down. */
		if (frac && shift == 0 && strspn(frac, "0") < nfrac)
			return -EINVAL;
		if (overflow || whole > (UINT64_MAX >> shift))
			return -ERANGE;
		bytes = (uint64_t)whole << shift;
		if (frac && shift)
			part = s_frac_bytes(frac, nfrac, shift);
		if (ns_add_u64_overflow(bytes, part, &bytes))
			return -ERANGE;
		*out = bytes;
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

static const char *s_file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a FIFO";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISDIR(mode))
		return "a directory";
	return "not a file";
}

int ns_open_regular(const char *path, int flags, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK), ret;

	if (fd < 0) {
		ret = -errno;
		ns_errf(err, errlen, "%s: cannot open: %s", path, strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		ns_errf(err, errlen, "%s: cannot stat: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode)) {
		ns_errf(err, errlen, "%s: not a regular file (%s)", path, s_file_kind(st.st_mode));
		close(fd);
		return S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		ret = -errno;
		ns_errf(err, errlen, "%s: fcntl: %s", path, strerror(-ret));
		close(fd);
		return ret;
	}
	return fd;
}
