"""neurostream: run transformer models larger than memory, from Python.

The engine streams a model's weights from disk under hard memory budgets, in helper processes
(nsio, nsplan, nscompute, nsrouter) the library starts and supervises; this package drives it
through libneurostream's C API (neurostream.h) with ctypes::

    from neurostream import NeuroStream

    with NeuroStream.load("model.gguf", mem_budget="512MB", ram_budget="4GB") as ns:
        for piece in ns.generate("Once upon a time", max_tokens=64, temperature=0):
            print(piece, end="", flush=True)
        reply = "".join(ns.chat([{"role": "user", "content": "Hi!"}]))
        logits = ns.logits(ns.tokenize("Hello"))   # numpy (n, n_vocab) float32

Budgets take ints (bytes) or nsctl's size strings ("512MB" = 512 MiB). Every failure of the
library raises NeuroStreamError with its one-line message. An engine is used by one thread at
a time; load it in a thread that outlives it (its helper processes are told to stop when the
thread that started them ends).
"""
import atexit
import contextlib
import ctypes
import errno
import logging
import os
import queue
import json
import subprocess
import threading
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _lib as L

__all__ = ["NeuroStream", "NeuroStreamError", "Sampler", "parse_size", "version"]

Budget = Union[int, str, None]

_log = logging.getLogger("neurostream")


class NeuroStreamError(RuntimeError):
    """A failure of the library: str(e) is its one-line message, e.code the negative errno
    (-EINVAL: a model, option or input it cannot use; -ENOSPC: a budget below the smallest
    that works; others: the engine failed at run time)."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


def _on_log(level: int, line: bytes, _user: Any) -> None:
    lvl = {0: logging.INFO, 1: logging.WARNING}.get(level, logging.ERROR)
    _log.log(lvl, "%s", line.decode("utf-8", "replace"))


_LOG_CB = L.LOG_FN(_on_log)  # kept alive here: the library calls it for the process's life
_log_installed = False


def _libc_free():
    free = ctypes.CDLL(None).free
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return free


def _lib() -> ctypes.CDLL:
    global _log_installed
    lib = L.lib()
    if not _log_installed:  # the library's lines go to logging ("neurostream"), not stderr
        lib.ns_log_set(_LOG_CB, None)
        # back to stderr before the interpreter goes: an engine freed during shutdown must
        # not call into a finalizing interpreter
        atexit.register(lib.ns_log_set, ctypes.cast(None, L.LOG_FN), None)
        _log_installed = True
    return lib


def version() -> str:
    """The version of the libneurostream loaded ("MAJOR.MINOR.PATCH")."""
    return _lib().ns_version().decode()


def parse_size(value: Budget, what: str = "size") -> int:
    """Bytes from an int or nsctl's size strings ("512MB", "6GB", "1.5GiB"; binary units).
    Raises NeuroStreamError (-EINVAL) for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise NeuroStreamError(-errno.EINVAL, "%s: a size is an int or a string such as "
                               "'512MB' (got %r)" % (what, value))
    if isinstance(value, int):
        if value < 0 or value >= 1 << 64:
            raise NeuroStreamError(-errno.EINVAL, "%s: %d bytes is not a size" % (what, value))
        return value
    out = ctypes.c_uint64()
    if _lib().ns_parse_size(value.encode(), ctypes.byref(out)) < 0:
        raise NeuroStreamError(-errno.EINVAL, "%s: bad size '%s' (e.g. 512MB, 6GB)" %
                               (what, value))
    return out.value


class _Done:
    def __init__(self, rc: int = 0, exc: Optional[BaseException] = None):
        self.rc = rc
        self.exc = exc


class NeuroStream:
    """A loaded model and the processes running it. Make one with NeuroStream.load(); free it
    with close() or by leaving a `with` block (the processes stop, the shared memory goes)."""

    def __init__(self, handle: ctypes.c_void_p, path: str):
        """Use NeuroStream.load()."""
        self._e = handle
        self._path = path
        self._lock = threading.Lock()
        self._worker: Optional[threading.Thread] = None
        self._last_ids: List[int] = []
        self._draft_model = False  # loaded with a draft model (generate(draft="model"))
        self._draft_mtp = False  # loaded with its MTP block (generate(draft="mtp"))

    # ---- life -------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Union[str, os.PathLike], mem_budget: Budget = None,
             ram_budget: Budget = None, vram_budget: Budget = None, backend: str = "cpu",
             n_ctx: int = 0, threads: int = 0, cache_type_k: Optional[str] = None,
             cache_type_v: Optional[str] = None, act_q8: bool = False,
             reasoning_effort: Optional[str] = None,
             draft_model: Optional[Union[str, os.PathLike]] = None,
             draft_mtp: bool = False) -> "NeuroStream":
        """Open the model at path (a GGUF file, a split GGUF's first shard or a Hugging Face
        checkpoint folder) and start the engine.

        mem_budget: the streaming arena; ram_budget: the RAM cache; vram_budget: GPU memory
        (backend "cuda"). Ints are bytes; strings as nsctl's options ("512MB"). None: the
        library's default. n_ctx: context positions (0: 4096); threads: compute threads (0:
        all CPUs). draft_model: a GGUF of the same vocabulary held in RAM as the drafter of
        generate(draft="model"); draft_mtp: the model's own MTP block (Qwen3.5) held in RAM as
        the drafter of generate(draft="mtp"). Raises NeuroStreamError with the library's message when the model, a
        budget or an option cannot be used; nothing is left running then."""
        lib = _lib()
        o = L.EngineOpts()
        lib.ns_engine_opts_default(ctypes.byref(o))
        for name, v in (("mem_budget", mem_budget), ("ram_budget", ram_budget),
                        ("vram_budget", vram_budget)):
            if v is not None:
                setattr(o, name, parse_size(v, name))
        if not isinstance(backend, str):
            raise NeuroStreamError(-errno.EINVAL, "backend: 'cpu' or 'cuda' (got %r)" % (backend,))
        o.backend = backend.encode()
        o.n_ctx = int(n_ctx)
        o.threads = int(threads)
        o.act_q8 = bool(act_q8)
        o.cache_type_k = cache_type_k.encode() if cache_type_k else None
        o.cache_type_v = cache_type_v.encode() if cache_type_v else None
        o.reasoning_effort = reasoning_effort.encode() if reasoning_effort else None
        draft = os.fsencode(os.fspath(draft_model)) if draft_model is not None else None
        o.draft_model = draft  # (the library copies the path at load)
        o.draft_mtp = bool(draft_mtp)
        e = ctypes.c_void_p()
        err = ctypes.create_string_buffer(512)
        p = os.fspath(path)
        rc = lib.ns_engine_load(os.fsencode(p), ctypes.byref(o), ctypes.byref(e), err,
                                len(err))
        if rc < 0:
            raise NeuroStreamError(rc, err.value.decode("utf-8", "replace"))
        ns = cls(e, p)
        ns._draft_model = draft is not None
        ns._draft_mtp = bool(draft_mtp)
        return ns

    def close(self) -> None:
        """Stop the engine's processes and remove its shared memory (idempotent). A call in
        progress on another thread is cancelled first."""
        if not self._e:
            return
        w = self._worker
        if w is not None and w.is_alive():
            _lib().ns_engine_cancel(self._e)
            w.join()
        e, self._e = self._e, None
        _lib().ns_engine_free(ctypes.byref(e))  # stops the children, unlinks the segments

    def __enter__(self) -> "NeuroStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library's keeper cleans up
            pass

    def _engine(self) -> ctypes.c_void_p:
        if not self._e:
            raise NeuroStreamError(-errno.EBADF, "the engine is closed")
        return self._e

    def _fail(self, rc: int) -> NeuroStreamError:
        msg = _lib().ns_engine_error(self._e) if self._e else b"the engine is closed"
        return NeuroStreamError(rc, (msg or b"").decode("utf-8", "replace") or os.strerror(-rc))

    # ---- generation -------------------------------------------------------------------

    @staticmethod
    def _params(max_tokens: int, temperature: float, top_k: int, top_p: float, min_p: float,
                repeat_penalty: float, repeat_last_n: int, seed: int,
                stop_at_eog: bool) -> L.GenParams:
        g = L.GenParams()
        _lib().ns_gen_params_default(ctypes.byref(g))
        g.n_predict = int(max_tokens)
        g.temperature = float(temperature)
        g.top_k = int(top_k)
        g.top_p = float(top_p)
        g.min_p = float(min_p)
        g.repeat_penalty = float(repeat_penalty)
        g.repeat_last_n = int(repeat_last_n)
        g.seed = int(seed)
        g.no_stop = not stop_at_eog
        return g

    def _stream(self, call) -> Iterator[str]:
        """Run call(token_fn) on a worker thread; yield the text pieces as they come."""
        e = self._engine()
        if not self._lock.acquire(blocking=False):
            raise NeuroStreamError(-errno.EBUSY, "the engine is busy with another call "
                                   "(one call at a time)")
        q: "queue.Queue[Union[bytes, _Done]]" = queue.Queue()
        stop = threading.Event()
        ids: List[int] = []
        self._last_ids = ids

        def on_token(ptr, n, tid, _user):
            if tid >= 0:  # -1: the held-back end of the text, no token of its own
                ids.append(tid)
            if n:
                q.put(ctypes.string_at(ptr, n))
            return 1 if stop.is_set() else 0

        cb = L.TOKEN_FN(on_token)

        def work():
            try:
                q.put(_Done(call(e, cb)))
            except BaseException as ex:  # handed to the consumer
                q.put(_Done(exc=ex))

        t = threading.Thread(target=work, name="neurostream-generate", daemon=True)
        self._worker = t
        try:
            t.start()
            while True:
                item = q.get()
                if isinstance(item, _Done):
                    if item.exc is not None:
                        raise item.exc
                    if item.rc < 0:
                        raise self._fail(item.rc)
                    return
                yield item.decode("utf-8", "replace")
        finally:
            stop.set()  # the consumer left early: the next token ends the call
            t.join()
            self._worker = None
            self._lock.release()

    def generate(self, prompt: str, max_tokens: int = 64, temperature: float = 0.8,
                 top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 repeat_penalty: float = 1.0, repeat_last_n: int = 64, seed: int = 0,
                 stop_at_eog: bool = True, draft: Optional[str] = None,
                 draft_max: int = 16, draft_min: int = 1) -> Iterator[str]:
        """Generate from prompt (BOS added as the vocabulary asks; the context starts empty):
        an iterator of text pieces, each whole UTF-8 characters, as the tokens come
        ("".join(...) for the whole text). temperature <= 0 is greedy; top_k <= 0, top_p >= 1,
        min_p <= 0 and repeat_penalty 1 are off; max_tokens < 0: until the context is full.
        Stops at end-of-generation tokens unless stop_at_eog is False. Leaving the loop
        early stops the generation. draft="ngram": speculative decoding with prompt lookup,
        draft="model": with the draft model given to load() (draft_max/draft_min bound the
        adaptive draft length; greedy output unchanged)."""
        g = self._params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                         repeat_last_n, seed, stop_at_eog)
        if draft not in (None, "ngram", "model", "mtp"):
            raise NeuroStreamError(-errno.EINVAL,
                                   "draft %r: 'ngram', 'model', 'mtp' (or None)" % draft)
        if draft == "model" and not self._draft_model:
            raise NeuroStreamError(-errno.EINVAL, "draft 'model': load() was given no draft_model")
        if draft == "mtp" and not self._draft_mtp:
            raise NeuroStreamError(-errno.EINVAL, "draft 'mtp': load() was not given draft_mtp")
        if draft:
            g.draft = {"ngram": 1, "model": 3, "mtp": 4}[draft]  # enum ns_gen_draft
            g.draft_max, g.draft_min = int(draft_max), int(draft_min)
        data = prompt.encode()
        return self._stream(lambda e, cb: _lib().ns_engine_generate(e, data, ctypes.byref(g),
                                                                    cb, None))

    def chat(self, messages: Sequence[Mapping[str, str]], thinking: bool = False,
             max_tokens: int = -1, temperature: float = 0.8, top_k: int = 40,
             top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
             repeat_last_n: int = 64, seed: int = 0) -> Iterator[str]:
        """The assistant's reply to messages ([{"role": "system"|"user"|"assistant",
        "content": str}, ...]) rendered with the model's chat template: an iterator of text
        pieces. thinking: let templates with a thinking switch (Qwen3, Qwen3.5, Gemma 4)
        think first; False renders the empty think block (the text comes as the model
        writes it, a <think> block included). What the previous chat call left in the context is
        kept when the new conversation starts with it. NeuroStreamError (-EINVAL) when the
        model has no chat template the library knows."""
        self._engine()
        arr = (L.Msg * max(len(messages), 1))()
        keep = []  # the bytes arr points into, alive until the call ends
        for i, m in enumerate(messages):
            role, content = m["role"].encode(), m["content"].encode()
            keep += [role, content]
            arr[i].role, arr[i].content = role, content
        g = self._params(max_tokens, temperature, top_k, top_p, min_p, repeat_penalty,
                         repeat_last_n, seed, True)
        n = len(messages)

        def call(e, cb):
            assert keep is not None
            _lib().ns_engine_set_thinking(e, bool(thinking))
            return _lib().ns_engine_chat(e, arr, n, ctypes.byref(g), cb, None)

        return self._stream(call)

    @property
    def last_tokens(self) -> List[int]:
        """Ids of the tokens the last (or current) generate/chat call generated."""
        return list(self._last_ids)

    def reset(self) -> None:
        """Forget the chat context (the next chat() evaluates the whole conversation)."""
        _lib().ns_engine_reset(self._engine())

    # ---- tokens and logits ------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True) -> List[int]:
        """Token ids of text (add_special: BOS/EOS as the vocabulary asks)."""
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_size_t()
        rc = _lib().ns_engine_tokenize(self._engine(), text.encode(), add_special,
                                       ctypes.byref(ids), ctypes.byref(n))
        if rc < 0:
            raise NeuroStreamError(rc, "cannot tokenize the text")
        try:
            return ids[:n.value]
        finally:
            _libc_free()(ids)

    def _ids(self, tokens: Iterable[int]) -> "ctypes.Array[ctypes.c_int32]":
        t = [int(x) for x in tokens]
        nv = self.n_vocab
        for x in t:
            if x < 0 or x >= nv:
                raise NeuroStreamError(-errno.EINVAL, "token id %d out of range (vocabulary "
                                       "of %d)" % (x, nv))
        return (ctypes.c_int32 * max(len(t), 1))(*t)

    def detokenize(self, tokens: Iterable[int], remove_special: bool = False,
                   unparse_special: bool = True) -> str:
        """Text of token ids, as llama_detokenize (and nsctl detokenize's defaults):
        remove_special drops BOS/EOS, unparse_special renders control tokens as text."""
        t = list(tokens)
        arr = self._ids(t)
        out = ctypes.c_void_p()
        n = ctypes.c_size_t()
        rc = _lib().ns_engine_detokenize(self._engine(), arr, len(t), remove_special,
                                         unparse_special, ctypes.byref(out), ctypes.byref(n))
        if rc < 0:
            raise NeuroStreamError(rc, "cannot detokenize")
        try:
            return ctypes.string_at(out, n.value).decode("utf-8", "replace")
        finally:
            _libc_free()(out)

    def token_piece(self, token: int, special: bool = True) -> bytes:
        """The bytes one token stands for (special: control tokens as their text)."""
        p = ctypes.c_void_p()
        n = ctypes.c_size_t()
        rc = _lib().ns_engine_token_piece(self._engine(), int(token), special, ctypes.byref(p),
                                          ctypes.byref(n))
        if rc < 0:
            raise NeuroStreamError(rc, "token id %d out of range" % token)
        return ctypes.string_at(p, n.value)

    def logits(self, tokens: Sequence[int]):
        """Evaluate exactly tokens (no BOS added) from an empty context: the logits of every
        position, (len(tokens), n_vocab) float32 — a numpy array when numpy is installed,
        else a list of array('f') rows."""
        t = list(tokens)
        arr = self._ids(t)
        nv = self.n_vocab
        if not t:
            raise NeuroStreamError(-errno.EINVAL, "no tokens to evaluate")
        try:
            import numpy as np
        except ImportError:
            np = None
        if np is not None:
            out = np.empty((len(t), nv), dtype=np.float32)
            ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        else:
            buf = (ctypes.c_float * (len(t) * nv))()
            ptr = ctypes.cast(buf, ctypes.POINTER(ctypes.c_float))
        with self._busy():
            rc = _lib().ns_engine_logits(self._engine(), arr, len(t), ptr)
        if rc < 0:
            raise self._fail(rc)
        if np is not None:
            return out
        import array
        flat = array.array("f", bytes(buf))
        return [flat[i * nv:(i + 1) * nv] for i in range(len(t))]

    def eval(self, tokens: Sequence[int], all_logits: bool = False):
        """Append tokens to the persistent context (the one chat() continues; generate(),
        logits() and reset() empty it) and return the logits after the last one, (n_vocab,),
        or of every one with all_logits, (len(tokens), n_vocab): numpy float32. Bit-identical
        to evaluating the whole context in one call."""
        import numpy as np
        t = list(tokens)
        if not t:
            raise NeuroStreamError(-errno.EINVAL, "no tokens to evaluate")
        arr = self._ids(t)
        out = np.empty((len(t) if all_logits else 1, self.n_vocab), dtype=np.float32)
        with self._busy():
            rc = _lib().ns_engine_eval(self._engine(), arr, len(t),
                                       out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                       bool(all_logits))
        if rc < 0:
            raise self._fail(rc)
        return out if all_logits else out[0]

    def rollback(self, n_keep: int) -> None:
        """Keep the first n_keep positions of the context (a recurrent model: 0 or all); the
        next eval() continues from there."""
        with self._busy():
            rc = _lib().ns_engine_rollback(self._engine(), int(n_keep))
        if rc < 0:
            raise self._fail(rc)

    @property
    def n_past(self) -> int:
        """Positions the persistent context holds."""
        return int(_lib().ns_engine_n_past(self._engine()))

    def sampler(self, temperature: float = 0.8, top_k: int = 40, top_p: float = 0.95,
                min_p: float = 0.05, repeat_penalty: float = 1.0, repeat_last_n: int = 64,
                seed: int = 0) -> "Sampler":
        """The sampler chain generate() runs, as its own object for this model's vocabulary
        (to choose tokens from logits() yourself)."""
        return Sampler(self.n_vocab, temperature=temperature, top_k=top_k, top_p=top_p,
                       min_p=min_p, repeat_penalty=repeat_penalty, repeat_last_n=repeat_last_n,
                       seed=seed)

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        """Hold the engine for one call; NeuroStreamError (-EBUSY) when another holds it."""
        if not self._lock.acquire(blocking=False):
            raise NeuroStreamError(-errno.EBUSY, "the engine is busy with another call (one "
                                   "call at a time)")
        try:
            yield
        finally:
            self._lock.release()

    # ---- what it is -------------------------------------------------------------------

    @property
    def n_vocab(self) -> int:
        """Size of the vocabulary."""
        return int(_lib().ns_engine_n_vocab(self._engine()))

    def special_tokens(self) -> Dict[str, Optional[int]]:
        """{"bos", "eos", "eot"}: ids, None where the vocabulary has none."""
        lib, e = _lib(), self._engine()
        f = (lambda v: None if v < 0 else int(v))
        return {"bos": f(lib.ns_engine_token_bos(e)), "eos": f(lib.ns_engine_token_eos(e)),
                "eot": f(lib.ns_engine_token_eot(e))}

    def metadata(self) -> Dict[str, str]:
        """The model's metadata, every value as text (arrays as "[array of N TYPE]")."""
        lib, e = _lib(), self._engine()
        out = {}
        buf = ctypes.create_string_buffer(256)
        for i in range(lib.ns_engine_meta_count(e)):
            key = lib.ns_engine_meta_key(e, i)
            n = lib.ns_engine_meta_str(e, key, buf, len(buf))
            if n >= len(buf):
                big = ctypes.create_string_buffer(n + 1)
                lib.ns_engine_meta_str(e, key, big, len(big))
                out[key.decode()] = big.value.decode("utf-8", "replace")
            elif n >= 0:
                out[key.decode()] = buf.value.decode("utf-8", "replace")
        return out

    def info(self) -> Dict[str, Any]:
        """What runs: the model, its vocabulary and template, the budgets and context in
        effect, the session and its processes' pids, the library's version."""
        lib, e = _lib(), self._engine()
        o = L.EngineOpts()
        lib.ns_engine_get_opts(e, ctypes.byref(o))
        tpl = lib.ns_engine_chat_template(e)
        names = ["nsio", "nscompute", "nsplan", "nsrouter"]
        meta = self.metadata()
        return {
            "model": self._path,
            "architecture": meta.get("general.architecture"),
            "name": meta.get("general.name"),
            "n_vocab": self.n_vocab,
            "n_ctx": int(o.n_ctx),
            "chat_template": tpl.decode() if tpl else None,
            "special_tokens": self.special_tokens(),
            "backend": (o.backend or b"cpu").decode(),
            "mem_budget": int(o.mem_budget),
            "ram_budget": int(o.ram_budget),
            "vram_budget": int(o.vram_budget),
            "threads": int(o.threads),
            "session": lib.ns_engine_session(e).decode(),
            "pids": {n: int(lib.ns_engine_pid(e, i)) for i, n in enumerate(names)
                     if lib.ns_engine_pid(e, i)},
            "version": version(),
            "metadata": meta,
        }

    def plan(self) -> Dict[str, Any]:
        """The residency plan for this model under the engine's budgets and context, as
        `nsctl plan MODEL --json` gives it."""
        inf = self.info()
        args = [L.nsctl_path(), "plan", self._path, "--json", "-c", str(inf["n_ctx"]),
                "--mem-budget", str(inf["mem_budget"]), "--ram-budget", str(inf["ram_budget"])]
        if inf["vram_budget"]:
            args += ["--vram-budget", str(inf["vram_budget"])]
        res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
        if res.returncode != 0:
            lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise NeuroStreamError(-errno.EINVAL, lines[-1] if lines else "nsctl plan failed")
        return json.loads(res.stdout)

    def stats(self) -> Dict[str, Any]:
        """Figures of the last generate/chat/logits call (tokens, seconds, bytes, hits)."""
        s = L.Stats()
        _lib().ns_engine_stats(self._engine(), ctypes.byref(s))
        return {name: getattr(s, name) for name, _ in L.Stats._fields_}


class Sampler:
    """The library's sampler chain (ns_sampler_chain_*): repetition penalty over the last
    repeat_last_n accepted tokens, top-k, top-p, min-p, temperature, then a seeded draw (the
    most likely token at temperature <= 0); the chain generate() and nsctl run use, so the
    same settings and seed choose the same tokens. sample(row) takes one row of logits
    (n_vocab floats: a numpy array or a sequence) and does not accept the token;
    accept(token) records one (the prompt's and the chosen ones) in the penalty history."""

    def __init__(self, n_vocab: int, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 repeat_last_n: int = 64, seed: int = 0):
        g = NeuroStream._params(0, temperature, top_k, top_p, min_p, repeat_penalty,
                                repeat_last_n, seed, True)
        self._n_vocab = int(n_vocab)
        self._s = ctypes.c_void_p()
        rc = _lib().ns_sampler_chain_new(ctypes.byref(g), self._n_vocab, ctypes.byref(self._s))
        if rc < 0:
            raise NeuroStreamError(rc, "bad sampler settings (a negative history, a NaN, or "
                                   "an empty vocabulary)")

    def sample(self, logits) -> int:
        if not self._s:
            raise NeuroStreamError(-errno.EINVAL, "the sampler is freed")
        if len(logits) != self._n_vocab:
            raise NeuroStreamError(-errno.EINVAL, "%d logits for a vocabulary of %d" %
                                   (len(logits), self._n_vocab))
        row = (ctypes.c_float * self._n_vocab)(*[float(x) for x in logits])
        return int(_lib().ns_sampler_chain_sample(self._s, row))

    def accept(self, token: int) -> None:
        if not self._s:
            raise NeuroStreamError(-errno.EINVAL, "the sampler is freed")
        _lib().ns_sampler_chain_accept(self._s, int(token))

    def free(self) -> None:
        if self._s:
            _lib().ns_sampler_chain_free(ctypes.byref(self._s))

    def __del__(self) -> None:
        self.free()
