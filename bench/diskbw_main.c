/* ns_diskbw: the drive's O_DIRECT read bandwidth on a file, io_uring at a block size and
 * queue depth; the limit `nsctl bench` divides by bytes read per token.
 *
 *   ns_diskbw FILE [--block-bytes 1MB] [--queue-depth 16] [--repeats 3] [--pass-bytes B]
 *             [--rand]
 * Prints one line: the median pass in GB/s (1e9 bytes), min and max, and the pass size. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diskbw.h"
#include "ns_util.h"

static int s_usage(void)
{
	fprintf(stderr, "usage: ns_diskbw FILE [--block-bytes B] [--queue-depth N] [--repeats R] "
			"[--pass-bytes B] [--rand]\n");
	return 2;
}

static int s_u32(const char *opt, const char *v, uint32_t *out)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(v, &end, 10);
	if (!*v || *end || errno || x > UINT32_MAX || v[0] == '-') {
		fprintf(stderr, "ns_diskbw: %s expects a non-negative integer, got '%s'\n", opt, v);
		return -1;
	}
	*out = (uint32_t)x;
	return 0;
}

int main(int argc, char **argv)
{
	struct ns_diskbw_opts o;
	struct ns_diskbw_result r;
	const char *path = NULL;
	char err[NS_ERR_LEN];
	int ret;

	ns_diskbw_opts_default(&o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			s_usage();
			return 0;
		} else if (!strcmp(a, "--rand")) {
			o.pattern = NS_DISKBW_RAND;
		} else if (!strcmp(a, "--seq")) {
			o.pattern = NS_DISKBW_SEQ;
		} else if (a[0] == '-' && a[1] == '-') {
			if (!v) {
				fprintf(stderr, "ns_diskbw: %s needs a value\n", a);
				return 2;
			}
			i++;
			if (!strcmp(a, "--block-bytes") || !strcmp(a, "--pass-bytes")) {
				uint64_t x;
				if (ns_parse_bytes(v, &x)) {
					fprintf(stderr, "ns_diskbw: %s: bad size '%s'\n", a, v);
					return 2;
				}
				if (a[2] == 'b')
					o.block_bytes = x;
				else
					o.pass_bytes = x;
			} else if (!strcmp(a, "--queue-depth")) {
				if (s_u32(a, v, &o.queue_depth))
					return 2;
			} else if (!strcmp(a, "--repeats")) {
				if (s_u32(a, v, &o.repeats))
					return 2;
			} else {
				fprintf(stderr, "ns_diskbw: unknown option '%s'\n", a);
				return 2;
			}
		} else if (!path) {
			path = a;
		} else {
			return s_usage();
		}
	}
	if (!path)
		return s_usage();
	ret = ns_diskbw_measure(path, &o, &r, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "ns_diskbw: %s\n", err);
		return ret == -EINVAL ? 2 : 1;
	}
	printf("%s bs=%" PRIu64 " qd=%u %s: %.3f GB/s median of %u passes of %.2f GB (min %.3f, "
	       "max %.3f)\n", path, o.block_bytes, o.queue_depth,
	       o.pattern == NS_DISKBW_RAND ? "rand" : "seq", r.median_bps / 1e9, r.repeats,
	       (double)r.pass_bytes / 1e9, r.min_bps / 1e9, r.max_bps / 1e9);
	return 0;
}
