/* mk_template_model SRC DST: a copy of an oracle model given a Qwen3-style chat template
 * (rt_template.h; the oracle's tiny models carry none), for the Python chat test. */
#include "rt_template.h"

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: mk_template_model SRC DST\n");
		return 2;
	}
	rt_copy_with_template(argv[1], argv[2], RT_QWEN3_TEMPLATE);
	return 0;
}
