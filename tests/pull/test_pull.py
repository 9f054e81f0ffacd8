#!/usr/bin/env python3
"""nsctl pull against hubfixture.py, a local stand-in for the Hugging Face hub (its URL layout,
headers, redirects to a "CDN" on another host, ranges, errors). No test touches the network.

Models are made with `nsctl mkmodel` (real GGUF files, random weights); what the pulled files
must be is known from the files served: their sha256, sizes and bytes. What the cache must
look like is huggingface_hub's layout, written down here from its file_download.py (blobs
named by checksum, snapshot symlinks ../../blobs/<oid>, refs/main holding the commit), and a
cache in that layout is built here by hand to check that nsctl reuses what `hf` fetched.

Cases: a whole download; the default quant and the dry run; split shards; a quant or file the
repo does not have; resume after a kill mid-file (the server's log shows only the rest sent,
as a Range request); a connection cut mid-file, resumed within the run; a server that ignores
Range; a corrupted byte refused (no final name, nothing left); 401/404/500 from the API and
from resolve, each one line; HF_TOKEN (and the token file) sent as a Bearer header to the hub
and never to the CDN; a renamed repo's relative redirect; a safetensors checkpoint with an
index; reuse of an hf-layout cache and of a --local-dir; -o DIR; bad names and options, an
unwritable -o, a disk too small (refused before any byte) and a write failure (RLIMIT_FSIZE);
the progress line on a terminal only; run/info/bench given REPO:QUANT (offline, from the
cache), and a clear line when it was not pulled.
argv: NSCTL HUBFIXTURE. Exit 0 pass, 1 fail."""
import hashlib
import json
import os
import pty
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NSCTL, FIXTURE = sys.argv[1:3]
TMP = tempfile.mkdtemp(prefix="ns-pull-")
TOKEN = "hf_" + "x" * 34
COMMIT = "c0ffee" + "0123456789abcdef" * 2 + "0123456789"[:2]
SANITIZER = ("runtime error", "AddressSanitizer", "LeakSanitizer")
failures = []
server = None


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ---- the files served ----

M = os.path.join(TMP, "models")
os.makedirs(M)


def mk(name, *args):
    path = os.path.join(M, name)
    subprocess.run([NSCTL, "mkmodel", "--preset", "demo", "-o", path] + list(args), check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    return path


Q8 = mk("Demo-Q8_0.gguf", "--quant", "q8_0")
Q4KM = mk("Demo-Q4_K_M.gguf", "--quant", "q4_k_m", "--seed", "3")
mk("Demo-Q4_0.gguf", "--quant", "q4_0", "--split", "3", "--seed", "2")
Q4_0 = [os.path.join(M, "Demo-Q4_0-%05d-of-00003.gguf" % i) for i in (1, 2, 3)]
SMALL = mk("Small-Q8_0.gguf", "--quant", "q8_0", "--layers", "1")
with open(os.path.join(M, "mmproj-Demo-F16.gguf"), "wb") as f:
    f.write(os.urandom(50000))
for i in (1, 2):
    with open(os.path.join(M, "shard%d" % i), "wb") as f:
        f.write(os.urandom(300000 + i))
with open(os.path.join(M, "consolidated"), "wb") as f:
    f.write(os.urandom(1000))
INDEX = json.dumps({"metadata": {"total_size": 600003}, "weight_map": {
    "model.layers.0.w": "model-00001-of-00002.safetensors",
    "model.layers.1.w": "model-00002-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors"}})


def lfs(path, **kw):
    d = {"file": path}
    d.update(kw)
    return d


def text(t, **kw):
    d = {"text": t, "lfs": False}
    d.update(kw)
    return d


DEMO_FILES = {
    "Demo-Q8_0.gguf": lfs(Q8), "Demo-Q4_K_M.gguf": lfs(Q4KM),
    "Demo-Q4_0-00001-of-00003.gguf": lfs(Q4_0[0]), "Demo-Q4_0-00002-of-00003.gguf": lfs(Q4_0[1]),
    "Demo-Q4_0-00003-of-00003.gguf": lfs(Q4_0[2]),
    "mmproj-Demo-F16.gguf": lfs(os.path.join(M, "mmproj-Demo-F16.gguf")),
    "README.md": text("# Demo\n"), ".gitattributes": text("*.gguf filter=lfs\n"),
}


def repo(files, **kw):
    r = {"commit": COMMIT, "files": files}
    r.update(kw)
    return r


CONFIG = {"token": TOKEN, "renamed": {"old/Demo-GGUF": "test/Demo-GGUF"}, "repos": {
    "test/Demo-GGUF": repo(DEMO_FILES),
    "test/Private-GGUF": repo({"Small-Q8_0.gguf": lfs(SMALL)}, private=True),
    "test/Stall-GGUF": repo({"Demo-Q8_0.gguf": lfs(Q8, fault={"stall_at": 8 << 20})}),
    "test/Drop-GGUF": repo({"Demo-Q8_0.gguf": lfs(Q8, fault={"drop_at": 5 << 20})}),
    "test/NoRange-GGUF": repo({"Demo-Q8_0.gguf": lfs(Q8, fault="ignore_range")}),
    "test/Corrupt-GGUF": repo({"Demo-Q8_0.gguf": lfs(Q8, fault="corrupt")}),
    "test/BadRange-GGUF": repo({"Demo-Q8_0.gguf": lfs(Q8, fault="wrong_range")}),
    "test/Inconsistent-GGUF": repo({"Small-Q8_0.gguf": lfs(SMALL, listed_sha="ab" * 32)}),
    "test/Down-GGUF": repo({"Small-Q8_0.gguf": lfs(SMALL)}, fail="api500"),
    "test/Broken-GGUF": repo({"Small-Q8_0.gguf": lfs(SMALL)}, fail="resolve500"),
    "test/Vanished-GGUF": repo({"Small-Q8_0.gguf": lfs(SMALL, vanished=True)}),
    "test/Huge-GGUF": repo({"Huge-Q8_0.gguf": lfs(SMALL, size=1 << 50)}),
    "test/Evil-GGUF": repo({"../../../escape-Q8_0.gguf": lfs(SMALL), "sub/../../up-Q8_0.gguf":
                            lfs(SMALL), "ok-Q8_0.gguf": lfs(SMALL)}),
    "test/Checkpoint": repo({
        "config.json": text('{"architectures": ["Qwen3ForCausalLM"]}\n'),
        "generation_config.json": text("{}\n", weak_etag=True),
        "tokenizer.json": lfs(os.path.join(M, "shard1")),
        "tokenizer_config.json": text('{"bos_token": null}\n'),
        "chat_template.jinja": text("{{ messages }}\n"),
        "model.safetensors.index.json": text(INDEX),
        "model-00001-of-00002.safetensors": lfs(os.path.join(M, "shard1")),
        "model-00002-of-00002.safetensors": lfs(os.path.join(M, "shard2")),
        "original/consolidated.safetensors": lfs(os.path.join(M, "consolidated")),
        "README.md": text("# ckpt\n")}),
}}
CFG = os.path.join(TMP, "hub.json")
with open(CFG, "w") as f:
    json.dump(CONFIG, f)
LOG = os.path.join(TMP, "hub.log")
open(LOG, "w").close()
PORT_FILE = os.path.join(TMP, "port")
server = subprocess.Popen([sys.executable, FIXTURE, CFG, PORT_FILE, LOG])
for _ in range(300):
    if os.path.exists(PORT_FILE) or server.poll() is not None:
        break
    time.sleep(0.05)
if not os.path.exists(PORT_FILE):
    print("FAIL: the hub fixture did not start")
    sys.exit(1)
PORT = int(open(PORT_FILE).read())
ENDPOINT = "http://127.0.0.1:%d" % PORT
CDN_HOST = "localhost:%d" % PORT

# ---- running nsctl ----

HOME = os.path.join(TMP, "home")
os.makedirs(HOME)
BASE_ENV = {k: v for k, v in os.environ.items()
            if not k.startswith(("HF_", "HUGGINGFACE_")) and "proxy" not in k.lower()}
BASE_ENV.update({"HOME": HOME, "HF_HOME": os.path.join(TMP, "hfhome"), "NO_PROXY": "*",
                 "HF_ENDPOINT": ENDPOINT, "XDG_CACHE_HOME": os.path.join(TMP, "xdg")})
n_cache = 0


def new_cache():
    global n_cache
    n_cache += 1
    return os.path.join(TMP, "cache%d" % n_cache)


def env_for(cache, **extra):
    env = dict(BASE_ENV)
    if cache:
        env["HF_HUB_CACHE"] = cache
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def log_mark():
    return os.path.getsize(LOG)


def log_since(mark):
    with open(LOG) as f:
        f.seek(mark)
        return [json.loads(line) for line in f if line.strip()]


def nsctl(args, cache=None, timeout=60, preexec=None, **env):
    try:
        p = subprocess.run([NSCTL] + args, env=env_for(cache, **env), capture_output=True,
                           text=True, timeout=timeout, preexec_fn=preexec)
    except subprocess.TimeoutExpired:
        fail("%s: no answer within %d s" % (" ".join(args), timeout))
        return -1, "", ""
    if any(s in p.stderr for s in SANITIZER):
        fail("%s: sanitizer report:\n%s" % (" ".join(args), p.stderr))
    return p.returncode, p.stdout, p.stderr


def pull(args, cache=None, **kw):
    return nsctl(["pull"] + args, cache, **kw)


def lines(s):
    return [ln for ln in s.splitlines() if ln.strip()]


def expect_ok(what, rc, out, err):
    if rc != 0:
        fail("%s: exit %d, stderr: %s" % (what, rc, err.strip()))
        return False
    return True


def expect_error(what, rc, err, code, words, only_line=True):
    """One clear line: exit code, the last stderr line says words (case-insensitive), and
    when only_line, stderr is that line alone."""
    ls = lines(err)
    if rc != code:
        fail("%s: exit %d, want %d (stderr: %s)" % (what, rc, code, err.strip()))
        return
    if not ls:
        fail("%s: no error line" % what)
        return
    if only_line and len(ls) != 1:
        fail("%s: %d stderr lines, want 1:\n%s" % (what, len(ls), err))
    last = ls[-1].lower()
    if not last.startswith("nsctl pull: ") and not last.startswith("nsctl "):
        fail("%s: the line does not name the command: %s" % (what, ls[-1]))
    for w in words:
        if w.lower() not in last:
            fail("%s: '%s' not in the line: %s" % (what, w, ls[-1]))


def repo_dir(cache, name):
    return os.path.join(cache, "models--" + name.replace("/", "--"))


def check_cached(what, cache, name, path_in_repo, src):
    """huggingface_hub's layout for one file: snapshots/<commit>/<path> -> ../../blobs/<sha>."""
    rd = repo_dir(cache, name)
    link = os.path.join(rd, "snapshots", COMMIT, path_in_repo)
    if not os.path.islink(link):
        fail("%s: %s is not a symlink" % (what, link))
        return
    sha = sha256(src) if isinstance(src, str) else None
    data = None if isinstance(src, str) else src
    oid = sha if sha else git_blob_id(data)
    depth = path_in_repo.count("/")
    want_target = "../" * (2 + depth) + "blobs/" + oid
    if os.readlink(link) != want_target:
        fail("%s: %s -> %s, want %s" % (what, link, os.readlink(link), want_target))
    blob = os.path.join(rd, "blobs", oid)
    got = sha256(blob) if os.path.exists(blob) else None
    if sha and got != sha or data is not None and (not os.path.exists(blob) or
                                                     open(blob, "rb").read() != data):
        fail("%s: blob %s is not the file served" % (what, blob))
    if os.path.exists(blob + ".incomplete"):
        fail("%s: %s.incomplete left behind" % (what, blob))
    ref = os.path.join(rd, "refs", "main")
    if not os.path.exists(ref) or open(ref).read() != COMMIT:
        fail("%s: refs/main is not the commit" % what)


def gets(recs, cdn_only=True):
    return [r for r in recs if r["method"] == "GET" and (not cdn_only or
                                                         r["path"].startswith("/cdn/"))]


# ---- the cases ----

def test_whole_download():
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0"], cache)
    if not expect_ok("whole download", rc, out, err):
        return
    link = os.path.join(repo_dir(cache, "test/Demo-GGUF"), "snapshots", COMMIT, "Demo-Q8_0.gguf")
    if out.strip() != link:
        fail("whole download: stdout %r, want %r" % (out.strip(), link))
    check_cached("whole download", cache, "test/Demo-GGUF", "Demo-Q8_0.gguf", Q8)
    recs = log_since(mark)
    g = gets(recs)
    if len(g) != 1 or g[0]["range"] or g[0]["sent"] != os.path.getsize(Q8) \
            or g[0]["host"] != CDN_HOST or g[0]["auth"]:
        fail("whole download: want one plain GET of the CDN, got %s" % g)
    if any(r["method"] == "GET" and "/resolve/" in r["path"] for r in recs):
        fail("whole download: an LFS file's bytes were asked of resolve, not of its redirect")
    if "\r" in err or "ETA" in err:
        fail("whole download: progress drawn on a pipe: %r" % err)
    # pulled again: nothing fetched
    mark = log_mark()
    rc, out2, err = pull(["test/Demo-GGUF:Q8_0"], cache)
    if expect_ok("second pull", rc, out2, err) and (gets(log_since(mark)) or out2 != out):
        fail("second pull: fetched again or another path: %s" % gets(log_since(mark)))
    # run / info / bench take REPO:QUANT from the cache, offline (the endpoint is dead)
    dead = "http://127.0.0.1:9"
    rc, a, e1 = nsctl(["info", "test/Demo-GGUF:Q8_0", "--json"], cache, HF_ENDPOINT=dead)
    rc2, b, e2 = nsctl(["info", Q8, "--json"], cache)
    if rc or rc2:
        fail("info REPO:QUANT: exit %d (%s)" % (rc, e1.strip()))
    else:
        ja, jb = json.loads(a), json.loads(b)
        if ja.pop("path") != link or ja.pop("shards") != [link]:
            fail("info REPO:QUANT: not the pulled file's path: %s" % a[:300])
        jb.pop("path")
        jb.pop("shards")
        if ja != jb:
            fail("info REPO:QUANT describes another file than the one pulled")
    rc, a, e1 = nsctl(["run", "test/Demo-GGUF:Q8_0", "-p", "hello", "-n", "4", "--temp", "0"],
                      cache, HF_ENDPOINT=dead)
    rc2, b, _ = nsctl(["run", Q8, "-p", "hello", "-n", "4", "--temp", "0"], cache)
    if rc or rc2 or a != b or not a:
        fail("run REPO:QUANT: exit %d, text %r vs %r (%s)" % (rc, a, b, e1.strip()[-300:]))
    rc, a, e1 = nsctl(["bench", "test/Demo-GGUF:Q8_0", "-p", "0", "-n", "2", "-r", "1", "-o",
                       "json"], cache, HF_ENDPOINT=dead, timeout=120)
    if rc or "Demo" not in a and "llama" not in a:
        fail("bench REPO:QUANT: exit %d (%s)" % (rc, e1.strip()[-300:]))


def test_not_pulled():
    cache = new_cache()
    for cmd in (["info"], ["run", "-p", "x"], ["bench", "-p", "0", "-n", "1"]):
        args = [cmd[0], "test/Demo-GGUF:Q8_0"] + cmd[1:]
        rc, out, err = nsctl(args, cache)
        ls = lines(err)
        if rc != 2 or len(ls) != 1 or "nsctl pull test/Demo-GGUF:Q8_0" not in ls[0] \
                or not ls[0].startswith("nsctl " + cmd[0]):
            fail("%s before pull: exit %d, stderr %r" % (cmd[0], rc, err))
    # a missing local file stays a missing file, not a hub name
    rc, out, err = nsctl(["info", "models/absent.gguf"], cache)
    if rc != 2 or "pull" in err:
        fail("info of a missing dir/file.gguf: %d %r" % (rc, err))
    # pulled Q8_0 only: Q4_K_M is not there, and the line says what is
    pull(["test/Demo-GGUF:Q8_0", "-q"], cache)
    rc, out, err = nsctl(["info", "test/Demo-GGUF:Q4_K_M"], cache)
    if rc != 2 or "Q8_0" not in err or "nsctl pull test/Demo-GGUF:Q4_K_M" not in err:
        fail("info of a quant not pulled: %d %r" % (rc, err))


def test_default_and_dry_run():
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF", "--dry-run"], cache)
    if not expect_ok("dry run", rc, out, err):
        return
    rows = [ln for ln in out.splitlines() if ln.startswith("  ")]
    if len(rows) != 1 or "Demo-Q4_K_M.gguf" not in rows[0] \
            or str(os.path.getsize(Q4KM)) not in rows[0] or "to fetch" not in rows[0]:
        fail("dry run: want Demo-Q4_K_M.gguf (llama.cpp's default) with its size:\n" + out)
    if os.path.exists(cache):
        fail("dry run: wrote %s" % cache)
    if [r for r in gets(log_since(mark), cdn_only=False) if not r["path"].startswith("/api/")]:
        fail("dry run: fetched file bytes")
    # split shards: all three, the first one's path printed
    rc, out, err = pull(["test/Demo-GGUF:Q4_0", "--dry-run"], cache)
    rows = [ln for ln in out.splitlines() if ln.startswith("  ")]
    if rc or [r.split()[0] for r in rows] != [os.path.basename(p) for p in Q4_0]:
        fail("dry run of the split model: %s" % out)


def test_shards():
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF/Demo-Q4_0-00002-of-00003.gguf"], cache)
    if not expect_ok("shards", rc, out, err):
        return
    for p in Q4_0:
        check_cached("shards", cache, "test/Demo-GGUF", os.path.basename(p), p)
    if not out.strip().endswith("Demo-Q4_0-00001-of-00003.gguf"):
        fail("shards: stdout %r is not the first shard" % out)
    if len(gets(log_since(mark))) != 3:
        fail("shards: want 3 CDN GETs")
    rc, a, e = nsctl(["info", "test/Demo-GGUF:Q4_0"], cache)
    if rc or "3 shards" not in a:
        fail("info of the pulled split model: %d %s" % (rc, e))
    # run on the split model through the cache's symlinks (shards found by their names)
    rc, a, e = nsctl(["run", "test/Demo-GGUF:q4_0", "-p", "hi", "-n", "3", "--temp", "0"], cache)
    rc2, b, _ = nsctl(["run", Q4_0[0], "-p", "hi", "-n", "3", "--temp", "0"], cache)
    if rc or a != b:
        fail("run of the pulled split model: exit %d %r vs %r (%s)" % (rc, a, b, e.strip()))


def test_missing():
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q3_K_S"], cache)
    expect_error("unknown quant", rc, err, 2, ["Q3_K_S", "Q4_0 (3 shards)", "Q4_K_M", "Q8_0"])
    if "mmproj" in err or "F16" in err:
        fail("unknown quant: the projector is listed as a model: %s" % err)
    rc, out, err = pull(["test/Demo-GGUF/nope.gguf"], cache)
    expect_error("missing file", rc, err, 2, ["nope.gguf", "not in test/Demo-GGUF"])
    if gets(log_since(mark), cdn_only=False) and any(
            "/resolve/" in r["path"] for r in log_since(mark)):
        fail("missing quant/file: resolve was asked")
    rc, out, err = pull(["test/Vanished-GGUF"], cache, HF_TOKEN=TOKEN)
    expect_error("404 from resolve", rc, err, 2, ["404", "no such file", "Small-Q8_0.gguf"])


def test_cache_dirs():
    # where the cache is, as huggingface_hub finds it: HF_HUB_CACHE, HF_HOME/hub,
    # XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub
    def dest(**env):
        rc, out, err = pull(["test/Demo-GGUF:Q8_0", "--dry-run"], None, **env)
        return out.splitlines()[0].split(" -> ")[-1] if rc == 0 and out else err
    want = "/models--test--Demo-GGUF"
    rows = [({"HF_HUB_CACHE": "/c1", "HF_HOME": "/h"}, "/c1" + want),
            ({"HF_HUB_CACHE": None, "HUGGINGFACE_HUB_CACHE": "/c2", "HF_HOME": "/h"}, "/c2" + want),
            ({"HF_HUB_CACHE": None, "HF_HOME": "/h"}, "/h/hub" + want),
            ({"HF_HUB_CACHE": None, "HF_HOME": None, "XDG_CACHE_HOME": "/x"},
             "/x/huggingface/hub" + want),
            ({"HF_HUB_CACHE": None, "HF_HOME": None, "XDG_CACHE_HOME": None},
             HOME + "/.cache/huggingface/hub" + want)]
    for env, path in rows:
        got = dest(**env)
        if got != path:
            fail("cache folder with %s: %r, want %r" % (env, got, path))


def test_hostile_listing():
    # paths that would leave the snapshot folder are not files of the repo
    cache = new_cache()
    rc, out, err = pull(["test/Evil-GGUF:Q8_0"], cache)
    if expect_ok("hostile listing", rc, out, err):
        if not out.strip().endswith("/ok-Q8_0.gguf"):
            fail("hostile listing: pulled %r" % out)
        if os.path.exists(os.path.join(TMP, "escape-Q8_0.gguf")) or os.path.exists(
                os.path.join(cache, "up-Q8_0.gguf")):
            fail("hostile listing: a file was written outside the cache")
    rc, out, err = pull(["test/Evil-GGUF:Q4_0"], cache)
    if "escape" in err or "up-Q8_0" in err:
        fail("hostile listing: unsafe paths listed as the repo's: %s" % err)


def test_http_errors():
    cache = new_cache()
    rc, out, err = pull(["test/Private-GGUF"], cache)
    expect_error("401 without a token", rc, err, 2, ["401", "test/Private-GGUF", "HF_TOKEN"])
    rc, out, err = pull(["test/Private-GGUF"], cache, HF_TOKEN="hf_wrong")
    expect_error("401 wrong token", rc, err, 2, ["401", "refused HF_TOKEN"])
    rc, out, err = pull(["test/Nowhere-GGUF"], cache, HF_TOKEN=TOKEN)
    expect_error("404 repo", rc, err, 2, ["404", "test/Nowhere-GGUF", "not found"])
    rc, out, err = pull(["test/Down-GGUF"], cache)
    expect_error("500 from the API", rc, err, 1, ["500", "Internal Server Error"])
    rc, out, err = pull(["test/Broken-GGUF"], cache)
    expect_error("500 from resolve", rc, err, 1, ["500", "Small-Q8_0.gguf"])
    rc, out, err = pull(["test/Demo-GGUF"], cache, HF_ENDPOINT="http://127.0.0.1:9")
    expect_error("no server", rc, err, 1, ["connect"])
    rc, out, err = pull(["test/Demo-GGUF"], cache, HF_ENDPOINT="ftp://x")
    expect_error("bad endpoint", rc, err, 2, ["HF_ENDPOINT"])
    rc, out, err = pull(["test/Demo-GGUF"], cache, HF_HUB_OFFLINE="1")
    expect_error("offline", rc, err, 2, ["HF_HUB_OFFLINE"])


def test_token():
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Private-GGUF"], cache, HF_TOKEN=TOKEN)
    if not expect_ok("HF_TOKEN", rc, out, err):
        return
    check_cached("HF_TOKEN", cache, "test/Private-GGUF", "Small-Q8_0.gguf", SMALL)
    recs = log_since(mark)
    hub = [r for r in recs if r["host"] != CDN_HOST]
    cdn = [r for r in recs if r["host"] == CDN_HOST]
    if not hub or any(r["auth"] != "Bearer " + TOKEN for r in hub):
        fail("HF_TOKEN: not sent as a Bearer header to every hub request: %s" % hub)
    if not cdn or any(r["auth"] for r in cdn):
        fail("HF_TOKEN: sent to the CDN (another host): %s" % cdn)
    # the token file `hf auth login` writes, when HF_TOKEN is not set
    home = os.path.join(TMP, "hfhome-token")
    os.makedirs(home)
    with open(os.path.join(home, "token"), "w") as f:
        f.write(TOKEN + "\n")
    rc, out, err = pull(["test/Private-GGUF", "--dry-run"], new_cache(), HF_HOME=home)
    expect_ok("token file", rc, out, err)


def wait_for(cond, timeout):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    return None


def test_resume_after_kill():
    cache = new_cache()
    stall = 8 << 20
    size = os.path.getsize(Q8)
    sha = sha256(Q8)
    partial = os.path.join(repo_dir(cache, "test/Stall-GGUF"), "blobs", sha + ".incomplete")
    mark = log_mark()
    p = subprocess.Popen([NSCTL, "pull", "test/Stall-GGUF:Q8_0"], env=env_for(cache),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stalled = wait_for(lambda: [r for r in log_since(mark) if r.get("stalled")], 30)
    got = wait_for(lambda: os.path.exists(partial) and os.path.getsize(partial) == stall, 10)
    p.kill()
    p.communicate()
    if not stalled or not got:
        fail("resume: the pull did not reach byte %d before the kill (partial %s)" %
             (stall, os.path.getsize(partial) if os.path.exists(partial) else None))
        return
    blob = partial[:-len(".incomplete")]
    if os.path.exists(blob) or os.path.lexists(os.path.join(
            repo_dir(cache, "test/Stall-GGUF"), "snapshots", COMMIT, "Demo-Q8_0.gguf")):
        fail("resume: the killed download has its final name")
    rc, out, err = pull(["test/Stall-GGUF:Q8_0", "--dry-run"], cache)
    if rc or "partial: 8.00 MiB" not in out:
        fail("resume: the dry run does not show the partial file: %s" % out)
    mark = log_mark()
    rc, out, err = pull(["test/Stall-GGUF:Q8_0"], cache)
    if not expect_ok("resume", rc, out, err):
        return
    g = gets(log_since(mark))
    if len(g) != 1 or g[0]["range"] != "bytes=%d-" % stall or g[0]["status"] != 206 \
            or g[0]["sent"] != size - stall:
        fail("resume: want one GET of bytes %d- sending %d bytes, got %s" %
             (stall, size - stall, g))
    if "continued" not in err:
        fail("resume: the per-file line does not say it continued: %s" % err)
    check_cached("resume", cache, "test/Stall-GGUF", "Demo-Q8_0.gguf", Q8)


def test_drop_and_no_range():
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Drop-GGUF:Q8_0"], cache)
    if expect_ok("connection cut", rc, out, err):
        g = gets(log_since(mark))
        if len(g) != 2 or not g[0].get("dropped") or g[1]["range"] != "bytes=%d-" % (5 << 20):
            fail("connection cut: want the cut GET then one from byte %d: %s" % (5 << 20, g))
        check_cached("connection cut", cache, "test/Drop-GGUF", "Demo-Q8_0.gguf", Q8)
    # a partial file, and a server that answers the range with the whole file: started over
    cache = new_cache()
    part = partial_of(cache, "test/NoRange-GGUF", Q8, 1 << 20)
    with open(part, "r+b") as f:  # a prefix with a wrong last byte
        f.seek((1 << 20) - 1)
        f.write(b"\xff")
    mark = log_mark()
    rc, out, err = pull(["test/NoRange-GGUF:Q8_0"], cache)
    if expect_ok("range ignored", rc, out, err):
        g = gets(log_since(mark))
        if len(g) != 1 or g[0]["status"] != 200 or g[0]["range"] != "bytes=%d-" % (1 << 20):
            fail("range ignored: %s" % g)
        check_cached("range ignored", cache, "test/NoRange-GGUF", "Demo-Q8_0.gguf", Q8)


def partial_of(cache, name, src, n):
    """A partial download of the first n bytes of src, as a killed pull leaves it."""
    blobs = os.path.join(repo_dir(cache, name), "blobs")
    os.makedirs(blobs, exist_ok=True)
    path = os.path.join(blobs, sha256(src) + ".incomplete")
    with open(src, "rb") as f, open(path, "wb") as out:
        out.write(f.read(n))
    return path


def test_corrupt():
    # a range answered from another offset: refused in one line, the partial kept
    cache = new_cache()
    part = partial_of(cache, "test/BadRange-GGUF", Q8, 1 << 20)
    rc, out, err = pull(["test/BadRange-GGUF:Q8_0"], cache)
    expect_error("wrong Content-Range", rc, err, 1, ["range request", "bytes 0-"])
    if not os.path.exists(part) or os.path.getsize(part) != 1 << 20:
        fail("wrong Content-Range: the partial file was changed")
    # the listing and resolve disagree on the checksum
    rc, out, err = pull(["test/Inconsistent-GGUF"], cache)
    expect_error("listing vs resolve", rc, err, 1, ["checksum", "ab" * 32, sha256(SMALL)])
    cache = new_cache()
    rc, out, err = pull(["test/Corrupt-GGUF:Q8_0"], cache)
    expect_error("corrupt byte", rc, err, 1, ["hash", "refused", sha256(Q8)])
    rd = repo_dir(cache, "test/Corrupt-GGUF")
    left = []
    for root, dirs, files in os.walk(rd):
        left += [os.path.join(root, f) for f in files]
    if any("blobs" in f for f in left) or os.path.lexists(
            os.path.join(rd, "snapshots", COMMIT, "Demo-Q8_0.gguf")):
        fail("corrupt byte: something kept or named: %s" % left)
    if os.path.exists(os.path.join(rd, "refs", "main")):
        fail("corrupt byte: refs/main written for a failed pull")


def test_renamed():
    cache = new_cache()
    rc, out, err = pull(["old/Demo-GGUF:Q8_0"], cache)
    if expect_ok("renamed repo", rc, out, err):
        check_cached("renamed repo", cache, "old/Demo-GGUF", "Demo-Q8_0.gguf", Q8)


def test_checkpoint():
    cache = new_cache()
    rc, out, err = pull(["test/Checkpoint", "--dry-run"], cache)
    names = sorted(ln.split()[0] for ln in out.splitlines() if ln.startswith("  "))
    want = sorted(["config.json", "generation_config.json", "tokenizer.json",
                   "tokenizer_config.json", "chat_template.jinja", "model.safetensors.index.json",
                   "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])
    if rc or names != want:
        fail("checkpoint dry run: %s, want %s (%s)" % (names, want, err.strip()))
    if os.path.exists(cache):
        fail("checkpoint dry run wrote the cache")
    mark = log_mark()
    rc, out, err = pull(["test/Checkpoint"], cache)
    if not expect_ok("checkpoint", rc, out, err):
        return
    snap = os.path.join(repo_dir(cache, "test/Checkpoint"), "snapshots", COMMIT)
    if out.strip() != snap:
        fail("checkpoint: stdout %r, want the snapshot folder" % out)
    have = sorted(os.listdir(snap))
    if have != want:
        fail("checkpoint: snapshot holds %s" % have)
    files = CONFIG["repos"]["test/Checkpoint"]["files"]
    for name in want:
        spec = files[name]
        check_cached("checkpoint", cache, "test/Checkpoint", name,
                     spec["file"] if "file" in spec else spec["text"].encode())
    if any("consolidated" in r["path"] or "README" in r["path"] for r in log_since(mark)):
        fail("checkpoint: fetched a file the checkpoint does not need")


def test_hf_cache_reuse():
    # a cache as huggingface_hub writes it, built by hand
    cache = new_cache()
    rd = repo_dir(cache, "test/Demo-GGUF")
    sha = sha256(Q8)
    os.makedirs(os.path.join(rd, "blobs"))
    os.makedirs(os.path.join(rd, "snapshots", COMMIT))
    os.makedirs(os.path.join(rd, "refs"))
    shutil.copy(Q8, os.path.join(rd, "blobs", sha))
    os.symlink("../../blobs/" + sha, os.path.join(rd, "snapshots", COMMIT, "Demo-Q8_0.gguf"))
    with open(os.path.join(rd, "refs", "main"), "w") as f:
        f.write(COMMIT)
    rc, out, err = nsctl(["info", "test/Demo-GGUF:Q8_0"], cache, HF_ENDPOINT="http://127.0.0.1:9")
    if rc:
        fail("info on an hf-made cache: %s" % err)
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0"], cache)
    if expect_ok("hf cache", rc, out, err) and gets(log_since(mark)):
        fail("hf cache: the file hf fetched was fetched again")
    if "there already" not in err:
        fail("hf cache: no line saying the file was there: %s" % err)
    # the blob alone (fetched for another commit): linked, not fetched
    cache = new_cache()
    rd = repo_dir(cache, "test/Demo-GGUF")
    os.makedirs(os.path.join(rd, "blobs"))
    shutil.copy(Q8, os.path.join(rd, "blobs", sha))
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0"], cache)
    if expect_ok("hf blob", rc, out, err):
        if gets(log_since(mark)):
            fail("hf blob: fetched again")
        check_cached("hf blob", cache, "test/Demo-GGUF", "Demo-Q8_0.gguf", Q8)


def test_local_dir():
    d = os.path.join(TMP, "local")
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", d])
    if not expect_ok("-o DIR", rc, out, err):
        return
    f = os.path.join(d, "Demo-Q8_0.gguf")
    meta = os.path.join(d, ".cache", "huggingface", "download", "Demo-Q8_0.gguf.metadata")
    if out.strip() != f or os.path.islink(f) or sha256(f) != sha256(Q8):
        fail("-o DIR: %r is not the file itself" % out)
    m = open(meta).read().split("\n") if os.path.exists(meta) else []
    if len(m) < 3 or m[0] != COMMIT or m[1] != sha256(Q8):
        fail("-o DIR: metadata %s is not hf's (commit, sha256, time): %r" % (meta, m))
    if len(gets(log_since(mark))) != 1:
        fail("-o DIR: want one GET")
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", d])
    if rc or gets(log_since(mark)):
        fail("-o DIR again: fetched again")
    # metadata no older than the file is trusted without hashing the file (as hf does: a
    # large model is not read again on every pull), so a change that keeps the mtime stays
    st = os.stat(f)
    with open(f, "r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x55")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", d])
    if rc or sha256(f) == sha256(Q8):
        fail("-o DIR: the metadata was not trusted (the file was hashed or fetched)")
    # touched after its metadata: hashed, found changed, fetched again
    os.utime(f, (st.st_atime + 10, st.st_mtime + 10))
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", d])
    if rc or sha256(f) != sha256(Q8):
        fail("-o DIR: a file changed after its metadata was not fetched again")
    # a copy without metadata (copied by hand): hashed, found right, reused
    d2 = os.path.join(TMP, "local2")
    os.makedirs(d2)
    shutil.copy(Q8, os.path.join(d2, "Demo-Q8_0.gguf"))
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", d2])
    if rc or gets(log_since(mark)):
        fail("-o DIR with the right file: fetched again (%s)" % err)
    # a wrong file of the right size: replaced
    with open(os.path.join(d2, "Demo-Q8_0.gguf"), "r+b") as fh:
        fh.seek(100)
        fh.write(b"\0\1\2")
    os.unlink(os.path.join(d2, ".cache", "huggingface", "download", "Demo-Q8_0.gguf.metadata"))
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", d2])
    if rc or sha256(os.path.join(d2, "Demo-Q8_0.gguf")) != sha256(Q8):
        fail("-o DIR with a wrong file: not replaced (%s)" % err)


def test_bad_input():
    blocker = os.path.join(TMP, "a-file")
    open(blocker, "w").close()
    mark = log_mark()
    rows = [
        (["pull"], ["no model"]),
        (["pull", "noslash"], ["not a hub repository id"]),
        (["pull", "a//b"], ["not a hub repository id"]),
        (["pull", "org/na--me"], ["not a hub repository id"]),
        (["pull", "org/name:"], ["not a quantization"]),
        (["pull", "org/name:Q4:K"], ["more than one ':'"]),
        (["pull", "org/name/../x"], ["not a file path"]),
        (["pull", "org/name/f.gguf:Q4"], ["both a file and a quantization"]),
        (["pull", "a/b", "c/d"], ["one model at a time"]),
        (["pull", "a/b", "--frobnicate"], ["unknown option"]),
        # ns_opt's line for every command's option without its value (issue 25)
        (["pull", "a/b", "-o"], ["-o", "missing value"]),
        (["pull", "a/b", "--output="], ["--output", "needs a directory"]),
    ]
    for args, words in rows:
        rc, out, err = nsctl(args)
        expect_error(" ".join(args), rc, err, 2, words)
    if log_since(mark):
        fail("bad names: the hub was asked: %s" % log_since(mark))
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-o", os.path.join(blocker, "sub")])
    expect_error("unwritable -o", rc, err, 2, ["cannot make", "a-file/sub"])
    rc, out, err = pull(["test/Demo-GGUF:Q8_0"], cache=os.path.join(blocker, "cache"))
    expect_error("unwritable cache", rc, err, 2, ["cannot make"])
    rc, out, err = pull(["--help"])
    if rc or "REPO[:QUANT|/FILE]" not in out:
        fail("pull --help: %d %r" % (rc, out))


def test_disk():
    # more than the disk holds: refused before a byte is fetched
    cache = new_cache()
    mark = log_mark()
    rc, out, err = pull(["test/Huge-GGUF"], cache)
    expect_error("disk too small", rc, err, 1, ["needs 1.00 PiB", "free"])
    if gets(log_since(mark)):
        fail("disk too small: bytes fetched before the refusal")

    # a write that fails midway (a file size limit stands in for a full disk): one line, the
    # partial file kept, and the next pull continues from it
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    cache = new_cache()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0", "-q"], cache, preexec=limit)
    expect_error("write failure", rc, err, 1, ["cannot write", "too large"])
    mark = log_mark()
    rc, out, err = pull(["test/Demo-GGUF:Q8_0"], cache)
    g = gets(log_since(mark))
    if rc or len(g) != 1 or g[0]["range"] != "bytes=%d-" % (1 << 20):
        fail("after the write failure: want a pull from byte 1 MiB, got %d %s" % (rc, g))
    check_cached("after the write failure", cache, "test/Demo-GGUF", "Demo-Q8_0.gguf", Q8)


def run_pty(args, env):
    """stderr (and stdout) on a terminal; returns (rc, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([NSCTL] + args, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=slave)
    os.close(slave)
    got = b""
    end = time.time() + 60
    while time.time() < end:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            got += chunk
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=10)
    os.close(master)
    return rc, got.decode(errors="replace")


def test_progress():
    rc, got = run_pty(["pull", "test/Demo-GGUF:Q8_0"], env_for(new_cache()))
    if rc or "\r" not in got or "ETA" not in got or "/s" not in got or "%" not in got \
            or "1 file, 23.47 MiB (23.47 MiB to fetch)" not in got:
        fail("progress on a terminal: exit %d, got %r" % (rc, got[-400:]))
    rc, got = run_pty(["pull", "test/Demo-GGUF:Q8_0", "--quiet"], env_for(new_cache()))
    if rc or "ETA" in got or "Demo-Q8_0.gguf:" in got:
        fail("--quiet on a terminal: %r" % got[-400:])


TESTS = [test_whole_download, test_not_pulled, test_default_and_dry_run, test_shards,
         test_missing, test_cache_dirs, test_hostile_listing, test_http_errors, test_token, test_resume_after_kill,
         test_drop_and_no_range, test_corrupt, test_renamed, test_checkpoint,
         test_hf_cache_reuse, test_local_dir, test_bad_input, test_disk, test_progress]
try:
    only = os.environ.get("NS_PULL_ONLY")
    for t in TESTS:
        if only and t.__name__ != only:
            continue
        n = len(failures)
        t0 = time.time()
        try:
            t()
        except Exception as e:  # a broken case is a failure, not the end of the others
            fail("%s raised %r" % (t.__name__, e))
        print("%s %s (%.1f s)" % ("ok  " if len(failures) == n else "FAIL", t.__name__,
                                  time.time() - t0), flush=True)
finally:
    server.kill()
    server.wait()
    shutil.rmtree(TMP, ignore_errors=True)
print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
