"""Accuracy of KV methods on real text: perplexity, KL to BF16, top-1 agreement, bits and bytes.

Protocol: the evaluation text is cut into ``sequences`` windows of ``context`` tokens. Every method
scores the same next-token targets, at positions ``score_from .. context - 2`` of each window
(the first ``score_from`` positions see a cache that is mostly BF16 window for every method).

* Our methods run through ``banded_logits`` (one forward == decoding through the cache, see
  banded.py).
* transformers' own ``QuantizedCache`` (quanto, hqq) is run for real: prefill ``score_from`` tokens,
  then feed the rest in chunks of ``peer_chunk`` tokens through the cache. Tokens inside one chunk see
  each other unquantized (as in any chunked prefill), on top of the cache's own ``residual_length``
  full-precision tokens; the peers have no attention-sink window.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ..dims import attention_dims
from ..methods import KVMethod
from ..quant import int_region_bits, kv_cache_bytes, mixed_bits_per_element
from ..rotation import RotationSet
from .banded import banded_logits
from ..errors import InputError, StateError
from ..validation import check_token_ids

PEERS = ("quanto", "hqq")


@dataclass(frozen=True)
class PeerMethod:
    """transformers' own ``QuantizedCache`` (backend quanto or hqq), with the interface the harness uses
    of a ``KVMethod``: ``name``, ``bits_per_element``, ``kv_bytes``, plus ``logits`` and a ``note``.

    Bits use our nominal accounting: ``bits``-bit codes + 16-bit scale and zero per group of
    ``group_size``, and the full-precision residual (the backends' real CPU storage is larger)."""

    backend: str
    residual: int = 0  # residual_length: the most recent tokens kept in full precision
    bits: int = 2
    group_size: int = 64
    chunk: int = 128

    def __post_init__(self):
        if self.backend not in PEERS:
            raise InputError(f"unknown peer {self.backend!r}; choose from {PEERS}")

    @property
    def name(self) -> str:
        return f"hf-{self.backend}-int{self.bits}"

    @property
    def note(self) -> str:
        return (f"transformers QuantizedCache(backend={self.backend}), residual_length={self.residual}, "
                f"chunk {self.chunk}")

    def bits_per_element(self, context: int, head_dim: int) -> float:
        int_bits = int_region_bits(self.bits, self.group_size, 16)  # groups of the backend, not of head_dim
        return mixed_bits_per_element(context, max(0, context - self.residual), int_bits)

    def kv_bytes(self, context: int, num_layers: int, num_kv_heads: int, head_dim: int, batch: int = 1) -> int:
        bpe = self.bits_per_element(context, head_dim)
        return kv_cache_bytes(context, num_layers, num_kv_heads, head_dim, bpe, batch)

    def logits(self, model, ids: torch.Tensor, score_from: int) -> torch.Tensor:
        return peer_logits(model, ids, self.backend, score_from, self.residual, self.bits, self.group_size, self.chunk)


@dataclass
class MethodResult:
    method: str
    ppl: float
    kl: float
    top1: float
    bits_per_element: float
    kv_bytes: int
    seconds: float
    note: str = ""

    def row(self) -> dict:
        return {
            "method": self.method,
            "ppl": self.ppl,
            "kl": self.kl,
            "top1": self.top1,
            "bits_per_element": self.bits_per_element,
            "kv_bytes": self.kv_bytes,
            "seconds": round(self.seconds, 1),
            **({"note": self.note} if self.note else {}),
        }


@dataclass
class _Reference:
    """BF16 log-probs at the scored positions of every window (for KL and top-1)."""

    logp: list = field(default_factory=list)
    top1: list = field(default_factory=list)
    row: "MethodResult | None" = None


def windows(ids: torch.Tensor, context: int, sequences: int) -> torch.Tensor:
    """The first ``sequences`` windows of ``context`` tokens of the 1-D ``ids``, as [sequences, context]."""
    for name, v in (("context", context), ("sequences", sequences)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:  # 0 sequences divided by zero at the end
            raise InputError(f"{name} must be an integer >= 1, got {v!r}")
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1:
        raise InputError(f"the evaluation ids must be a 1-D tensor of token ids, got "
                         f"{tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__}")
    need = context * sequences
    if ids.numel() < need:
        raise InputError(
            f"evaluation text has {ids.numel()} tokens, {need} are needed for {sequences} x {context}; "
            "use a longer text, a shorter --context or fewer --sequences"
        )
    return ids[:need].view(sequences, context)


def peer_logits(model, ids: torch.Tensor, backend: str, score_from: int, residual_length: int,
                nbits: int = 2, q_group_size: int = 64, chunk: int = 128) -> torch.Tensor:
    """Logits [1, T, V] from transformers' QuantizedCache fed chunk by chunk."""
    from transformers import QuantizedCache

    axis = {"quanto": 0, "hqq": 1}[backend]
    try:
        cache = QuantizedCache(backend=backend, config=model.config, nbits=nbits, axis_key=axis, axis_value=axis,
                               q_group_size=q_group_size, residual_length=residual_length)
    except ImportError as e:
        raise StateError(f"peer {backend!r} needs its package: pip install {'optimum-quanto' if backend == 'quanto' else 'hqq'} ({e})") from None
    outs = []
    pos = 0
    t = ids.shape[1]
    with torch.no_grad():
        for end in [score_from, *range(score_from + chunk, t, chunk), t]:
            if end <= pos:
                continue
            out = model(ids[:, pos:end], cache=cache, use_cache=True)
            outs.append(out.logits)
            pos = end
    return torch.cat(outs, dim=1)


def rotations_for(rotations, method: KVMethod):
    """``rotations`` is one RotationSet for every method or a dict {method name: RotationSet} (key
    ``"*"`` = the fallback), e.g. the paper's per-layer file for ``oscar`` and a centered per-head
    file for ``oscar-plus``."""
    if isinstance(rotations, dict):
        return rotations.get(method.name, rotations.get(method.name.split("+")[0], rotations.get("*")))
    return rotations


def check_methods(methods, rotations, head_dim: int) -> None:
    """Every method can be built with its rotation file at this head_dim: layer 0's plan, i.e. the rules of
    ``KVMethod.layer_plan`` (calibrated rotations present, means for centering, fitted levels for lloyd-max,
    the key rescale, group size). Run before any method is evaluated (and by the CLI before the model
    loads), so a method late in the list cannot fail after the others have run."""
    for m in methods:
        if isinstance(m, KVMethod):
            m.layer_plan(0, head_dim, rotations_for(rotations, m))


def _score(logits: torch.Tensor, ids: torch.Tensor, score_from: int):
    """(log-probs at scored positions [n, V], targets [n])."""
    lp = torch.log_softmax(logits[0, score_from:-1].float(), dim=-1)
    return lp, ids[0, score_from + 1 :]


def evaluate(
    model,
    ids: torch.Tensor,
    methods: list[KVMethod],
    rotations: RotationSet | dict | None = None,
    context: int = 4096,
    sequences: int = 1,
    score_from: int = 512,
    peers: tuple[str, ...] = (),
    peer_residual: int | None = None,
    progress: bool = True,
    reference: dict | None = None,
) -> dict:
    """Run every method (and peer) on the same windows; returns the JSON-ready result dict.

    ``reference``: pass the same dict to several calls on the same text/context to compute the
    BF16 reference forward only once (it is filled on the first call).
    """
    if not 0 < score_from < context - 1:
        raise InputError(f"score_from must be in (0, context - 1), got {score_from} for context {context}")
    peer_methods = [PeerMethod(p, residual=peer_residual or 0) for p in peers]  # refuses unknown names
    seqs = windows(ids, context, sequences)
    check_token_ids("evaluation ids", seqs, model.get_input_embeddings().num_embeddings)
    dims = attention_dims(model)
    layers, kv_heads, head_dim = dims.num_layers, dims.num_kv_heads, dims.head_dim
    check_methods(methods, rotations, head_dim)
    names = [m.name for m in methods]
    if "bf16" not in names:
        raise InputError("the method list must include bf16 (the reference for KL and top-1)")
    order = sorted(methods, key=lambda m: m.name != "bf16")  # reference first
    key = (id(model), context, sequences, score_from, int(seqs.sum()))
    ref = reference.setdefault(key, _Reference()) if reference is not None else _Reference()
    if ref.logp:  # BF16 already scored on these windows: reuse it
        order = [m for m in order if m.name != "bf16"]
    jobs = order + peer_methods
    results = []
    bar = tqdm(total=len(jobs) * sequences, desc="eval", unit="fwd", disable=not progress)
    for job in jobs:
        nll = kl = agree = 0.0
        count = 0
        t0 = time.time()
        for s in range(sequences):
            x = seqs[s : s + 1]
            bar.set_postfix_str(f"{job.name} seq {s + 1}/{sequences}")
            with torch.no_grad():
                if isinstance(job, PeerMethod):
                    logits = job.logits(model, x, score_from)
                else:
                    logits = banded_logits(model, x, job, rotations_for(rotations, job))
            lp, tgt = _score(logits, x, score_from)
            del logits
            if job.name == "bf16":
                ref.logp.append(lp)
                ref.top1.append(lp.argmax(-1))
            r = ref.logp[s]
            nll += -lp.gather(1, tgt[:, None]).sum().item()
            kl += (r.exp() * (r - lp)).sum().item()
            agree += (lp.argmax(-1) == ref.top1[s]).sum().item()
            count += tgt.numel()
            bar.update(1)
        bpe = job.bits_per_element(context, head_dim)
        kvb = job.kv_bytes(context, layers, kv_heads, head_dim)
        results.append(MethodResult(job.name, math.exp(nll / count), kl / count, agree / count, bpe, kvb,
                                    time.time() - t0, getattr(job, "note", "")))
        if job.name == "bf16":
            ref.row = results[-1]
    if not any(r.method == "bf16" for r in results):
        results.insert(0, ref.row)
    bar.close()
    return {
        "context": context,
        "tokens": int(sequences * (context - 1 - score_from)),
        "sequences": sequences,
        "score_from": score_from,
        "results": [r.row() for r in results],
    }
