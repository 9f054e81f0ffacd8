/* image_exif.c - the one EXIF tag we need: Orientation (0x0112) of IFD0.
 *
 * A TIFF block is a byte-order mark ("II" little-endian, "MM" big-endian), the magic 42, the
 * offset of IFD0, then IFD0: a count of 12-byte entries (tag, type, count, value). Every
 * offset is checked against the block; anything malformed means "no orientation". */
#include <string.h>

#include "image_codec.h"

#define S_TAG_ORIENTATION 0x0112u
#define S_TYPE_SHORT 3u

static uint32_t s_u16(const uint8_t *p, bool le)
{
	return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 : (uint32_t)p[0] << 8 | (uint32_t)p[1];
}

static uint32_t s_u32(const uint8_t *p, bool le)
{
	return le ? s_u16(p, true) | s_u16(p + 2, true) << 16
		  : s_u16(p, false) << 16 | s_u16(p + 2, false);
}

uint32_t ns_exif_orientation(const uint8_t *p, size_t len)
{
	uint32_t ifd, n;
	bool le;

	if (p && len >= 6 && memcmp(p, "Exif\0\0", 6) == 0) {
		p += 6;
		len -= 6;
	}
	if (!p || len < 8)
		return 1;
	if (memcmp(p, "II", 2) == 0)
		le = true;
	else if (memcmp(p, "MM", 2) == 0)
		le = false;
	else
		return 1;
	if (s_u16(p + 2, le) != 42)
		return 1;
	ifd = s_u32(p + 4, le);
	if (ifd > len || len - ifd < 2)
		return 1;
	n = s_u16(p + ifd, le);
	for (uint32_t i = 0; i < n; i++) {
		size_t at = (size_t)ifd + 2 + (size_t)i * 12;
		uint32_t v;

		if (at > len || len - at < 12)
			return 1;
		if (s_u16(p + at, le) != S_TAG_ORIENTATION)
			continue;
		if (s_u16(p + at + 2, le) != S_TYPE_SHORT || s_u32(p + at + 4, le) != 1)
			return 1;
		v = s_u16(p + at + 8, le); /* a SHORT sits left-aligned in the value field */
		return v >= 1 && v <= 8 ? v : 1;
	}
	return 1;
}
