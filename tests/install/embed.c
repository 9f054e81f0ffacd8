/* embed.c - a program an embedder would write against the installed library, built by
 * test_install.sh with `pkg-config --cflags --libs neurostream` only: load MODEL with the
 * library's default budgets, generate N tokens greedily from PROMPT, print the text. Also
 * checks the header's version against the library's. Exit 0, 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <neurostream.h>

static int on_token(const char *piece, size_t len, int32_t id, void *user)
{
	(void)id;
	(void)user;
	fwrite(piece, 1, len, stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct ns_engine_opts o;
	struct ns_gen_params g;
	struct ns_engine *e;
	char err[512], want[32];
	int rc;

	if (argc != 4) {
		fprintf(stderr, "usage: embed MODEL PROMPT N\n");
		return 1;
	}
	snprintf(want, sizeof(want), "%d.%d.%d", NS_VERSION_MAJOR, NS_VERSION_MINOR,
		 NS_VERSION_PATCH);
	if (strcmp(ns_version(), want)) {
		fprintf(stderr, "embed: library %s, header %s\n", ns_version(), want);
		return 1;
	}
	ns_engine_opts_default(&o);
	if (ns_engine_load(argv[1], &o, &e, err, sizeof(err)) < 0) {
		fprintf(stderr, "embed: %s\n", err);
		return 1;
	}
	ns_gen_params_default(&g);
	g.temperature = 0;
	g.n_predict = atoi(argv[3]);
	rc = ns_engine_generate(e, argv[2], &g, on_token, NULL);
	if (rc < 0)
		fprintf(stderr, "embed: %s\n", ns_engine_error(e));
	ns_engine_free(&e);
	return rc < 0;
}
