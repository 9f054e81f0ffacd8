# memcap_check.sh - sourced by the memory-cgroup tests. memcap_check MEMCAP returns when
# shared/tools/memcap.sh can cap a command here; otherwise the test exits 77 saying why
# (memcap.sh needs root and a writable v1 memory cgroup controller).
memcap_check() {
	local memcap=$1 root=/sys/fs/cgroup/memory probe
	if [ ! -x "$memcap" ]; then
		echo "SKIP: $memcap (the cgroup wrapper) is not there"; exit 77
	fi
	probe="$root/ns_memcap_probe.$$"
	if [ ! -w "$root" ] || ! mkdir "$probe" 2>/dev/null; then
		echo "SKIP: no writable v1 memory cgroup controller at $root (memcap.sh needs one; run as root)"
		exit 77
	fi
	rmdir "$probe"
}
