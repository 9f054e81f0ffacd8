/* image_webp.c - WebP through libwebp's demuxer and animation decoder, from memory.
 *
 * Pillow reads every WebP (still or animated) through WebPAnimDecoder; so do we: the first
 * frame's canvas in RGBA, alpha then dropped. The demuxer parses the whole container first,
 * so a file cut short is refused before any pixel is decoded. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

#include "image_codec.h"
#include "ns_util.h"

static int s_first_frame(const WebPData *wd, struct ns_image_raw *out, char *err, size_t errlen)
{
	WebPAnimDecoderOptions o;
	WebPAnimDecoder *dec;
	WebPAnimInfo info;
	uint8_t *rgba = NULL;
	int ts = 0, rc = -EINVAL;

	if (!WebPAnimDecoderOptionsInit(&o)) {
		ns_errf(err, errlen, "libwebp version mismatch");
		return -EINVAL;
	}
	o.color_mode = MODE_RGBA;
	o.use_threads = 0;
	dec = WebPAnimDecoderNew(wd, &o);
	if (!dec) {
		ns_errf(err, errlen, "corrupt WebP: the decoder refused the file");
		return -EINVAL;
	}
	if (!WebPAnimDecoderGetInfo(dec, &info) || info.canvas_width != out->width ||
	    info.canvas_height != out->height) {
		ns_errf(err, errlen, "corrupt WebP: canvas size differs from the header's");
	} else if (!WebPAnimDecoderGetNext(dec, &rgba, &ts) || !rgba) {
		ns_errf(err, errlen, "corrupt or truncated WebP: the first frame does not decode");
	} else if (!(out->rgb = ns_image_rgb_alloc(out->width, out->height))) {
		ns_errf(err, errlen, "out of memory for the pixels");
		rc = -ENOMEM;
	} else {
		const size_t n = (size_t)out->width * out->height;

		for (size_t i = 0; i < n; i++)
			memcpy(out->rgb + i * 3, rgba + i * 4, 3);
		rc = 0;
	}
	WebPAnimDecoderDelete(dec);
	return rc;
}

int ns_image_webp_read(const uint8_t *data, size_t len, bool decode, struct ns_image_raw *out,
		       char *err, size_t errlen)
{
	const WebPData wd = { .bytes = data, .size = len };
	WebPDemuxer *dmux = WebPDemux(&wd);
	WebPChunkIterator ci;
	int rc = 0;

	if (!dmux) {
		ns_errf(err, errlen, "corrupt or truncated WebP container");
		return -EINVAL;
	}
	out->width = WebPDemuxGetI(dmux, WEBP_FF_CANVAS_WIDTH);
	out->height = WebPDemuxGetI(dmux, WEBP_FF_CANVAS_HEIGHT);
	out->orientation = 1;
	if ((WebPDemuxGetI(dmux, WEBP_FF_FORMAT_FLAGS) & EXIF_FLAG) &&
	    WebPDemuxGetChunk(dmux, "EXIF", 1, &ci)) {
		out->orientation = ns_exif_orientation(ci.chunk.bytes, ci.chunk.size);
		WebPDemuxReleaseChunkIterator(&ci);
	}
	WebPDemuxDelete(dmux);
	if (decode)
		rc = s_first_frame(&wd, out, err, errlen);
	return rc;
}
