/* Replays files (or every file of a directory) through the fuzz target without libFuzzer, so
 * the seed corpus and any crash reproducer run in the ordinary (gcc, sanitizer) test builds. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ns_test.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int s_one(const char *path)
{
	size_t len = 0;
	uint8_t *buf = ns_test_read_file(path, &len);

	if (!buf) {
		fprintf(stderr, "cannot read %s\n", path);
		return 1;
	}
	LLVMFuzzerTestOneInput(buf, len);
	/* also every prefix length class: empty, header-only, one byte short */
	LLVMFuzzerTestOneInput(buf, 0);
	LLVMFuzzerTestOneInput(buf, len / 2);
	if (len)
		LLVMFuzzerTestOneInput(buf, len - 1);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int n = 0, bad = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			DIR *d = opendir(argv[i]);
			struct dirent *e;
			while (d && (e = readdir(d))) {
				char p[4096];
				if (e->d_name[0] == '.')
					continue;
				snprintf(p, sizeof(p), "%s/%s", argv[i], e->d_name);
				bad |= s_one(p);
				n++;
			}
			if (d)
				closedir(d);
		} else {
			bad |= s_one(argv[i]);
			n++;
		}
	}
	printf("replayed %d inputs\n", n);
	if (n == 0) {
		/* the corpus is the oracle's GGUF headers (make_corpus.sh): none means no oracle
		 * when it was made; ninja makes it again once the oracle is there */
		fprintf(stderr, "fuzz_replay: no inputs in %s: the seed corpus is made from the GGUF "
			"files under %s, and there were none when it was made (rebuild after the "
			"oracle is in place)\n", argc > 1 ? argv[1] : "(no argument)",
			ns_test_oracle_dir());
		ns_test_require_oracle(); /* skips (77), or fails when CI=true, without an oracle */
		return 1;
	}
	return bad;
}
