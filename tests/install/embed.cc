// embed.cc - embed.c's program in C++ (neurostream.h's extern "C"): built by
// test_install.sh with `pkg-config --cflags --libs neurostream` only; load MODEL with the
// library's default budgets, generate N tokens greedily from PROMPT, print the text.
#include <cstdio>
#include <cstdlib>
#include <string>

#include <neurostream.h>

namespace {

struct Engine {
	ns_engine *e = nullptr;
	~Engine() { ns_engine_free(&e); }
};

int on_token(const char *piece, size_t len, int32_t, void *user)
{
	static_cast<std::string *>(user)->append(piece, len);
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 4) {
		std::fprintf(stderr, "usage: embed_cxx MODEL PROMPT N\n");
		return 1;
	}
	ns_engine_opts o;
	ns_engine_opts_default(&o);
	Engine eng;
	char err[512];
	if (ns_engine_load(argv[1], &o, &eng.e, err, sizeof(err)) < 0) {
		std::fprintf(stderr, "embed_cxx: %s\n", err);
		return 1;
	}
	ns_gen_params g;
	ns_gen_params_default(&g);
	g.temperature = 0;
	g.n_predict = std::atoi(argv[3]);
	std::string text;
	if (ns_engine_generate(eng.e, argv[2], &g, on_token, &text) < 0) {
		std::fprintf(stderr, "embed_cxx: %s\n", ns_engine_error(eng.e));
		return 1;
	}
	std::fwrite(text.data(), 1, text.size(), stdout);
	return 0;
}
