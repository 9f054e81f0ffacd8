/* nsio - the I/O server: streams row windows of the model's tensors from NVMe into the shared
 * arena for the compute processes (see nsio.h for the data path). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "nsio.h"

static volatile sig_atomic_t s_stop; /* set by SIGTERM/SIGINT: leave the loop, tear down */
static volatile sig_atomic_t s_dump; /* set by SIGUSR1: print the queues (diagnostics) */
static volatile sig_atomic_t s_no_plan; /* set by SIGUSR2: nsctl says nsplan ended */

static void s_on_signal(int sig)
{
	if (sig == SIGUSR1)
		s_dump = 1;
	else if (sig == SIGUSR2)
		s_no_plan = 1;
	else
		s_stop = 1;
}

static void s_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = s_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
	struct nsio s;
	int rc;

	memset(&s, 0, sizeof(s));
	s.efd = -1;
	s.stop = &s_stop;
	s.dump = &s_dump;
	s.no_plan = &s_no_plan;
	ns_ring_fault_init(&s.fault, "cpl");
	/* 1. options */
	rc = nsio_parse_options(argc, argv, &s.o);
	if (rc)
		return rc < 0 ? 0 : rc;
	s_signals();
	s.ram.budget = s.o.ram_budget;
	s.ram.ready = s.o.ram_budget == 0; /* nothing to load */
	/* 2. attach: session, model, tensor table, budget check, recovery of a dead nsio */
	rc = nsio_attach(&s);
	/* 3. files and io_uring */
	if (rc == 0)
		rc = nsio_uring_setup(&s);
	/* 4. serve until told to stop */
	if (rc == 0) {
		if (!s.o.quiet)
			printf("nsio: serving session %s (%s reads, queue depth %u, block %llu B)\n",
			       s.sess->id, s.direct ? "O_DIRECT" : "buffered", s.o.queue_depth,
			       (unsigned long long)s.o.block_bytes);
		fflush(stdout);
		rc = nsio_serve(&s);
	}
	/* 5. tear down */
	nsio_teardown(&s);
	return rc ? rc : s.exit_code;
}
