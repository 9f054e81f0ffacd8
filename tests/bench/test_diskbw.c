/* test_diskbw: the O_DIRECT bandwidth reader on a file it writes in the build directory
 * (tmpfs has no O_DIRECT): figures positive and finite, a pass is the whole file when the file
 * is under 1 GiB, every bad option and file refused with -EINVAL/-ENOENT and one error line.
 * No timing thresholds. Exit 0 pass, 1 fail, 77 skip (no O_DIRECT where the build lives). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "diskbw.h"
#include "ns_test.h"

static int s_fail;

#define CHECK(cond, ...) NS_EXPECT(s_fail, cond, __VA_ARGS__)

static int s_write_file(const char *path, size_t bytes)
{
	char buf[65536];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0)
		return -1;
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 131);
	for (size_t done = 0; done < bytes; done += sizeof(buf))
		if (write(fd, buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
			close(fd);
			return -1;
		}
	return close(fd);
}

int main(void)
{
	const char *root = getenv("NS_BUILD_ROOT");
	char path[512], small[600], err[512];
	struct ns_diskbw_opts o;
	struct ns_diskbw_result r;
	int ret;

	snprintf(path, sizeof(path), "%s/test_diskbw.%d.bin", root && *root ? root : ".", getpid());
	snprintf(small, sizeof(small), "%s.small", path);
	if (s_write_file(path, 16u << 20) || s_write_file(small, 65536)) {
		perror("write");
		return 1;
	}
	ns_diskbw_opts_default(&o);
	o.block_bytes = 256 * 1024;
	o.queue_depth = 4;
	o.repeats = 3;
	ret = ns_diskbw_measure(path, &o, &r, err, sizeof(err));
	if (ret == -EINVAL && strstr(err, "O_DIRECT")) {
		fprintf(stderr, "skip: %s\n", err);
		unlink(path);
		unlink(small);
		return 77;
	}
	CHECK(ret == 0, "seq: %s", err);
	if (!ret) {
		CHECK(r.pass_bytes == 16u << 20, "pass of %llu bytes, the file has 16 MiB",
		      (unsigned long long)r.pass_bytes);
		CHECK(r.file_bytes == 16u << 20, "file bytes %llu", (unsigned long long)r.file_bytes);
		CHECK(r.repeats == 3, "repeats %u", r.repeats);
		CHECK(r.median_bps > 0 && isfinite(r.median_bps), "median %g", r.median_bps);
		CHECK(r.min_bps <= r.median_bps && r.median_bps <= r.max_bps, "min/median/max order");
		for (unsigned i = 0; i < 3; i++)
			CHECK(r.pass_bps[i] >= r.min_bps && r.pass_bps[i] <= r.max_bps, "pass %u", i);
	}
	o.pattern = NS_DISKBW_RAND;
	o.pass_bytes = 5 * 256 * 1024 + 1; /* rounded up to whole blocks */
	o.repeats = 2;
	ret = ns_diskbw_measure(path, &o, &r, err, sizeof(err));
	CHECK(ret == 0, "rand: %s", err);
	CHECK(ret || r.pass_bytes == 6 * 256 * 1024, "rand pass %llu", (unsigned long long)r.pass_bytes);
	CHECK(ret || (r.median_bps > 0 && isfinite(r.median_bps)), "rand median %g", r.median_bps);

	/* refusals */
	ns_diskbw_opts_default(&o);
	o.block_bytes = 1000;
	err[0] = 0;
	CHECK(ns_diskbw_measure(path, &o, &r, err, sizeof(err)) == -EINVAL && err[0], "bs 1000");
	ns_diskbw_opts_default(&o);
	o.queue_depth = 0;
	CHECK(ns_diskbw_measure(path, &o, &r, err, sizeof(err)) == -EINVAL, "qd 0");
	ns_diskbw_opts_default(&o);
	o.repeats = 0;
	CHECK(ns_diskbw_measure(path, &o, &r, err, sizeof(err)) == -EINVAL, "repeats 0");
	o.repeats = NS_DISKBW_MAX_REPEATS + 1;
	CHECK(ns_diskbw_measure(path, &o, &r, err, sizeof(err)) == -EINVAL, "repeats too many");
	ns_diskbw_opts_default(&o);
	o.queue_depth = 4096;
	o.block_bytes = 1u << 20; /* 4 GiB of buffers */
	CHECK(ns_diskbw_measure(path, &o, &r, err, sizeof(err)) == -EINVAL, "buffers too large");
	ns_diskbw_opts_default(&o); /* 1 MiB blocks, file of 64 KiB */
	err[0] = 0;
	CHECK(ns_diskbw_measure(small, &o, &r, err, sizeof(err)) == -EINVAL && strstr(err, "smaller"),
	      "file below one block: %s", err);
	CHECK(ns_diskbw_measure("/nonexistent/x", &o, &r, err, sizeof(err)) == -ENOENT, "missing");
	CHECK(ns_diskbw_measure(root && *root ? root : ".", &o, &r, err, sizeof(err)) < 0,
	      "a directory");
	unlink(path);
	unlink(small);
	return s_fail ? 1 : 0;
}
