/* tok_unicode.c - UTF-8 helpers, the GPT-2 byte<->unicode mapping and NFC (libunistring). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uninorm.h>

#include "tok_internal.h"

/* GPT-2's byte-level alphabet: printable Latin-1 bytes map to themselves, the other 68 bytes
 * (controls, space, DEL, NBSP, soft hyphen) to U+0100 + n in byte order. */
static bool s_byte_is_printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

/* The 68 unprintable bytes, in order: 0x00-0x20 (33), 0x7f-0xa0 (34), 0xad (1). */
uint32_t ns_tok_byte_to_cp(uint8_t b)
{
	if (s_byte_is_printable(b))
		return b;
	if (b <= 0x20)
		return 0x100 + b;
	if (b >= 0x7f && b <= 0xa0)
		return 0x100 + 33 + (b - 0x7f);
	return 0x100 + 67; /* 0xad */
}

int ns_tok_cp_to_byte(uint32_t cp)
{
	uint32_t n;

	if (cp < 0x100)
		return s_byte_is_printable(cp) ? (int)cp : -1;
	n = cp - 0x100;
	if (n < 33)
		return (int)n;
	if (n < 67)
		return (int)(0x7f + n - 33);
	if (n == 67)
		return 0xad;
	return -1;
}

size_t ns_utf8_len(uint8_t c)
{
	if (c < 0x80)
		return 1;
	if ((c & 0xe0) == 0xc0)
		return 2;
	if ((c & 0xf0) == 0xe0)
		return 3;
	if ((c & 0xf8) == 0xf0)
		return 4;
	return 1;
}

size_t ns_utf8_decode(const char *s, size_t n, uint32_t *cp)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t len = ns_utf8_len(u[0]);
	uint32_t c;

	if (len == 1) {
		*cp = u[0] < 0x80 ? u[0] : 0xfffd;
		return 1;
	}
	if (len > n)
		goto bad;
	c = u[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((u[i] & 0xc0) != 0x80)
			goto bad;
		c = (c << 6) | (u[i] & 0x3f);
	}
	if ((len == 2 && c < 0x80) || (len == 3 && c < 0x800) || (len == 4 && c < 0x10000) ||
	    c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		goto bad;
	*cp = c;
	return len;
bad:
	*cp = 0xfffd;
	return 1;
}

size_t ns_utf8_encode(uint32_t cp, char out[4])
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

int ns_tok_nfc(const char *text, size_t len, char **out, size_t *outlen)
{
	size_t n = 0;
	uint8_t *r;

	/* u8_normalize allocates the result when the first argument is NULL. */
	r = u8_normalize(UNINORM_NFC, (const uint8_t *)text, len, NULL, &n);
	if (!r)
		return errno == ENOMEM ? -ENOMEM : -EILSEQ;
	*out = (char *)r;
	*outlen = n;
	return 0;
}

int ns_ivec_push(struct ns_ivec *iv, int32_t x)
{
	if (iv->n == iv->cap) {
		size_t cap = iv->cap ? iv->cap * 2 : 64;
		int32_t *v;

		if (cap > SIZE_MAX / sizeof(*v))
			return -ENOMEM;
		v = realloc(iv->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		iv->v = v;
		iv->cap = cap;
	}
	iv->v[iv->n++] = x;
	return 0;
}
