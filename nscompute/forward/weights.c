/* weights.c - what every weight provider shares: its destruction. */
#include <stdlib.h>

#include "weights.h"

void ns_weights_destroy(struct ns_weights **w)
{
	if (!w || !*w)
		return;
	if ((*w)->ops && (*w)->ops->destroy)
		(*w)->ops->destroy((*w)->ctx);
	free(*w);
	*w = NULL;
}
