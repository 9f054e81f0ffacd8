/* engine_locate.c - where the child processes' executables are: the environment, the build
 * tree, or the install tree found from this library's own location (dladdr), so a program
 * embedding the installed library finds the daemons of the prefix it was installed in. */
#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_internal.h"

/* Set by meson from its configured install directories, relative to the prefix
 * (nsctl/meson.build); these are meson's defaults. */
#ifndef NS_REL_BINDIR
#define NS_REL_BINDIR "bin"
#endif
#ifndef NS_REL_LIBDIR
#define NS_REL_LIBDIR "lib"
#endif
#ifndef NS_REL_LIBEXECDIR
#define NS_REL_LIBEXECDIR "libexec/neurostream"
#endif

/* Format a path into buf; true when it fits and is an executable file (not a directory:
 * the source tree has folders named as the executables). */
static bool __attribute__((format(printf, 3, 4))) s_exe_at(char *buf, size_t n,
							   const char *fmt, ...)
{
	struct stat st;
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return k > 0 && (size_t)k < n && stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
	       access(buf, X_OK) == 0;
}

/* dir ends with "/" rel: cut it off, leaving the prefix (true). */
static bool s_cut_suffix(char *dir, const char *rel)
{
	size_t dl = strlen(dir), rl = strlen(rel);

	if (rl == 0 || dl <= rl || dir[dl - rl - 1] != '/' || strcmp(dir + dl - rl, rel))
		return false;
	dir[dl - rl - 1] = 0;
	return true;
}

/* From the directory of a running binary (the program, or this library): the build tree's
 * ../<dir>/<name>; the install tree's <prefix>/<libexecdir>/<name> when base is the prefix's
 * bindir or libdir; <name> in base itself. */
static bool s_from_base(const char *base, const char *dir, const char *name, char *buf,
			size_t n)
{
	static const char *const rel[] = { NS_REL_BINDIR, NS_REL_LIBDIR };
	char prefix[PATH_MAX];

	if (s_exe_at(buf, n, "%s/../%s/%s", base, dir, name))
		return true;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		snprintf(prefix, sizeof(prefix), "%s", base);
		if (s_cut_suffix(prefix, rel[i]) &&
		    s_exe_at(buf, n, "%s/%s/%s", prefix, NS_REL_LIBEXECDIR, name))
			return true;
	}
	return s_exe_at(buf, n, "%s/%s", base, name);
}

/* Directory of the shared library holding this code, from the dynamic loader's record of
 * the path it loaded. false when unknown or when the code is linked into the program itself
 * (its record has no name: dladdr would answer argv[0]; /proc/self/exe covers it). */
static bool s_own_dir(char out[PATH_MAX])
{
	struct link_map *lm = NULL;
	Dl_info di;
	char *slash;

	if (!dladdr1((void *)s_own_dir, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm ||
	    !lm->l_name || !lm->l_name[0] || !realpath(lm->l_name, out))
		return false;
	slash = strrchr(out, '/');
	if (!slash)
		return false;
	*slash = 0;
	return true;
}

static bool s_exe_dir(char *out, size_t n)
{
	ssize_t k = readlink("/proc/self/exe", out, n - 1);
	char *slash;

	if (k <= 0)
		return false;
	out[k] = 0;
	slash = strrchr(out, '/');
	if (!slash)
		return false;
	*slash = 0;
	return true;
}

void nse_find_exe(const char *dir, const char *name, const char *env, char *buf, size_t n)
{
	const char *v = getenv(env), *root = getenv("NS_BUILD_ROOT");
	const char *libexec = getenv("NS_LIBEXECDIR");
	char base[PATH_MAX];

	if (v && *v) {
		snprintf(buf, n, "%s", v);
		return;
	}
	if (root && *root && s_exe_at(buf, n, "%s/%s/%s", root, dir, name))
		return;
	if (libexec && *libexec && s_exe_at(buf, n, "%s/%s", libexec, name))
		return;
	if (s_own_dir(base) && s_from_base(base, dir, name, buf, n))
		return;
	if (s_exe_dir(base, sizeof(base)) && s_from_base(base, dir, name, buf, n))
		return;
	snprintf(buf, n, "%s", name);
}
