/* run_draft.h - nsctl run's speculative decoding options (--draft, --draft-max, --draft-min)
 * and the checks that refuse a drafter before any process starts. */
#ifndef NSCTL_RUN_DRAFT_H
#define NSCTL_RUN_DRAFT_H

#include "neurostream.h"

/* a is one of the draft options with value v (NULL: missing): sets g's draft fields (--draft
 * ngram: prompt lookup; --draft PATH: the draft model PATH, into *draft_model, else NULL) and
 * returns 2 (both consumed); 0 when a is not a draft option; -EINVAL with one line. */
int nsctl_draft_flag(struct ns_gen_params *g, const char **draft_model, const char *a,
		     const char *v);

/* With a drafter: refused (one line, -EINVAL) for draft lengths min > max, --draft mtp on a
 * model without a block we run, and a draft model (draft_model, NULL: none) that does not
 * open, runs no cpu pass with a KV cache to cut back, or has another vocabulary
 * (nsctl_draft_compatible). Every drafter runs on both backends (a recurrent target's state
 * is rolled back on either; the MTP block runs on the host beside either pass). 0 otherwise,
 * or for a model that does not open (the engine reports it). */
int nsctl_draft_check(const struct ns_gen_params *g, const char *model,
		      const char *draft_model);

#endif
