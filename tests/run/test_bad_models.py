#!/usr/bin/env python3
"""Bad model files through the whole pipeline: every command that takes a model, on files whose
headers parse but whose data or structure is wrong, made here from the oracle's tiny models.

Cases: the file cut inside the tensor data (last tensor, a middle one, right after the header);
a split model with a shard missing, a shard cut short, a shard of another model mixed in (same
names and split keys, other shapes), a shard repeating a tensor of another; NaN / Inf weights in
F32 and F16 models; the file (or one shard) truncated while `nsctl run` streams it, or renamed
over; the file truncated just before nsio, nscompute or nsplan opens it (through --wrap);
tensor tables and metadata that contradict each other (types we cannot compute, shapes,
head and layer counts); an inconsistent vocabulary (token types shorter than the tokens, more or
fewer tokens than the embedding has rows, merges of unknown tokens, an out-of-range BOS id,
tokens of the wrong type).

Each command runs under a 30 s limit and must end by itself, not by a signal. Where the file is
unusable it must exit non-zero with a line on stderr naming the problem (the pattern of the
case); where it is usable garbage (NaN weights) it may succeed, but must end. After each
command no process of it is left (children are found by a tag in their environment) and no
shared-memory segment of its sessions (a user name of our own names them: /dev/shm/ns-USER-*).

argv: NSCTL. Env: NS_ORACLE_DIR, NS_BUILD_ROOT. Exit 0 pass, 1 fail, 77 skip (no oracle,
unless CI=true)."""
import atexit, os, re, shutil, signal, struct, subprocess, sys, tempfile, threading, time

nsctl = os.path.abspath(sys.argv[1])
oracle = os.environ.get("NS_ORACLE_DIR", "")
LIMIT = 30
fails = 0
t_start = time.monotonic()

NEEDED = ["tiny/tiny-llama-Q4_K_M.gguf", "tiny/tiny-qwen3moe-Q4_K_M.gguf",
          "tiny/tiny-gpt-oss-MXFP4_MOE.gguf",
          "tiny/tiny-qwen3-F32.gguf",
          "tiny/tiny-qwen3-F16.gguf", "tiny/split/tiny-qwen3-F32-00001-of-00003.gguf",
          "tiny/split/tiny-qwen3-F32-00002-of-00003.gguf",
          "tiny/split/tiny-qwen3-F32-00003-of-00003.gguf"]
if not oracle or not all(os.path.isfile(os.path.join(oracle, f)) for f in NEEDED):
    if os.environ.get("CI") == "true":
        print("FAIL: oracle models missing (NS_ORACLE_DIR=%r) under CI" % oracle)
        sys.exit(1)
    print("skip: oracle models missing (NS_ORACLE_DIR=%r)" % oracle)
    sys.exit(77)


def fail(msg):
    global fails
    fails += 1
    print("FAIL:", msg, flush=True)


# ---- a minimal GGUF reader / writer (stdlib only) --------------------------------------------
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}
STRING, ARRAY = 8, 9
# ggml type id -> (block elements, block bytes) for the types of the files used here
GGML = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 13: (256, 176),
        14: (256, 210), 30: (1, 2), 39: (32, 17)}


class Gguf:
    """kvs: list of [key, vtype, value] (value: python scalar, str, or (item_type, [items]));
    tensors: list of dicts name, ne, type, offset (relative), nbytes; data: the data section."""

    def __init__(self, path):
        b = open(path, "rb").read()
        self.pos = 0
        self.b = b
        magic, self.version, nt, nkv = struct.unpack_from("<4sIQQ", b, 0)
        assert magic == b"GGUF"
        self.pos = 24
        self.kvs = []
        for _ in range(nkv):
            k = self._str()
            t = self._u(4)
            self.kvs.append([k, t, self._val(t)])
        self.tensors = []
        for _ in range(nt):
            name = self._str()
            nd = self._u(4)
            ne = [self._u(8) for _ in range(nd)]
            typ = self._u(4)
            off = self._u(8)
            blk, bb = GGML[typ]
            n = 1
            for x in ne:
                n *= x
            self.tensors.append(dict(name=name, ne=ne, type=typ, offset=off,
                                     nbytes=n // blk * bb))
        self.align = self.get("general.alignment", 32)
        self.data_offset = (self.pos + self.align - 1) // self.align * self.align
        self.data = b[self.data_offset:]
        del self.b

    def _u(self, n):
        v = int.from_bytes(self.b[self.pos:self.pos + n], "little")
        self.pos += n
        return v

    def _str(self):
        n = self._u(8)
        s = self.b[self.pos:self.pos + n].decode("utf-8", "surrogateescape")
        self.pos += n
        return s

    def _val(self, t):
        if t == STRING:
            return self._str()
        if t == ARRAY:
            it = self._u(4)
            n = self._u(8)
            return (it, [self._val(it) for _ in range(n)])
        v = struct.unpack_from(SCALAR[t], self.b, self.pos)[0]
        self.pos += struct.calcsize(SCALAR[t])
        return v

    def get(self, key, default=None):
        for k, t, v in self.kvs:
            if k == key:
                return v
        return default

    def set(self, key, vtype, value):
        for kv in self.kvs:
            if kv[0] == key:
                kv[1], kv[2] = vtype, value
                return
        self.kvs.append([key, vtype, value])

    def tensor(self, name):
        return next(t for t in self.tensors if t["name"] == name)

    def file_offset(self, name):
        return self.data_offset + self.tensor(name)["offset"]

    @staticmethod
    def _enc_str(s):
        e = s.encode("utf-8", "surrogateescape")
        return struct.pack("<Q", len(e)) + e

    def _enc(self, t, v):
        if t == STRING:
            return self._enc_str(v)
        if t == ARRAY:
            it, items = v
            return struct.pack("<IQ", it, len(items)) + b"".join(self._enc(it, x) for x in items)
        return struct.pack(SCALAR[t], v)

    def write(self, path):
        """Same tensors, same data section; the header re-encoded from kvs and tensors."""
        h = [struct.pack("<4sIQQ", b"GGUF", self.version, len(self.tensors), len(self.kvs))]
        for k, t, v in self.kvs:
            h.append(self._enc_str(k) + struct.pack("<I", t) + self._enc(t, v))
        for x in self.tensors:
            h.append(self._enc_str(x["name"]) + struct.pack("<I", len(x["ne"])) +
                     b"".join(struct.pack("<Q", n) for n in x["ne"]) +
                     struct.pack("<IQ", x["type"], x["offset"]))
        hb = b"".join(h)
        hb += b"\0" * ((-len(hb)) % self.align)
        with open(path, "wb") as f:
            f.write(hb)
            f.write(self.data)

    def keep_tensors(self, names):
        """Only these tensors, packed in this order (data re-laid out)."""
        keep, data = [], b""
        for n in names:
            x = dict(self.tensor(n))
            d = self.data[x["offset"]:x["offset"] + x["nbytes"]]
            data += b"\0" * ((-len(data)) % self.align)
            x["offset"] = len(data)
            data += d
            keep.append(x)
        self.tensors, self.data = keep, data


# ---- running one command ---------------------------------------------------------------------
TAG = "nsbad%d" % os.getpid()
work = tempfile.mkdtemp(prefix="ns-badmodels-", dir=os.environ.get("NS_BUILD_ROOT") or None)
rundir = os.path.join(work, "rt")
os.mkdir(rundir, 0o700)
env = dict(os.environ, USER=TAG, XDG_RUNTIME_DIR=rundir, NS_BADMODELS_TAG=TAG)
atexit.register(shutil.rmtree, work, True)


def tagged_pids():
    """Live processes carrying our tag (the nsctl we started and everything it spawned)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                e = f.read()
            with open("/proc/%s/stat" % p) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and ("NS_BADMODELS_TAG=%s" % TAG).encode() in e.split(b"\0"):
            pids.append(int(p))
    return pids


def our_segments():
    try:
        return [s for s in os.listdir("/dev/shm") if s.startswith("ns-%s-" % TAG)]
    except OSError:
        return []


def check_clean(what):
    """No process and no segment of the command left (children get up to 3 s to go)."""
    deadline = time.monotonic() + 3
    while (tagged_pids() or our_segments()) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = tagged_pids()
    if left:
        names = []
        for p in left:
            try:
                names.append("%d %s" % (p, open("/proc/%d/comm" % p).read().strip()))
            except OSError:
                pass
        fail("%s: processes left: %s" % (what, ", ".join(names)))
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
    segs = our_segments()
    if segs:
        fail("%s: shared memory left: %s" % (what, " ".join(segs)))
        for s in segs:
            try:
                os.unlink(os.path.join("/dev/shm", s))
            except OSError:
                pass


# a crash of nsctl or of a child (nsctl reports a child's signal as "killed by signal N")
BAD_OUTPUT = re.compile(r"Sanitizer|runtime error:|core dumped|Segmentation|Assertion|"
                        r"Aborted|stack smashing|killed by signal")


def nsctl_cmd(args, expect, pattern=None, what="", during=None, limit=LIMIT, alone=False):
    """Run nsctl ARGS; expect 'error' (non-zero exit, a stderr line matching pattern) or 'ends'
    (any exit but by a signal or the time limit; an error exit still needs pattern or any line).
    during(proc): called once stdout has produced its first bytes (for mid-run faults).
    alone: the error must be nsctl's one line, refused before any process started (no line
    from or about nsio, nscompute, nsplan or nsrouter)."""
    what = what or " ".join(os.path.basename(a) if a.startswith("/") else a for a in args)
    t0 = time.monotonic()
    p = subprocess.Popen([nsctl, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=work, start_new_session=True)
    out, err = [], []

    def pump(src, dst, first=None):
        while True:
            b = src.read1(65536) if hasattr(src, "read1") else src.read(65536)
            if not b:
                return
            dst.append(b)
            if first and not first.is_set():
                first.set()

    first = threading.Event()
    th = [threading.Thread(target=pump, args=(p.stdout, out, first), daemon=True),
          threading.Thread(target=pump, args=(p.stderr, err), daemon=True)]
    for t in th:
        t.start()
    if during:
        if first.wait(limit) and p.poll() is None:
            during(p)
        else:
            fail("%s: never produced output before the fault (rc %s)" % (what, p.poll()))
    try:
        rc = p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        rc = p.wait()
        for t in th:
            t.join(2)
        fail("%s: still running after %d s (hang); stderr: %s" %
             (what, limit, b"".join(err).decode(errors="replace")[-600:]))
        check_clean(what)
        return None
    for t in th:
        t.join(5)
    dt = time.monotonic() - t0
    stderr = b"".join(err).decode(errors="replace")
    lines = [l for l in stderr.splitlines() if l.strip()]
    tail = lines[-1] if lines else ""
    if rc < 0:
        fail("%s: killed by signal %d; stderr: %s" % (what, -rc, stderr[-800:]))
    elif BAD_OUTPUT.search(stderr):
        fail("%s: crash report on stderr: %s" % (what, stderr[-1500:]))
    elif expect == "error" and rc == 0:
        fail("%s: exit 0, expected an error exit (stderr: %s)" % (what, stderr[-400:]))
    elif rc != 0 and not lines:
        fail("%s: exit %d without a line on stderr" % (what, rc))
    elif rc != 0 and pattern and not any(re.search(pattern, l) for l in lines):
        fail("%s: exit %d, no line matches /%s/; stderr: %s" % (what, rc, pattern, stderr[-600:]))
    elif alone and (len(lines) != 1 or re.search(r"nsio|nscompute|nsplan|nsrouter", stderr)):
        fail("%s: want nsctl's one line before any process; stderr: %s" % (what, stderr[-600:]))
    else:
        print("ok   %-58s exit %d %5.2fs  %s" % (what[:58], rc, dt, tail[:150]), flush=True)
    check_clean(what)
    return rc


# ---- the commands a model goes through ---------------------------------------------------------
def all_commands(model, tensor, expect, pattern, info_may_pass=True, tokenize=True):
    """Every command on MODEL. tensor: one tensor `nsctl tensor` dumps."""
    out = os.path.join(work, "out.bin")
    cmds = [
        (["run", model, "-p", "hello", "-n", "4", "--temp", "0", "-c", "64"], expect),
        (["logits", model, "--tokens", "302,417,288", "-o", out], expect),
        (["tensor", model, tensor, "-o", out], expect),
        (["plan", model], expect),
        (["bench", model, "-p", "4", "-n", "2", "-r", "1", "--no-disk", "--threads", "1",
          "-c", "64"], expect),
        (["info", model], "ends" if info_may_pass else expect),
    ]
    if tokenize:
        cmds.append((["tokenize", model, "hello world"], expect))
    for args, e in cmds:
        nsctl_cmd(args, e, pattern)


def copy(src, name):
    dst = os.path.join(work, name)
    shutil.copyfile(os.path.join(oracle, src), dst)
    os.chmod(dst, 0o644)
    return dst


def cut(path, size):
    with open(path, "r+b") as f:
        f.truncate(size)


def overwrite(path, off, data):
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)


def case(title):
    print("== %s" % title, flush=True)


LLAMA = "tiny/tiny-llama-Q4_K_M.gguf"
SPLIT = "tiny/split/tiny-qwen3-F32-%05d-of-00003.gguf"

# 1. single file cut inside the tensor data ------------------------------------------------------
g = Gguf(os.path.join(oracle, LLAMA))
last = max(g.tensors, key=lambda x: x["offset"])
mid = sorted(g.tensors, key=lambda x: x["offset"])[len(g.tensors) // 2]
size = os.path.getsize(os.path.join(oracle, LLAMA))

case("last tensor cut short by 1000 bytes")
m = copy(LLAMA, "cut-last.gguf")
cut(m, size - 1000)
all_commands(m, "token_embd.weight", "error", r"cut-last\.gguf.*truncated.*'%s'" % last["name"],
             info_may_pass=False)

case("file ends in the middle of %s" % mid["name"])
m = copy(LLAMA, "cut-mid.gguf")
cut(m, g.data_offset + mid["offset"] + mid["nbytes"] // 2)
all_commands(m, "token_embd.weight", "error", r"cut-mid\.gguf.*truncated.*'",
             info_may_pass=False)

case("headers only (file ends where the data starts)")
m = copy(LLAMA, "cut-header.gguf")
cut(m, g.data_offset)
all_commands(m, "token_embd.weight", "error", r"cut-header\.gguf.*truncated", info_may_pass=False)

# 2. split models -----------------------------------------------------------------------------
sdir = os.path.join(work, "split-missing")
os.mkdir(sdir)
for i in (1, 3):
    shutil.copyfile(os.path.join(oracle, SPLIT % i), os.path.join(sdir, os.path.basename(SPLIT % i)))
case("split model, shard 2 of 3 missing")
all_commands(os.path.join(sdir, os.path.basename(SPLIT % 1)), "token_embd.weight", "error",
             r"missing shard 2 of 3", info_may_pass=False)

sdir = os.path.join(work, "split-cut")
os.mkdir(sdir)
for i in (1, 2, 3):
    shutil.copyfile(os.path.join(oracle, SPLIT % i), os.path.join(sdir, os.path.basename(SPLIT % i)))
s3 = os.path.join(sdir, os.path.basename(SPLIT % 3))
os.chmod(s3, 0o644)
cut(s3, os.path.getsize(s3) - 4096)
case("split model, shard 3 cut short")
all_commands(os.path.join(sdir, os.path.basename(SPLIT % 1)), "token_embd.weight", "error",
             r"00003-of-00003\.gguf.*truncated", info_may_pass=False)

# shard 2 taken from another split of a qwen3 whose n_ff is 384, not 512: split keys, names and
# counts agree, the FFN shapes do not
sdir = os.path.join(work, "split-mixed")
os.mkdir(sdir)
for i in (1, 3):
    shutil.copyfile(os.path.join(oracle, SPLIT % i), os.path.join(sdir, os.path.basename(SPLIT % i)))
other = Gguf(os.path.join(oracle, SPLIT % 2))
for n in ("blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.ffn_down.weight"):
    x = other.tensor(n)
    x["ne"] = [256, 384] if x["ne"][0] == 256 else [384, 256]
    x["nbytes"] = 256 * 384 * 4
other.keep_tensors([x["name"] for x in other.tensors])
other.write(os.path.join(sdir, os.path.basename(SPLIT % 2)))
case("split model, shard 2 from another qwen3 (n_ff 384): same names and keys, other shapes")
m = os.path.join(sdir, os.path.basename(SPLIT % 1))
for args in (["run", m, "-p", "hello", "-n", "4", "--temp", "0", "-c", "64"],
             ["logits", m, "--tokens", "302,417,288", "-o", os.path.join(work, "out.bin")],
             ["bench", m, "-p", "4", "-n", "2", "-r", "1", "--no-disk", "--threads", "1",
              "-c", "64"]):
    nsctl_cmd(args, "error", r"blk\.0\.ffn_(gate|up|down)\.weight has shape")
for args in (["tensor", m, "blk.0.ffn_up.weight", "-o", os.path.join(work, "out.bin")],
             ["plan", m], ["info", m]):  # a tensor in itself, bytes: true statements
    nsctl_cmd(args, "ends")

# shard 2 rebuilt from the unsplit file with shard 1's first tensor in place of its own first
# (same count, same split keys): the same tensor in two shards
dup = Gguf(os.path.join(oracle, SPLIT % 2))
s1 = Gguf(os.path.join(oracle, SPLIT % 1))
q = Gguf(os.path.join(oracle, "tiny/tiny-qwen3-F32.gguf"))
q.keep_tensors([s1.tensors[0]["name"]] + [x["name"] for x in dup.tensors[1:]])
q.kvs = [kv for kv in dup.kvs]
sdir = os.path.join(work, "split-dup")
os.mkdir(sdir)
for i in (1, 3):
    shutil.copyfile(os.path.join(oracle, SPLIT % i), os.path.join(sdir, os.path.basename(SPLIT % i)))
q.write(os.path.join(sdir, os.path.basename(SPLIT % 2)))
case("split model, shard 2 repeats a tensor of shard 1")
all_commands(os.path.join(sdir, os.path.basename(SPLIT % 1)), "token_embd.weight", "error",
             r"'token_embd\.weight' also appears in another shard", info_may_pass=False)

# 3. NaN / Inf weights: garbage, but every command ends -------------------------------------------
NAN32, INF32, NAN16, INF16 = b"\x00\x00\xc0\x7f", b"\x00\x00\x80\x7f", b"\x00\x7e", b"\x00\x7c"
NINF32 = b"\x00\x00\x80\xff"


def poison(src, name, tensor, word):
    gg = Gguf(os.path.join(oracle, src))
    m = copy(src, name)
    overwrite(m, gg.file_offset(tensor), word * (gg.tensor(tensor)["nbytes"] // len(word)))
    return m


for src, name, tensor, word in [
        ("tiny/tiny-qwen3-F32.gguf", "nan-f32.gguf", "blk.0.attn_q.weight", NAN32),
        ("tiny/tiny-qwen3-F32.gguf", "inf-f32.gguf", "token_embd.weight", INF32),
        ("tiny/tiny-qwen3-F16.gguf", "nan-f16.gguf", "blk.1.ffn_up.weight", NAN16),
        ("tiny/tiny-qwen3-F16.gguf", "inf-f16.gguf", "blk.0.attn_v.weight", INF16),
        # MoE routers: NaN / -Inf logits must still select valid experts (or none)
        ("tiny/tiny-qwen3moe-Q4_K_M.gguf", "nan-router.gguf", "blk.0.ffn_gate_inp.weight", NAN32),
        ("tiny/tiny-gpt-oss-MXFP4_MOE.gguf", "ninf-router.gguf", "blk.1.ffn_gate_inp.bias",
         NINF32)]:
    case("%s: %s all %s" % (src, tensor, {NAN32: "NaN", NAN16: "NaN", NINF32: "-Inf"}.get(word, "Inf")))
    m = poison(src, name, tensor, word)
    out = os.path.join(work, "out.bin")
    for args in (["run", m, "-p", "hello", "-n", "6", "--temp", "0", "-c", "64"],
                 ["run", m, "-p", "hello", "-n", "6", "--seed", "3", "-c", "64"],
                 ["logits", m, "--tokens", "302,417,288", "-o", out],
                 ["tensor", m, tensor, "-o", out]):
        nsctl_cmd(args, "ends")
nsctl_cmd(["bench", os.path.join(work, "nan-f32.gguf"), "-p", "4", "-n", "2", "-r", "1",
           "--no-disk", "--threads", "1", "-c", "64"], "ends")

# 4. the file truncated while a run streams it (nsio opened it; no RAM tier: every token reads
# every matrix again) ------------------------------------------------------------------------------
case("file truncated to half while `nsctl run` streams it")
m = copy(LLAMA, "live.gguf")


def truncate_now(p):
    # the leak checks see this run: its children carry the tag, its segments our user name
    comms = set()
    for pid in tagged_pids():
        try:
            comms.add(open("/proc/%d/comm" % pid).read().strip())
        except OSError:
            pass
    if not {"nsio", "nscompute"} <= comms or not our_segments():
        fail("the leak check does not see the run's processes (%s) or segments (%s)" %
             (sorted(comms), our_segments()))
    cut(m, size // 2)


nsctl_cmd(["run", m, "-p", "hello", "-n", "3000", "--ignore-eos", "--temp", "0",
           "--ram-budget", "0", "--mem-budget", "1MB", "-c", "4096"], "error",
          r"^nsio: .*/live\.gguf: blk\.\S+ rows \d+\.\.\d+ need bytes \d+\.\.\d+ but the file now ends "
          r"at %d" % (size // 2), during=truncate_now,
          what="run (file truncated mid-run)")

case("file truncated to its header while `nsctl run` streams it, with a RAM tier of 256 KiB")
m = copy(LLAMA, "live.gguf")


def truncate_header(p):
    cut(m, g.data_offset)


nsctl_cmd(["run", m, "-p", "hello", "-n", "3000", "--ignore-eos", "--temp", "0",
           "--ram-budget", "256KB", "--mem-budget", "1MB", "-c", "4096"], "error",
          r"^nsio: .*/live\.gguf: .* but the file now ends at %d" % g.data_offset,
          during=truncate_header, what="run (file cut to its header mid-run)")

case("shard 3 of a split model truncated while `nsctl run` streams it")
sdir = os.path.join(work, "split-live")
os.mkdir(sdir)
for i in (1, 2, 3):
    shutil.copyfile(os.path.join(oracle, SPLIT % i), os.path.join(sdir, os.path.basename(SPLIT % i)))
s3 = os.path.join(sdir, os.path.basename(SPLIT % 3))
s3g = Gguf(s3)


def truncate_shard(p):
    cut(s3, s3g.data_offset + 1000)


nsctl_cmd(["run", os.path.join(sdir, os.path.basename(SPLIT % 1)), "-p", "hello", "-n", "3000",
           "--ignore-eos", "--temp", "0", "--ram-budget", "0", "--mem-budget", "2MB", "-c", "4096"],
          "error", r"^nsio: .*00003-of-00003\.gguf: blk\.1\.\S+ rows .* but the file now ends "
          r"at %d" % (s3g.data_offset + 1000), during=truncate_shard,
          what="run (split shard 3 truncated mid-run)")

# the file cut between the processes' opens: nsctl checked it, then one child finds it short
# (--wrap runs the child through a script that truncates the model first)
def wrapper(name, delay, size_to):
    path = os.path.join(work, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\nsleep %s\ntruncate -s %d %s\nexec \"$@\"\n" %
                (delay, size_to, os.path.join(work, "live.gguf")))
    os.chmod(path, 0o755)
    return path


for proc, delay, pattern in [
        ("nsio", 0, r"^nsio: .*live\.gguf: offset \d+: truncated: tensor '"),
        ("nscompute", 0, r"^nscompute: .*live\.gguf: offset \d+: truncated: tensor '"),
        # nsplan fails after nsio and nscompute opened the intact file: nsio must not wait
        # --plan-wait-ms (30 s) for a plan that will not come (limit 15 s)
        # (on a slow machine nsio or nscompute may open the file only after the cut: they
        # then refuse it themselves, which is as good)
        ("nsplan", 1.5, r"nsio: no RAM tier \(nsplan ended before publishing a plan\)|"
                        r"^(nscompute|nsio): .*live\.gguf: offset \d+: truncated")]:
    case("file truncated just before %s opens it" % proc)
    m = copy(LLAMA, "live.gguf")
    w = wrapper("trunc-%s.sh" % proc, delay, g.data_offset + mid["offset"] + 1000)
    nsctl_cmd(["run", m, "-p", "hello", "-n", "8", "--temp", "0", "-c", "64", "--ram-budget",
               "512KB", "--mem-budget", "2MB", "--wrap", "%s=%s" % (proc, w)], "error", pattern,
              what="run (file cut before %s starts)" % proc, limit=15)

case("file replaced (renamed over) while `nsctl run` streams it: the open file stays valid")
m = copy(LLAMA, "live.gguf")
other = copy("tiny/tiny-qwen3-F32.gguf", "other.gguf")


def replace_now(p):
    os.replace(other, m)


nsctl_cmd(["run", m, "-p", "hello", "-n", "200", "--ignore-eos", "--temp", "0",
           "--ram-budget", "0", "--mem-budget", "1MB", "-c", "512"], "ends", during=replace_now,
          what="run (file renamed over mid-run)")

# 4b. tensor tables and metadata that contradict each other (the bytes are all there) ----------
def table_variant(src, name, edit):
    gg = Gguf(os.path.join(oracle, src))
    edit(gg)
    path = os.path.join(work, name)
    gg.write(path)
    return path


def set_tensor(tname, **kw):
    return lambda gg: gg.tensor(tname).update(kw)


def set_key(key, vtype, value):
    return lambda gg: gg.set(key, vtype, value)


def info_runnable(m, name, pattern):
    """nsctl info shows the file either way: exit 0 and 'runnable: yes', or 'runnable: no: '
    with run's reason (pattern); a file whose hyperparameters cannot be read at all is refused
    (exit 2, the reason on stderr)."""
    p = subprocess.run([nsctl, "info", m], capture_output=True, env=env, cwd=work, timeout=LIMIT)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    line = next((l for l in out.splitlines() if l.startswith("runnable:")), None)
    if pattern is None:
        ok = p.returncode == 0 and line is not None and line.split(None, 1)[1] == "yes"
    elif p.returncode == 0:
        ok = line is not None and line.split(None, 1)[1].startswith("no: ") and \
            re.search(pattern, line) is not None
    else:
        ok = p.returncode == 2 and re.search(pattern, err) is not None and \
            len(err.splitlines()) == 1
    if ok:
        print("ok   info %-53s exit %d  %s" % (name, p.returncode, (line or err.strip())[:150]))
    else:
        fail("info %s: exit %d, runnable line %r, stderr %r (want %s)" %
             (name, p.returncode, line, err[-300:], pattern or "runnable: yes"))


QWEN, MOE = "tiny/tiny-qwen3-F32.gguf", "tiny/tiny-qwen3moe-Q4_K_M.gguf"
for src, name, edit, pattern in [
        (QWEN, "type-iq2.gguf", set_tensor("blk.0.attn_q.weight", type=16),
         r"blk\.0\.attn_q\.weight has type IQ2_XXS"),
        (QWEN, "type-99.gguf", set_tensor("blk.0.attn_q.weight", type=99),
         r"'blk\.0\.attn_q\.weight' has unknown ggml type id 99"),
        (QWEN, "norm-short.gguf", set_tensor("output_norm.weight", ne=[128]),
         r"output_norm\.weight has shape \[128\], expected \[256\]"),
        # every dimension compared and printed: a 3-D tensor where a matrix goes, a matrix
        # where a vector goes (the same number of elements in both)
        (QWEN, "q-3d.gguf", set_tensor("blk.0.attn_q.weight", ne=[256, 128, 2]),
         r"blk\.0\.attn_q\.weight has shape \[256, 128, 2\], expected \[256, 256\]"),
        (QWEN, "qnorm-2d.gguf", set_tensor("blk.0.attn_q_norm.weight", ne=[32, 2]),
         r"blk\.0\.attn_q_norm\.weight has shape \[32, 2\], expected \[64\]"),
        (QWEN, "norm-4d.gguf", set_tensor("output_norm.weight", ne=[256, 1, 1, 1]),
         None),  # trailing dimensions of 1: the same vector, computed
        (MOE, "experts-4.gguf", set_tensor("blk.0.ffn_gate_exps.weight", ne=[256, 512, 4]),
         r"blk\.0\.ffn_gate_exps\.weight has shape \[256, 512, 4\], expected \[256, 256, 8\]"),
        (MOE, "experts-4d.gguf", set_tensor("blk.0.ffn_up_exps.weight", ne=[256, 256, 4, 2]),
         r"blk\.0\.ffn_up_exps\.weight has shape \[256, 256, 4, 2\], expected \[256, 256, 8\]"),
        (MOE, "router-3d.gguf", set_tensor("blk.1.ffn_gate_inp.weight", ne=[256, 4, 2]),
         r"blk\.1\.ffn_gate_inp\.weight has shape \[256, 4, 2\], expected \[256, 8\]"),
        (QWEN, "heads-0.gguf", set_key("qwen3.attention.head_count", 4, 0),
         r"hyperparameters incomplete or inconsistent"),
        (QWEN, "kv-heads-3.gguf", set_key("qwen3.attention.head_count_kv", 4, 3),
         r"head_count 4 is not a multiple of head_count_kv 3"),
        (QWEN, "layers-3.gguf", set_key("qwen3.block_count", 4, 3), r"blk\.2\."),
        (QWEN, "embd-512.gguf", set_key("qwen3.embedding_length", 4, 512), r"512"),
        (MOE, "used-9.gguf", set_key("qwen3moe.expert_used_count", 4, 9),
         r"expert_used_count 9 exceeds expert_count 8"),
        # a dense gemma4 file claiming experts (the MoE variant's key without its others or
        # its tensors): refused, never run as dense with the experts unread
        ("tiny/tiny-gemma4-Q4_K_M.gguf", "gemma4-experts.gguf",
         set_key("gemma4.expert_count", 4, 8),
         r"gemma4 expert hyperparameters incomplete or inconsistent \(expert_count 8")]:
    case("tensor table / metadata: %s" % name)
    m = table_variant(src, name, edit)
    if pattern is None:  # a valid file: every command must succeed
        for args in (["run", m, "-p", "hello", "-n", "4", "--temp", "0", "-c", "64"],
                     ["logits", m, "--tokens", "302,417,288", "-o",
                      os.path.join(work, "out.bin")], ["plan", m]):
            rc = nsctl_cmd(args, "ends")
            if rc != 0:
                fail("%s %s: exit %s, want 0" % (args[0], name, rc))
        info_runnable(m, name, None)
        continue
    nsctl_cmd(["run", m, "-p", "hello", "-n", "4", "--temp", "0", "-c", "64"], "error", pattern,
              alone=True)
    nsctl_cmd(["logits", m, "--tokens", "302,417,288", "-o", os.path.join(work, "out.bin")],
              "error", pattern, alone=True)
    nsctl_cmd(["bench", m, "-p", "4", "-n", "2", "-r", "1", "--no-disk", "--threads", "1",
               "-c", "64"], "error", pattern, alone=True)
    # a plan for a model no backend runs would be a promise `run` breaks: refused the same way
    nsctl_cmd(["plan", m], "error", pattern)
    info_runnable(m, name, pattern)

# 5. inconsistent vocabularies -------------------------------------------------------------------
TOK = "tokenizer.ggml.tokens"
TYPES = "tokenizer.ggml.token_type"


def vocab_variant(name, edit):
    gg = Gguf(os.path.join(oracle, LLAMA))
    edit(gg)
    path = os.path.join(work, name)
    gg.write(path)
    return path


def short_types(gg):
    it, items = gg.get(TYPES)
    gg.set(TYPES, ARRAY, (it, items[:400]))


def more_tokens(gg):
    it, items = gg.get(TOK)
    gg.set(TOK, ARRAY, (it, items + ["zqx%d" % i for i in range(88)]))
    it, items = gg.get(TYPES)
    gg.set(TYPES, ARRAY, (it, items + [4] * 88))  # user-defined: split out of any text


def fewer_tokens(gg):
    it, items = gg.get(TOK)
    gg.set(TOK, ARRAY, (it, items[:400]))
    it, items = gg.get(TYPES)
    gg.set(TYPES, ARRAY, (it, items[:400]))
    gg.set("tokenizer.ggml.bos_token_id", 4, 1)
    gg.set("tokenizer.ggml.eos_token_id", 4, 2)


def unknown_merges(gg):
    it, items = gg.get("tokenizer.ggml.merges")
    gg.set("tokenizer.ggml.merges", ARRAY, (it, ["zq%d xv%d" % (i, i) for i in range(40)] +
                                            items[40:]))


def bad_bos(gg):
    gg.set("tokenizer.ggml.bos_token_id", 4, 100000)


def int_tokens(gg):
    it, items = gg.get(TOK)
    gg.set(TOK, ARRAY, (4, list(range(len(items)))))


for name, edit, expect, pattern, prompt in [
        ("vocab-short-types.gguf", short_types, "error", r"token_type", "hello"),
        ("vocab-more-tokens.gguf", more_tokens, "error",
         r"vocab-more-tokens\.gguf: the vocabulary has 600 tokens but token_embd\.weight has 512 rows",
         "zqx7 zqx80"),
        ("vocab-fewer-tokens.gguf", fewer_tokens, "error",
         r"vocab-fewer-tokens\.gguf: the vocabulary has 400 tokens but token_embd\.weight has 512 rows",
         "hello"),
        ("vocab-unknown-merges.gguf", unknown_merges, "ends", r"merge", "hello"),
        ("vocab-bad-bos.gguf", bad_bos, "error", r"BOS|bos", "hello"),
        ("vocab-int-tokens.gguf", int_tokens, "error", r"tokenizer\.ggml\.tokens", "hello")]:
    case("vocabulary: %s" % name)
    m = vocab_variant(name, edit)
    # tokenize needs only the vocabulary: a vocabulary consistent in itself may tokenize
    tok_expect = "ends" if name in ("vocab-more-tokens.gguf", "vocab-fewer-tokens.gguf") else expect
    nsctl_cmd(["tokenize", m, prompt], tok_expect, pattern)
    nsctl_cmd(["run", m, "-p", prompt, "-n", "6", "--temp", "0", "-c", "64"], expect, pattern)
    nsctl_cmd(["run", m, "-p", prompt, "-n", "6", "--seed", "1", "-c", "64"], expect, pattern)
    nsctl_cmd(["logits", m, "--tokens", "1,2,3", "-o", os.path.join(work, "out.bin")],
              "ends", pattern)

print("%s: %d failure(s), %.1f s" % ("FAIL" if fails else "PASS", fails,
                                     time.monotonic() - t_start))
sys.exit(1 if fails else 0)
