/* mmproj_beside.c - see mmproj_beside.h. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "mmproj_beside.h"
#include "model.h"
#include "ns_util.h"
#include "vision_hparams.h"

static bool s_candidate_name(const char *name)
{
	const size_t n = strlen(name);

	return n > 5 && strstr(name, "mmproj") && strcmp(name + n - 5, ".gguf") == 0;
}

/* The directory a model's tower is looked for in: a checkpoint directory itself, else the
 * directory holding the file. */
static int s_dir_of(const char *model, char *dir, size_t n)
{
	const char *slash = strrchr(model, '/');
	struct stat st;
	int k;

	if (stat(model, &st) == 0 && S_ISDIR(st.st_mode))
		k = snprintf(dir, n, "%s", model);
	else if (!slash)
		k = snprintf(dir, n, ".");
	else if (slash == model)
		k = snprintf(dir, n, "/");
	else
		k = snprintf(dir, n, "%.*s", (int)(slash - model), model);
	return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

/* Is path the tower of this text model? 0 yes; else the reason in why. */
static int s_fits(const char *path, uint32_t n_embd, uint32_t n_deepstack, char *why,
		  size_t whylen)
{
	struct ns_vision_hparams vhp;
	struct ns_model *t = NULL;
	char e[NS_ERR_LEN];
	int rc = ns_model_open(path, &t, e, sizeof(e));

	if (rc < 0)
		ns_errf(why, whylen, "%s", e);
	else if (!ns_vision_is_mmproj(t))
		rc = (ns_errf(why, whylen, "%s: not a vision tower (an mmproj GGUF)", path), -EINVAL);
	else if ((rc = ns_vision_hparams_load(t, &vhp, e, sizeof(e))) < 0)
		ns_errf(why, whylen, "%s: %s", path, e);
	else if (vhp.n_embd_out != n_embd)
		rc = (ns_errf(why, whylen, "%s: projection_dim %u, the model's n_embd %u", path,
			      vhp.n_embd_out, n_embd), -EINVAL);
	else if (vhp.n_deepstack != n_deepstack)
		rc = (ns_errf(why, whylen, "%s: %u DeepStack feature(s), the model takes %u", path,
			      vhp.n_deepstack, n_deepstack), -EINVAL);
	ns_model_close(&t);
	return rc;
}

int nsctl_mmproj_beside(const char *model, uint32_t n_embd, uint32_t n_deepstack, char *out,
			size_t outlen, char *why, size_t whylen, char *err, size_t errlen)
{
	char dir[PATH_MAX], path[PATH_MAX], first[PATH_MAX] = "";
	struct dirent *de;
	int found = 0, rc = 0;
	DIR *d;

	if (whylen)
		why[0] = 0;
	if ((rc = s_dir_of(model, dir, sizeof(dir))) < 0)
		return ns_errf(err, errlen, "%s: path too long", model), rc;
	if (!(d = opendir(dir))) {
		rc = -errno;
		return ns_errf(err, errlen, "%s: %s", dir, strerror(-rc)), rc;
	}
	while ((de = readdir(d)) && rc == 0) {
		char reason[NS_ERR_LEN];
		int k;

		if (!s_candidate_name(de->d_name))
			continue;
		k = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (k < 0 || (size_t)k >= sizeof(path))
			continue; /* not a path we could open either */
		if (s_fits(path, n_embd, n_deepstack, reason, sizeof(reason)) < 0) {
			if (whylen && !why[0])
				snprintf(why, whylen, "%s", reason);
			continue;
		}
		if (found++) {
			ns_errf(err, errlen, "several vision towers beside %s fit it (%s, %s): name "
				"one with --mmproj FILE, or none with --no-mmproj", model, first, path);
			rc = -EEXIST;
		} else {
			snprintf(first, sizeof(first), "%s", path);
		}
	}
	closedir(d);
	if (rc < 0)
		return rc;
	if (!found)
		return 0;
	if (snprintf(out, outlen, "%s", first) >= (int)outlen)
		return ns_errf(err, errlen, "%s: path too long", first), -ENAMETOOLONG;
	return 1;
}
