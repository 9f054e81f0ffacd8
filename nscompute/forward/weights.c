/* weights.c - what every weight provider shares: its destruction, the window check. */
#include <errno.h>
#include <stdlib.h>

#include "ns_util.h"
#include "weights.h"

int ns_weights_check_window(const struct ns_model_tensor *t, uint64_t row0, uint64_t row_end,
			    uint64_t ldy, char *err, size_t errlen)
{
	if (row0 <= row_end && row_end <= t->n_rows && ldy >= row_end - row0)
		return 0;
	ns_errf(err, errlen, "%s: bad row window %llu..%llu of %llu", t->name,
		(unsigned long long)row0, (unsigned long long)row_end,
		(unsigned long long)t->n_rows);
	return -EINVAL;
}

void ns_weights_destroy(struct ns_weights **w)
{
	if (!w || !*w)
		return;
	if ((*w)->ops && (*w)->ops->destroy)
		(*w)->ops->destroy((*w)->ctx);
	free(*w);
	*w = NULL;
}
