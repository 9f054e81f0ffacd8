"""ctypes declarations of neurostream.h: the structs the package fills in and the functions
it calls. Internal; the public interface is neurostream.NeuroStream."""
import ctypes
import os
from typing import Optional

try:  # written by meson at install time: where the library and nsctl lie from here
    from . import _paths  # type: ignore
except ImportError:  # the source tree: NS_LIBRARY / NS_NSCTL say where
    _paths = None

NS_PROC_COUNT = 4


class EngineOpts(ctypes.Structure):
    """struct ns_engine_opts (neurostream.h), member for member."""
    _fields_ = [
        ("mem_budget", ctypes.c_uint64),
        ("ram_budget", ctypes.c_uint64),
        ("vram_budget", ctypes.c_uint64),
        ("reserve_vram", ctypes.c_uint64),
        ("backend", ctypes.c_char_p),
        ("n_ctx", ctypes.c_uint32),
        ("n_seq", ctypes.c_uint32),
        ("block_rows", ctypes.c_uint64),
        ("lookahead", ctypes.c_int32),
        ("threads", ctypes.c_int),
        ("act_q8", ctypes.c_bool),
        ("cache_type_k", ctypes.c_char_p),
        ("cache_type_v", ctypes.c_char_p),
        ("no_plan", ctypes.c_bool),
        ("run_ahead", ctypes.c_int),
        ("moe_predict", ctypes.c_bool),
        ("verbose", ctypes.c_bool),
        ("stall_ms", ctypes.c_uint32),
        ("thinking", ctypes.c_bool),
        ("reasoning_effort", ctypes.c_char_p),
        ("chat_template", ctypes.c_char_p),
        ("expert_stats", ctypes.c_char_p),
        ("wrap", ctypes.c_char_p * NS_PROC_COUNT),
        ("cancel", ctypes.c_void_p),
        ("draft_model", ctypes.c_char_p),
        ("mmproj", ctypes.c_char_p),
        ("max_image_tokens", ctypes.c_uint32),
        ("min_image_pixels", ctypes.c_uint64),
        ("max_image_pixels", ctypes.c_uint64),
        ("image_token", ctypes.c_int32),
        ("progress", ctypes.c_void_p),
        ("progress_user", ctypes.c_void_p),
        ("draft_mtp", ctypes.c_bool),
    ]


class GenParams(ctypes.Structure):
    """struct ns_gen_params."""
    _fields_ = [
        ("n_predict", ctypes.c_int32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repeat_penalty", ctypes.c_float),
        ("repeat_last_n", ctypes.c_int32),
        ("seed", ctypes.c_uint64),
        ("no_stop", ctypes.c_bool),
        ("draft", ctypes.c_int),
        ("draft_max", ctypes.c_uint32),
        ("draft_min", ctypes.c_uint32),
        ("draft_oracle", ctypes.POINTER(ctypes.c_int32)),
        ("n_draft_oracle", ctypes.c_uint32),
    ]


class Msg(ctypes.Structure):
    """struct ns_engine_msg."""
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


class Stats(ctypes.Structure):
    """struct ns_engine_stats."""
    _fields_ = [
        ("n_prompt", ctypes.c_uint32), ("n_gen", ctypes.c_uint32),
        ("n_decode", ctypes.c_uint32),
        ("prefill_s", ctypes.c_double), ("decode_s", ctypes.c_double),
        ("prefill_tok_s", ctypes.c_double), ("decode_tok_s", ctypes.c_double),
        ("req_prefill", ctypes.c_uint64), ("req_decode", ctypes.c_uint64),
        ("dev_prefill", ctypes.c_uint64), ("dev_decode", ctypes.c_uint64),
        ("gb_per_token", ctypes.c_double), ("dev_gb_per_token", ctypes.c_double),
        ("stall_ms_per_token", ctypes.c_double),
        ("arena_peak", ctypes.c_uint64), ("arena_bytes", ctypes.c_uint64),
        ("requests", ctypes.c_uint64), ("cache_hits", ctypes.c_uint64),
        ("cache_hit_rate", ctypes.c_double),
        ("predict_experts", ctypes.c_uint64), ("predict_hits", ctypes.c_uint64),
        ("predict_hit_rate", ctypes.c_double),
        ("predict_reads", ctypes.c_uint64), ("predict_claims", ctypes.c_uint64),
        ("predict_promoted", ctypes.c_uint64),
        ("nsio_restarts", ctypes.c_uint64),
        ("stop_reason", ctypes.c_uint32),
        ("draft", ctypes.c_bool),
        ("drafted", ctypes.c_uint32), ("accepted", ctypes.c_uint32),
        ("draft_passes", ctypes.c_uint32), ("draft_k", ctypes.c_uint32),
        ("accept_rate", ctypes.c_double), ("passes_per_token", ctypes.c_double),
        ("n_image_tokens", ctypes.c_uint32), ("tower_s", ctypes.c_double),
        ("req_tower", ctypes.c_uint64),
    ]


TOKEN_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                            ctypes.c_int32, ctypes.c_void_p)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)

_E = ctypes.c_void_p  # struct ns_engine *
_P = ctypes.POINTER
_SIGS = {
    "ns_version": (ctypes.c_char_p, []),
    "ns_engine_opts_default": (None, [_P(EngineOpts)]),
    "ns_gen_params_default": (None, [_P(GenParams)]),
    "ns_engine_opts_size": (ctypes.c_size_t, []),
    "ns_gen_params_size": (ctypes.c_size_t, []),
    "ns_engine_stats_size": (ctypes.c_size_t, []),
    "ns_parse_size": (ctypes.c_int, [ctypes.c_char_p, _P(ctypes.c_uint64)]),
    "ns_engine_load": (ctypes.c_int, [ctypes.c_char_p, _P(EngineOpts), _P(_E),
                                      ctypes.c_char_p, ctypes.c_size_t]),
    "ns_engine_free": (None, [_P(_E)]),
    "ns_engine_generate": (ctypes.c_int, [_E, ctypes.c_char_p, _P(GenParams), TOKEN_FN,
                                          ctypes.c_void_p]),
    "ns_engine_chat": (ctypes.c_int, [_E, _P(Msg), ctypes.c_size_t, _P(GenParams), TOKEN_FN,
                                      ctypes.c_void_p]),
    "ns_engine_reset": (None, [_E]),
    "ns_engine_eval": (ctypes.c_int, [_E, _P(ctypes.c_int32), ctypes.c_uint32,
                                      _P(ctypes.c_float), ctypes.c_bool]),
    "ns_engine_rollback": (ctypes.c_int, [_E, ctypes.c_uint32]),
    "ns_engine_n_past": (ctypes.c_uint32, [_E]),
    "ns_engine_set_thinking": (None, [_E, ctypes.c_bool]),
    "ns_engine_chat_template": (ctypes.c_char_p, [_E]),
    "ns_engine_logits": (ctypes.c_int, [_E, _P(ctypes.c_int32), ctypes.c_uint32,
                                        _P(ctypes.c_float)]),
    "ns_engine_tokenize": (ctypes.c_int, [_E, ctypes.c_char_p, ctypes.c_bool,
                                          _P(_P(ctypes.c_int32)), _P(ctypes.c_size_t)]),
    "ns_engine_detokenize": (ctypes.c_int, [_E, _P(ctypes.c_int32), ctypes.c_size_t,
                                            ctypes.c_bool, ctypes.c_bool,
                                            _P(ctypes.c_void_p), _P(ctypes.c_size_t)]),
    "ns_engine_token_piece": (ctypes.c_int, [_E, ctypes.c_int32, ctypes.c_bool,
                                             _P(ctypes.c_void_p), _P(ctypes.c_size_t)]),
    "ns_engine_token_bos": (ctypes.c_int32, [_E]),
    "ns_engine_token_eos": (ctypes.c_int32, [_E]),
    "ns_engine_token_eot": (ctypes.c_int32, [_E]),
    "ns_engine_token_is_eog": (ctypes.c_bool, [_E, ctypes.c_int32]),
    "ns_engine_n_vocab": (ctypes.c_uint32, [_E]),
    "ns_engine_session": (ctypes.c_char_p, [_E]),
    "ns_engine_pid": (ctypes.c_int, [_E, ctypes.c_int]),
    "ns_engine_stats": (None, [_E, _P(Stats)]),
    "ns_engine_cancel": (None, [_E]),
    "ns_engine_error": (ctypes.c_char_p, [_E]),
    "ns_engine_meta_count": (ctypes.c_uint64, [_E]),
    "ns_engine_meta_key": (ctypes.c_char_p, [_E, ctypes.c_uint64]),
    "ns_engine_meta_str": (ctypes.c_int, [_E, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_size_t]),
    "ns_engine_get_opts": (None, [_E, _P(EngineOpts)]),
    "ns_log_set": (None, [LOG_FN, ctypes.c_void_p]),
    "ns_sampler_chain_new": (ctypes.c_int, [_P(GenParams), ctypes.c_uint32,
                                            _P(ctypes.c_void_p)]),
    "ns_sampler_chain_sample": (ctypes.c_int32, [ctypes.c_void_p, _P(ctypes.c_float)]),
    "ns_sampler_chain_accept": (None, [ctypes.c_void_p, ctypes.c_int32]),
    "ns_sampler_chain_free": (None, [_P(ctypes.c_void_p)]),
}


def _candidates():
    env = os.environ.get("NS_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    if _paths is not None:
        out.append(os.path.normpath(os.path.join(here, _paths.LIBRARY)))
    out.append("libneurostream.so.%d" % 0)  # the dynamic loader's own search
    return out


def nsctl_path() -> str:
    """The nsctl executable `python3 -m neurostream` runs: $NS_NSCTL, the one installed with
    this package, else nsctl on PATH."""
    env = os.environ.get("NS_NSCTL")
    if env:
        return env
    if _paths is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        p = os.path.normpath(os.path.join(here, _paths.NSCTL))
        if os.access(p, os.X_OK):
            return p
    return "nsctl"


_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """libneurostream.so with its functions declared (loaded once); OSError when not found,
    RuntimeError when its structs are not the ones declared here."""
    global _lib
    if _lib is not None:
        return _lib
    errors = []
    for c in _candidates():
        try:
            handle = ctypes.CDLL(c)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("neurostream: cannot load libneurostream: " + "; ".join(errors))
    for name, (res, args) in _SIGS.items():
        fn = getattr(handle, name)
        fn.restype = res
        fn.argtypes = args
    if (handle.ns_engine_opts_size() != ctypes.sizeof(EngineOpts) or
            handle.ns_gen_params_size() != ctypes.sizeof(GenParams) or
            handle.ns_engine_stats_size() != ctypes.sizeof(Stats)):
        raise RuntimeError("neurostream: libneurostream %s has structs of %d/%d/%d bytes, "
                           "this package declares %d/%d/%d (a different version)" % (
                               handle.ns_version().decode(), handle.ns_engine_opts_size(),
                               handle.ns_gen_params_size(), handle.ns_engine_stats_size(),
                               ctypes.sizeof(EngineOpts), ctypes.sizeof(GenParams),
                               ctypes.sizeof(Stats)))
    _lib = handle
    return handle
