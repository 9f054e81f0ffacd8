/* alloc_fault.h - make the N-th allocation of the process fail (alloc_fault.c).
 *
 *   ns_alloc_fault_arm(0);          count only
 *   op();  total = ns_alloc_fault_calls();
 *   ns_alloc_fault_arm(n);          the n-th malloc/calloc/realloc/memalign from now fails
 *
 * ns_alloc_fault_live() is the number of blocks handed out and not freed: equal before and
 * after an operation that cleans up after itself. */
#ifndef NS_ALLOC_FAULT_H
#define NS_ALLOC_FAULT_H

void ns_alloc_fault_arm(long fail_at);
long ns_alloc_fault_calls(void);
long ns_alloc_fault_failed(void);
long ns_alloc_fault_live(void);

#endif
