/* kv_opts.c - the KV cache type flags of run, bench and logits (commands.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "kv_type.h"

bool nsctl_kv_is_flag(const char *flag)
{
	return !strcmp(flag, "-ctk") || !strcmp(flag, "--cache-type-k") ||
	       !strcmp(flag, "-ctv") || !strcmp(flag, "--cache-type-v");
}

int nsctl_kv_set(const char *who, const char *flag, const char *val, const char **k,
		 const char **v)
{
	bool is_k = !strcmp(flag, "-ctk") || !strcmp(flag, "--cache-type-k");
	enum ns_kv_type t;

	if (!val || ns_kv_type_parse(val, &t)) {
		fprintf(stderr, "%s: %s f32|f16|q8_0 (got '%s')\n", who, flag, val ? val : "");
		return -EINVAL;
	}
	*(is_k ? k : v) = ns_kv_type_name(t);
	return 0;
}

int nsctl_kv_enum(const char *name)
{
	enum ns_kv_type t = NS_KV_F32;

	if (name)
		ns_kv_type_parse(name, &t);
	return (int)t;
}
