"""A decode step of a transformers model over a paged ``OscarCache``, captured in a CUDA graph.

Why a graph captured by the package rather than transformers' static-cache + ``torch.compile`` path:
the paged cache's per-step work that depends on the step (block allocation, slot mappings, block
tables) is host-side Python in ``kernels.MixedKVCache``; it runs *outside* the graph, writing into
fixed-shape device buffers (``PagedState.make_static``: block tables as wide as the pool's capacity,
split counts of the decode kernel sized for the capacity), and the graph replays everything else: the
model's layers, the rotations, ``write_kv`` and ``decode_attention``. No compilation is needed and the
Triton kernels run as they are. The pool is preallocated for ``max_tokens`` per row; a step past it
raises ``StateError`` before anything is replayed.

``compile=True`` first compiles the step with ``torch.compile`` (inductor, ``dynamic=False``): the
model's small ops (RMSNorm, q/k norm, RoPE, SiLU, residual adds, casts, our rotations) fuse into a few
Triton kernels, while each layer's append + INT2 attention stays one opaque custom op
(``oscarkv::paged_decode``, cache/ops.py), so dynamo never traces the host-side planning or the ctypes /
Triton launches. The compiled step is then captured in the CUDA graph as before: the graph replays far
fewer kernels (on an H200 the uncompiled graph replays ~50 small kernels per layer at a few us each).
The first two steps run the compiled code outside the graph (compilation, then a check that it does
not recompile); capture runs under ``torch.compiler.set_stance("fail_on_recompile")``.

``GraphDecoder(model, cache)`` after a prefill; ``step(tokens)`` returns the next logits.
``generate(model, cache, input_ids, ...)`` is a small greedy / sampling loop on top (``model.generate``
works with the paged cache too, eagerly).
"""

from __future__ import annotations

import contextlib
import inspect
import numbers

import torch

from ..errors import InputError, StateError, UnsupportedError
from ..validation import check_token_ids


def _cache_kwarg(model) -> str:
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _check_enabled(model, cache, who: str) -> None:
    """``model`` runs the OSCAR attention with this very ``cache`` (else its forwards would attend the
    cache's rotated K/V with the plain attention, or fail in another cache's layers)."""
    from ..integrations.transformers import enabled_cache

    got = enabled_cache(model)
    if got is None:
        raise StateError(f"{who} needs enable_oscar_attention(model, cache) first")
    if got is not cache:
        raise StateError(f"{who}: the model is enabled with another OscarCache; call "
                         "enable_oscar_attention(model, cache) with this cache first")


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)  # numpy ints too


def _eos_list(eos_token_id) -> list[int]:
    """``eos_token_id`` (a token id, a list / tuple / tensor of them) as a list of Python ints, checked."""
    ids = eos_token_id.tolist() if torch.is_tensor(eos_token_id) else eos_token_id
    ids = [ids] if _is_int(ids) else ids
    if not isinstance(ids, (list, tuple)) or not ids or not all(_is_int(i) for i in ids):
        raise InputError(f"eos_token_id must be None, a token id or a non-empty list of token ids, got {eos_token_id!r}")
    return [int(i) for i in ids]


def _check_token_ids(name: str, t, vocab: int) -> None:
    """Token ids: a 2-D tensor with at least one token (``validation.check_token_ids``: integers in [0, vocab))."""
    if not torch.is_tensor(t) or t.ndim != 2:
        raise InputError(f"{name} must be a [batch, tokens] tensor of token ids, got "
                         f"{tuple(t.shape) if torch.is_tensor(t) else type(t).__name__}")
    if t.shape[0] < 1 or t.shape[1] < 1:
        raise InputError(f"{name} must hold at least one token per row, got shape {tuple(t.shape)}")
    check_token_ids(name, t, vocab)


def _check_generate_args(model, input_ids, attention_mask, max_new_tokens, do_sample, temperature, top_k,
                         eos_token_id, pad_token_id) -> None:
    """Everything ``generate`` takes from its caller, checked before the prefill (issue 11)."""
    vocab = model.get_input_embeddings().num_embeddings
    _check_token_ids("input_ids", input_ids, vocab)
    if attention_mask is not None and (not torch.is_tensor(attention_mask) or attention_mask.shape != input_ids.shape):
        got = tuple(attention_mask.shape) if torch.is_tensor(attention_mask) else type(attention_mask).__name__
        raise InputError(f"attention_mask must have input_ids' shape {tuple(input_ids.shape)}, got {got}")
    if not _is_int(max_new_tokens) or max_new_tokens < 1:
        raise InputError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    if do_sample:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0 \
                or temperature == float("inf"):
            raise InputError(f"temperature must be a finite number > 0 when sampling, got {temperature!r}; "
                             "for greedy decoding pass do_sample=False")
        if top_k is not None and (not _is_int(top_k) or top_k < 0):
            raise InputError(f"top_k must be None, 0 (off) or a positive integer, got {top_k!r}")
    if eos_token_id is not None:
        bad = [i for i in _eos_list(eos_token_id) if not 0 <= i < vocab]
        if bad:
            raise InputError(f"eos_token_id {bad[0]} is outside the model's vocabulary [0, {vocab}): "
                             "generation would never stop on it")
        if not _is_int(pad_token_id) or not 0 <= pad_token_id < vocab:
            raise InputError(f"pad_token_id must be a token id in [0, {vocab}) (the rows that ended are fed it), "
                             f"got {pad_token_id!r}")


def _check_compile(device) -> None:
    """``compile=True`` on CPU runs inductor's C++ backend: refused before the prefill when it finds no
    compiler (before: an inductor traceback at the first decode step, after the prefill)."""
    if torch.device(device).type != "cpu":
        return
    try:
        from torch._inductor import cpp_builder

        find = cpp_builder.get_cpp_compiler
    except (ImportError, AttributeError):  # another torch: torch.compile reports it itself
        return
    try:
        find()
    except Exception as e:  # noqa: BLE001 (inductor's InvalidCxxCompiler and friends)
        raise UnsupportedError(f"compile=True on CPU needs a C++ compiler for torch.compile's CPU backend "
                               f"({type(e).__name__}); install g++ (or set CXX), or pass compile=False") from None


def _use_graph(st, device: torch.device, use_graph: bool | None) -> bool:
    """Whether the decode step is captured: by default on CUDA unless the kernels are the torch reference."""
    use = (device.type == "cuda" and st.kernel_backend != "torch") if use_graph is None else use_graph
    if use and device.type != "cuda":
        raise InputError("CUDA graphs need a CUDA model; pass use_graph=False on CPU")
    if use and st.kernel_backend == "torch":
        # the torch reference reads lengths on the host: capture fails with an unrelated CUDA error and
        # leaves the CUDA generator state broken for the rest of the process (seen on the H200, 2026-12-03c)
        raise InputError("kernel_backend='torch' runs the torch reference, which syncs with the host and "
                         "cannot be captured in a CUDA graph; use kernel_backend='auto' or pass use_graph=False")
    return use


class GraphDecoder:
    """One decode step (one token per row) of ``model`` over the paged ``cache``, replayed from a CUDA graph.

    ``use_graph=False`` runs the same step eagerly on the same fixed buffers (CPU tests, debugging).
    """

    def __init__(self, model, cache, use_graph: bool | None = None, compile: bool = False):
        st = getattr(cache, "paged", None)
        if st is None or st.mgr is None:
            raise StateError("GraphDecoder needs a paged OscarCache that holds a prefill: call "
                             "enable_oscar_attention(model, cache) and run the prompt through the model first")
        _check_enabled(model, cache, "GraphDecoder")
        if compile:
            _check_compile(st.device)
        self.model, self.cache, self.state = model, cache, st
        self.epoch = st.epoch  # a reset of the cache ends this decoder (its graph holds the old pools)
        self.use_graph = _use_graph(st, st.device, use_graph)
        if st.graph_capacity is None:
            st.make_static()
        b = st.batch
        self.ids = torch.zeros(b, 1, dtype=torch.long, device=st.device)
        self.pos = torch.zeros(b, 1, dtype=torch.long, device=st.device)
        self.kw = {_cache_kwarg(model): cache, "use_cache": True}
        self.graphs = {}  # page-view bucket of the step (PagedState.page_buckets) -> (CUDA graph, its logits)
        self.graph = None  # the graph the last step replayed
        self.out = None
        self._eager_steps = 0
        self.compile = compile
        self._fwd = model
        if compile:
            from . import ops

            if st.handle is None:
                st.handle = ops.register(st)
            # the layers' per-head rotations are made lazily on first use; make them now, so the compiled
            # code does not trace the "not made yet" branch first and recompile on the next step
            from ..dims import attention_dims

            hq = attention_dims(model).num_heads
            for layer in cache.layers:
                layer._query_rotations(hq)
            self._fwd = compiled_forward(model)

    def reset_graphs(self) -> None:
        """Drop the captured graphs: the next step captures them again (bench/step_ablate.py swaps kernels)."""
        self.graphs, self.graph, self.out = {}, None, None

    def _capture(self) -> None:
        """Capture the step once per page-view bucket (``PagedState.page_buckets``; one graph without a page view),
        all at the first graph step: a capture records kernels without running them, so the buckets this step
        does not use cost no device work, and no later step waits for a capture. The graphs share one memory
        pool (they replay one at a time); each keeps its own logits."""
        st = self.state
        now = st.page_bucket
        pool = None
        try:
            for n in ([None] if now is None else st.page_buckets()):
                st.use_page_bucket(n)
                g = torch.cuda.CUDAGraph()
                stance = torch.compiler.set_stance("fail_on_recompile") if self.compile else contextlib.nullcontext()
                with stance, torch.cuda.graph(g, pool=pool):
                    out = self._forward()
                pool = g.pool()
                self.graphs[n] = (g, out)
        finally:
            st.use_page_bucket(now)

    def _forward(self):
        st = self.state
        st.opaque = self.compile
        try:
            return self._fwd(input_ids=self.ids, position_ids=self.pos, **self.kw).logits
        finally:
            st.opaque = False

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B] (the last sampled token of each row) -> logits [B, vocab] of the next position."""
        st = self.state
        if st.epoch != self.epoch:
            raise StateError("the cache was reset after this GraphDecoder was made; make a new GraphDecoder "
                             "(oscarkv.cache.graph.generate makes one per call)")
        if not torch.is_tensor(tokens) or tokens.numel() != st.batch:
            got = tuple(tokens.shape) if torch.is_tensor(tokens) else type(tokens).__name__
            raise InputError(f"step takes one token per row: a tensor of {st.batch} token ids, got {got}")
        check_token_ids("step's tokens", tokens, None)  # dtype only: a range check would sync every step
        self.ids.copy_(tokens.view(-1, 1))
        st.begin_forward(1)  # host: plan + fixed buffers; raises StateError when the pool is full
        # a decode forward (the cache holds a prefill, checked in __init__): the positions came with the
        # step's one host-to-device upload (no sync)
        self.pos.copy_(st.static_pos.view(-1, 1))
        st.preplanned = True
        try:
            # first step(s) outside the graph: compile the Triton kernels (and, compiled, the step twice:
            # compilation, then a run that must hit the compiled code's guards)
            if not self.use_graph or self._eager_steps < (2 if self.compile else 1):
                self._eager_steps += 1
                out = self._forward()[:, -1]
                st.end_forward()  # the opaque (compiled) layers do not count themselves
                return out
            if st.page_bucket not in self.graphs:
                self._capture()
            self.graph, self.out = self.graphs[st.page_bucket]
            self.graph.replay()
            st.end_forward()
            return self.out[:, -1]
        except BaseException as e:
            if st.broken is None:
                st.mark_broken(f"a decode step failed: {type(e).__name__}")
            raise
        finally:
            st.preplanned = False


def compiled_forward(model, dynamic: bool | None = False):
    """``torch.compile(model.forward)`` (inductor; ``dynamic``: torch.compile's, static shapes by default),
    made once per model and kept on it (a later call returns the first one, whatever its ``dynamic``).
    The bound ``forward`` is compiled rather than the module, so forward hooks (the padding hook of
    ``enable_oscar_attention``) stay outside the compiled region. Used by ``GraphDecoder(compile=True)``
    and by bench/bench_model.py for the BF16 baseline (the same compilation on both paths)."""
    f = getattr(model, "_oscar_compiled_forward", None)
    if f is None:
        import torch._dynamo

        # one compiled entry per layer index is not needed (layers share code), but caches of different
        # sizes / batches each add one: allow more than the default 8 before falling back to eager
        torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 64)
        f = torch.compile(model.forward, dynamic=dynamic)
        model._oscar_compiled_forward = f
    return f


def _sample(logits: torch.Tensor, do_sample: bool, temperature: float, top_k: int | None, generator=None):
    if not do_sample:
        return logits.argmax(-1)
    x = logits.float() / temperature  # > 0 (generate checks it)
    if top_k:
        kth = torch.topk(x, min(top_k, x.shape[-1]), dim=-1).values[:, -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    return torch.multinomial(torch.softmax(x, -1), 1, generator=generator)[:, 0]


@torch.no_grad()
def generate(model, cache, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
             max_new_tokens: int = 32, do_sample: bool = False, temperature: float = 1.0, top_k: int | None = None,
             generator=None, use_graph: bool | None = None, return_logits: bool = False,
             eos_token_id: int | list[int] | None = None, pad_token_id: int = 0, compile: bool = False):
    """Prefill ``input_ids`` (left-padded rows with ``attention_mask``) through the paged ``cache``, then
    up to ``max_new_tokens`` graph-replayed decode steps. Returns the new tokens [B, n] (and the logits of
    every step with ``return_logits``). ``compile=True``: the decode step is compiled with ``torch.compile``
    before capture (``GraphDecoder``). A row that produced ``eos_token_id`` continues with
    ``pad_token_id``; the loop stops when every row has. ``enable_oscar_attention(model, cache)`` must be on.
    ``top_k=0`` (or None) samples from the whole vocabulary, as in transformers. Every argument is checked
    before the prefill (``InputError`` / ``StateError``, one line)."""
    _check_generate_args(model, input_ids, attention_mask, max_new_tokens, do_sample, temperature, top_k,
                         eos_token_id, pad_token_id)
    if cache.get_seq_length() != 0:
        raise StateError(f"generate needs an empty cache, this one holds {cache.get_seq_length()} tokens: "
                         "create a new OscarCache (and enable_oscar_attention with it) for each generate call")
    if cache.paged is None:
        raise StateError("generate runs the paged backend: create OscarCache(..., backend='paged') or enable "
                         "oscar attention on a CUDA model first")
    _check_enabled(model, cache, "generate")
    st = cache.paged
    use_graph = _use_graph(st, input_ids.device, use_graph)  # refused before the prefill
    if compile:
        _check_compile(input_ids.device)
    need = input_ids.shape[1] + max_new_tokens
    cap = st.capacity_for(input_ids.shape[1])  # max_tokens, or the default the pools will get
    if need - (0 if attention_mask is None else int((attention_mask == 0).sum(1).min())) > cap:
        raise StateError(f"prompt + max_new_tokens = {need} tokens exceed the cache's max_tokens={cap}"
                         f"{'' if st.max_tokens is not None else ' (the default: prompt + 4096)'}; "
                         "create the OscarCache with a larger max_tokens")
    cache.set_padding(attention_mask)
    pos = None
    if attention_mask is not None:
        pos = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)
    kw = {_cache_kwarg(model): cache, "use_cache": True}
    logits = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos, logits_to_keep=1, **kw).logits[:, -1]
    dec = GraphDecoder(model, cache, use_graph=use_graph, compile=compile)
    toks, all_logits = [], []
    eos = None if eos_token_id is None else torch.tensor(_eos_list(eos_token_id), device=input_ids.device)
    done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
    for i in range(max_new_tokens):
        if return_logits:
            all_logits.append(logits.float().clone())
        nxt = _sample(logits, do_sample, temperature, top_k, generator)
        if eos is not None:
            nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
            done |= torch.isin(nxt, eos)
        toks.append(nxt)
        if i + 1 < max_new_tokens and not (eos is not None and bool(done.all())):
            logits = dec.step(nxt)
        elif eos is not None and bool(done.all()):
            break
    out = torch.stack(toks, 1)
    return (out, all_logits) if return_logits else out
