#!/bin/sh
# run_node.sh TEST.mjs - one Node test file of tests/serve (node's test runner, the official
# openai client). The client comes from the npm registry: `npm ci` here, from the committed
# package-lock.json, when node_modules lacks it (.ci/run does it first). Missing node, npm,
# the package or the oracle: skip (77) on a developer machine, fail when CI=true.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
missing() {
	echo "$1"
	[ "${CI:-}" = true ] && exit 1
	exit 77
}
command -v node >/dev/null 2>&1 || missing "node is not installed (Debian package nodejs)"
[ -d "${NS_ORACLE_DIR:-}/tiny" ] || missing "oracle data missing: ${NS_ORACLE_DIR:-unset}/tiny"
if [ ! -f "$dir/node_modules/openai/package.json" ]; then
	command -v npm >/dev/null 2>&1 || missing "npm is not installed (Debian package npm)"
	# one install at a time: the test files run in parallel
	( flock 9 && { [ -f "$dir/node_modules/openai/package.json" ] ||
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error); } ) 9>"$dir/.npm-lock" ||
		missing "npm ci in $dir failed (the openai package from the npm registry)"
fi
exec node --test --test-reporter=spec "$dir/$1"
