/* json_text.c - see json_text.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json_text.h"

size_t ns_utf8_seq_len(const unsigned char *p, size_t n)
{
	size_t l = p[0] < 0x80 ? 1 : p[0] < 0xc2 ? 0 : p[0] < 0xe0 ? 2 : p[0] < 0xf0 ? 3 :
		   p[0] < 0xf5 ? 4 : 0;

	if (!l || l > n)
		return 0;
	for (size_t i = 1; i < l; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((l == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (l == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
	    (l == 4 && p[0] == 0xf0 && p[1] < 0x90) || (l == 4 && p[0] == 0xf4 && p[1] >= 0x90))
		return 0; /* overlong, surrogate, above U+10FFFF */
	return l;
}

json_t *ns_json_text(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t k = 0, o = 0;
	char *buf;
	json_t *j;

	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	/* each invalid byte grows to three (U+FFFD) */
	if (!(buf = malloc(n * 3 + 1)))
		return NULL;
	while (k < n) {
		size_t l = ns_utf8_seq_len(p + k, n - k);

		if (l) {
			memcpy(buf + o, p + k, l);
			o += l;
			k += l;
		} else {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			k++;
		}
	}
	j = json_stringn(buf, o);
	free(buf);
	return j;
}
