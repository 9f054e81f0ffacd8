/* cmd_opt.h - the ns_opt rows every nsctl command spells the same way: -h/--help and
 * llama.cpp's -m/--model (the MODEL argument, given as an option), --print-args. One
 * definition, so run, serve, bench and the others cannot drift apart. The pipeline's own
 * flags (budgets, backend, -c, -t, ...) are engine_flags.h's table, shared the same way. */
#ifndef NSCTL_CMD_OPT_H
#define NSCTL_CMD_OPT_H

#include "ns_opt.h"

#define NSCTL_OPT_HELP(id) { "help", "-h", NS_OPT_SWITCH, (id) }
#define NSCTL_OPT_MODEL(id) { "model", "-m", NS_OPT_VALUE, (id) }
/* what was parsed, one name=value a line on stdout, nothing started (run, serve) */
#define NSCTL_OPT_PRINT_ARGS(id) { "print-args", NULL, NS_OPT_SWITCH, (id) }

#endif
