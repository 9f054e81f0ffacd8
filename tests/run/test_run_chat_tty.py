"""nsctl run --chat on a pseudo-terminal (libedit), against the plain-stdin path as the oracle.

tiny-qwen3-F32 with --chat-template chatml (the oracle's tiny models carry no template), greedy.
stdout (the replies only: the prompt and the echo go to stderr, the pty) is compared with
what piped sessions given the same turns print:
  - editing: "hello thre" Left Left "e" -> "hello there"; "and againn" Backspace -> "and again";
    history: Up recalls "and again"; the turns saved with /save are exactly those;
  - /reset: the reply after it equals a fresh session's;
  - /save FILE, /quit, a new session /load FILE, one more turn, Ctrl-D: the replies equal one
    session's; exit 0 both times;
  - multi-line: "first\\" + "second", a \"\"\" block -> the turns saved are "first\\nsecond", "a\\nb";
  - the history file under $XDG_STATE_HOME/neurostream/ and Up in a new session;
  - Ctrl-C during a reply ends that reply (the prompt comes back, /save works, /quit exits 0);
    at the prompt it ends the session (exit 130);
  - refusals before any process starts: no template and no --chat-template; a template file of
    no family we know;
  - a llama.cpp family on a vocabulary that asks for BOS: BOS is evaluated first;
  - nsctl serve --chat-template answers as run --chat.
argv: nsctl."""
import json
import os
import re
import pty
import select
import signal
import shutil
import subprocess
import sys
import tempfile
import termios
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_testlib as rt  # noqa: E402

NSCTL = sys.argv[1]
MODEL = os.path.join(os.environ.get("NS_ORACLE_DIR", "../shared/oracle"), "tiny/tiny-qwen3-F32.gguf")
ARGS = ["--chat-template", "chatml", "--temp", "0", "--mem-budget", "256KB", "-c", "512",
        "--no-plan"]
LEFT, UP, BS, CTRL_C, CTRL_D = "\x1b[D", "\x1b[A", "\x7f", "\x03", "\x04"
TMP = tempfile.mkdtemp(prefix="ns_chat_tty_")
ENV = dict(os.environ, XDG_STATE_HOME=os.path.join(TMP, "state"), TERM="xterm")


class Tty:
    """One nsctl run --chat on a pty: stdin and stderr the pty, stdout a file."""

    def __init__(self, extra):
        self.out = os.path.join(TMP, "out%d" % time.monotonic_ns())
        fo = open(self.out, "wb")
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.dup2(fo.fileno(), 1)
            os.execve(NSCTL, [NSCTL, "run", MODEL, "--chat"] + ARGS + extra, ENV)
        fo.close()
        self.buf = b""
        self.code = None
        self.wait_prompt(b"> ")

    def read(self, t):
        r, _, _ = select.select([self.fd], [], [], t)
        if r:
            try:
                d = os.read(self.fd, 65536)
            except OSError:
                d = b""
            self.buf += d
            return bool(d)
        return True

    def wait_prompt(self, prompt, since=0, timeout=60):
        """Until the transcript after since ends with a prompt on a line of its own and the
        terminal is in libedit's raw mode: keys typed before it (in canonical mode) reach the
        line editor changed (a Ctrl-D becomes an end-of-file mark, then a NUL byte) or not at
        all, as for a user typing ahead; the tests type as a user who waits for the prompt."""
        end = time.time() + timeout
        while time.time() < end:
            tail = self.buf[since:]
            if ((tail.endswith(b"\n" + prompt) or tail.endswith(b"\r" + prompt)) and
                    not termios.tcgetattr(self.fd)[3] & termios.ICANON):
                return True
            if not self.read(0.05):
                break
        rt.fail("no prompt %r; transcript ends %r" % (prompt, self.buf[-400:]))
        return False

    def line(self, keys, prompt=b"> "):
        """Type keys and Enter, wait for the next prompt."""
        n = len(self.buf)
        os.write(self.fd, keys.encode())
        time.sleep(0.05)
        os.write(self.fd, b"\r")
        return self.wait_prompt(prompt, n + len(keys))

    def end(self, keys=None, timeout=60):
        """Send keys (e.g. "/quit\\r" or Ctrl-D), wait for the exit; the exit code."""
        if keys:
            os.write(self.fd, keys.encode())
        end = time.time() + timeout
        while time.time() < end:
            if not self.read(0.05):
                break
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p:
                self.code = os.waitstatus_to_exitcode(st)
                break
        while self.code is None and time.time() < end:  # the pty closed: exiting
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if p:
                self.code = os.waitstatus_to_exitcode(st)
            else:
                time.sleep(0.02)
        if self.code is None:  # still running after timeout s: say so, never hang the suite
            p, st = os.waitpid(self.pid, os.WNOHANG)
            if not p:
                known = {(self.pid, 0): "nsctl"}
                rt.descendants(self.pid, known)
                where = []
                for (pid, _), comm in sorted(known.items()):
                    try:
                        with open("/proc/%d/wchan" % pid) as f:
                            where.append("%s %d in %s" % (comm, pid, f.read().strip()))
                    except OSError:
                        pass
                rt.fail("nsctl run --chat did not exit within %d s of %r (%s); transcript "
                        "ends %r" % (timeout, keys, ", ".join(where), self.buf[-400:]))
                os.kill(self.pid, signal.SIGKILL)
                p, st = os.waitpid(self.pid, 0)
            self.code = os.waitstatus_to_exitcode(st)
        os.close(self.fd)
        with open(self.out, "rb") as f:
            return self.code, f.read()


def piped(lines, extra=()):
    """The replies of a session fed lines on a pipe (today's plain line reading)."""
    r = subprocess.run([NSCTL, "run", MODEL, "--chat"] + ARGS + list(extra),
                       input="".join(l + "\n" for l in lines).encode(), env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        rt.fail("piped session %r: exit %d: %s" % (lines, r.returncode, r.stderr[-300:]))
    return r.stdout


def saved_users(path):
    with open(path) as f:
        return [m["content"] for m in json.load(f)["messages"] if m["role"] == "user"]


def check(cond, msg):
    if not cond:
        rt.fail(msg)
    return cond


def test_editing_history():
    save = os.path.join(TMP, "edit.json")
    t = Tty(["-n", "6"])
    t.line("hello thre" + LEFT + LEFT + "e")
    t.line("and againn" + BS)
    t.line(UP)
    t.line("/save " + save)
    code, out = t.end("/quit\r")
    check(code == 0, "editing: exit %s" % code)
    check(saved_users(save) == ["hello there", "and again", "and again"],
          "editing/history: turns %r" % saved_users(save))
    want = piped(["hello there", "and again", "and again"], ["-n", "6"])
    check(out == want and out, "editing: replies %r, piped %r" % (out, want))
    hist = os.path.join(TMP, "state", "neurostream", "chat_history")
    # libedit's file writes a space as \040
    check(os.path.isfile(hist) and b"and\\040again" in open(hist, "rb").read(),
          "no history file %s with the turns" % hist)
    # a new session: Up recalls the last line of the one before (/save FILE)
    t = Tty(["-n", "6"])
    save2 = os.path.join(TMP, "edit2.json")
    t.line(UP + UP + UP)  # "/quit", "/save ...", "and again" (the repeat kept once)
    t.line("/save " + save2)
    code, _ = t.end(CTRL_D)
    check(code == 0, "Ctrl-D: exit %s" % code)
    check(saved_users(save2) == ["and again"], "history across sessions: %r" % saved_users(save2))
    return "editing, history (in %s and across sessions), /quit, Ctrl-D" % hist


def test_reset():
    t = Tty(["-n", "6"])
    t.line("hello there")
    t.line("and again")
    t.line("/reset")
    t.line("and again")
    code, out = t.end("/quit\r")
    want = piped(["hello there", "and again"], ["-n", "6"]) + piped(["and again"], ["-n", "6"])
    check(code == 0 and out == want, "/reset: exit %s, replies %r, want %r" % (code, out, want))
    return "/reset: the next reply is a fresh session's"


def test_save_load():
    save = os.path.join(TMP, "conv.json")
    t = Tty(["-n", "6"])
    t.line("hello there")
    t.line("and again")
    t.line("/save " + save)
    code1, out1 = t.end("/quit\r")
    t = Tty(["-n", "6"])
    t.line("/load " + save)
    again = os.path.join(TMP, "conv2.json")
    t.line("/save " + again)  # the loaded conversation, byte for byte
    t.line("third one")
    code2, out2 = t.end(CTRL_D)
    want = piped(["hello there", "and again", "third one"], ["-n", "6"])
    check(code1 == 0 and code2 == 0, "/save, /load: exits %s %s" % (code1, code2))
    check(out1 + out2 == want, "/load: replies %r + %r, one session %r" % (out1, out2, want))
    with open(save, "rb") as f, open(again, "rb") as g:
        check(f.read() == g.read(), "/load then /save: the files differ")
    # the second reply of the random tiny model is not UTF-8: kept exactly in content_hex
    with open(save) as f:
        check(any("content_hex" in m for m in json.load(f)["messages"]),
              "no reply that is not UTF-8 saved: the content_hex path is not tested")
    bad = os.path.join(TMP, "bad%d.json")
    for i, text in enumerate(['{"messages": [{"role": "user"}]}',
                              '{"messages": [{"role": "user", "content": "a", '
                              '"content_hex": "6z"}]}', '{"messages": ']):
        with open(bad % i, "w") as f:
            f.write(text)
    t = Tty(["-n", "6"])
    for i in range(3):
        t.line("/load " + bad % i)
    t.line("/load " + os.path.join(TMP, "missing.json"))
    code, _ = t.end("/quit\r")
    check(code == 0 and t.buf.count(b"(conversation unchanged)") == 4,
          "/load of bad and missing files: exit %s, %r" % (code, t.buf[-400:]))
    return "/save, /quit, /load in a new session continues identically; bad files refused"


def test_multiline():
    save = os.path.join(TMP, "multi.json")
    t = Tty(["-n", "3"])
    t.line("first\\", b"... ")
    t.line("second")
    t.line('"""', b"... ")
    t.line("a", b"... ")
    t.line('b"""')
    t.line("/save " + save)
    code, _ = t.end("/quit\r")
    check(code == 0 and saved_users(save) == ["first\nsecond", "a\nb"],
          "multi-line: exit %s, turns %r" % (code, saved_users(save)))
    return "multi-line: trailing \\ and a \"\"\" block"


def test_ctrl_c():
    save = os.path.join(TMP, "stop.json")
    t = Tty(["-n", "-1", "--ignore-eos"])
    os.write(t.fd, b"hello there\r")
    end = time.time() + 60
    while time.time() < end and os.path.getsize(t.out) < 8:
        t.read(0.02)
    n = len(t.buf)
    os.write(t.fd, CTRL_C.encode())
    t.wait_prompt(b"> ", n)
    check(b"(reply stopped)" in t.buf[n:], "Ctrl-C: no '(reply stopped)': %r" % t.buf[n:])
    t.line("/save " + save)
    code, out = t.end("/quit\r")
    with open(save) as f:
        msgs = json.load(f)["messages"]
    reply = msgs[-1] if msgs else {}
    check(code == 0 and len(msgs) == 2 and reply.get("role") == "assistant",
          "Ctrl-C in a reply: exit %s, messages %r" % (code, msgs))
    # stopped well before the context (512 positions) was full
    dec = re.search(rb"decode (\d+) tok", t.buf[n:])
    check(dec and 0 < int(dec.group(1)) < 400 and len(out) > 0,
          "Ctrl-C: the reply was not cut: %r" % (dec.group(0) if dec else t.buf[n:]))
    t = Tty(["-n", "6"])
    code, _ = t.end(CTRL_C)
    check(code == 130, "Ctrl-C at the prompt: exit %s, want 130" % code)
    return "Ctrl-C ends the reply, not the session; at the prompt it ends the session"


def test_refusals():
    r = subprocess.run([NSCTL, "run", MODEL, "--chat", "-n", "2"], env=ENV, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    err = r.stderr.decode()
    check(r.returncode == 2 and err.count("\n") == 1 and "chat template" in err and
          "session" not in err, "no template: exit %d: %r" % (r.returncode, err))
    tpl = os.path.join(TMP, "odd.jinja")
    with open(tpl, "w") as f:
        f.write("{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}")
    r = subprocess.run([NSCTL, "run", MODEL, "--chat", "--chat-template", tpl], env=ENV,
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    err = r.stderr.decode()
    check(r.returncode == 2 and err.count("\n") == 1 and "no family" in err,
          "unknown template file: exit %d: %r" % (r.returncode, err))
    # a Jinja file of a known family is accepted: its replies are the family name's
    with open(tpl, "w") as f:
        f.write("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}")
    a = piped(["hello there"], ["-n", "4"])
    r = subprocess.run([NSCTL, "run", MODEL, "--chat", "-n", "4", "--temp", "0", "--mem-budget",
                        "256KB", "-c", "512", "--no-plan", "--chat-template", tpl], env=ENV,
                       input=b"hello there\n", capture_output=True, timeout=60)
    check(r.returncode == 0 and r.stdout == a, "--chat-template FILE: exit %d, %r vs %r" %
          (r.returncode, r.stdout, a))
    return "refused before any process: no template, a template of no family; a file accepted"


def test_bos():
    """A llama.cpp family (no BOS text in the rendering) on a vocabulary that asks for BOS: the
    prompt evaluated is `nsctl tokenize --chat --add-special`'s (BOS first), as llama.cpp
    encodes it."""
    llama = os.path.join(os.path.dirname(MODEL), "tiny-llama-F32.gguf")
    rt.require_model(llama)
    ids = subprocess.run([NSCTL, "tokenize", llama, "--chat", "--chat-template", "chatml",
                          "--add-special", "--ids", "hello there"], capture_output=True,
                         timeout=30).stdout.decode()
    n_ids = len(json.loads(ids)) if ids.startswith("[") else -1
    r = subprocess.run([NSCTL, "run", llama, "--chat", "--chat-template", "chatml", "-n", "1",
                        "--temp", "0", "--mem-budget", "1MB", "-c", "512", "--no-plan"],
                       env=ENV, input=b"hello there\n", capture_output=True, timeout=60)
    m = re.search(rb"prefill (\d+) tok", r.stderr)
    check(r.returncode == 0 and m and int(m.group(1)) == n_ids,
          "BOS: prefill %s tokens, tokenize --add-special %d" % (m.group(1) if m else None, n_ids))
    return "chatml on a BOS vocabulary: %d prompt tokens, BOS included" % n_ids


def test_serve():
    """nsctl serve --chat-template chatml answers a chat as run --chat does."""
    import socket
    import urllib.error
    import urllib.request
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    args = [a for a in ARGS if a not in ("--temp", "0")]  # temperature: the request's
    p = subprocess.Popen([NSCTL, "serve", MODEL, "--port", str(port)] + args, env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    body = json.dumps({"model": "tiny-qwen3-F32", "max_tokens": 6, "temperature": 0,
                       "messages": [{"role": "user", "content": "hello there"}]}).encode()
    got = None
    try:
        for _ in range(300):  # until it listens
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/v1/chat/completions" % port,
                                            body, timeout=30) as r:
                    got = json.load(r)["choices"][0]["message"]["content"]
                break
            except urllib.error.HTTPError as e:
                got = "HTTP %d: %s" % (e.code, e.read()[:200])
                break
            except OSError:
                time.sleep(0.1)
            if p.poll() is not None:
                break
    finally:
        p.terminate()
        err = p.communicate(timeout=30)[1]
    want = piped(["hello there"], ["-n", "6"]).decode(errors="replace").rstrip("\n")
    check(got == want, "serve --chat-template: %r, run --chat %r; serve said %r" %
          (got, want, err[-300:]))
    return "serve --chat-template chatml: the reply of run --chat"


def main():
    import faulthandler
    faulthandler.dump_traceback_later(240, exit=True)  # a hang says where
    rt.require_model(MODEL)
    for test in (test_refusals, test_bos, test_serve, test_editing_history, test_reset, test_save_load,
                 test_multiline, test_ctrl_c):
        before = len(rt.failures)
        what = test()
        print("%s %s" % ("FAIL" if len(rt.failures) > before else "ok  ", what))
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d failures" % len(rt.failures))
    return 1 if rt.failures else 0


if __name__ == "__main__":
    sys.exit(main())
