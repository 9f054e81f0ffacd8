/* libFuzzer target for the GGUF reader and the split-model index: any byte string must open
 * consistently or fail with one line; never crash, hang or allocate beyond the header. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf.h"
#include "model.h"
#include "ns_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ns_model *m = NULL;
	char err[NS_ERR_LEN], path[64];
	int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (ns_model_open(path, &m, err, sizeof(err)) == 0) {
		for (uint64_t i = 0; i < m->n_tensors; i++) {
			const struct ns_model_tensor *t = &m->tensors[i];
			if (t->file_offset + t->n_bytes > size || ns_model_find(m, t->name) != t)
				__builtin_trap();
		}
		ns_model_close(&m);
	} else if (!strstr(err, "offset ") || strchr(err, '\n')) {
		__builtin_trap();
	}
	close(fd);
	return 0;
}
