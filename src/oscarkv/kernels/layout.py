"""Pool layouts of the INT2 tier: "logical" (``oscarkv.quant`` format, row by row) and "tile16" (CUDA kernel).

Both layouts use the same tensors and shapes (``k_codes [nb, Hkv, 16, d/4]`` uint8, ``k_scale [nb, Hkv, 16, 1]``
...); tile16 only reorders bits inside each (block, KV head), so it is a pure function of the logical
format. Torch implementation of the transform both ways (CPU and GPU), used by the reference ops, the
tests and ``convert_pool``; the CUDA append kernel writes tile16 directly and is tested against it.

tile16 (block_size 16, one scale group per row): the 16 x d codes of one (block, head) are stored so that
lane l of a warp loads its MMA A fragments of the whole tile with one 128-bit (d=128) or 64-bit (d=64) load
and turns them into operands with one LOP3 per register and no float arithmetic. Lane l (g = l >> 2,
t = l & 3) owns 32-bit words [l * d/32, (l + 1) * d/32); 2-bit field f of the block sits at byte f // 4,
bits 2 (f % 4).

K (u8 operands of mma.m16n8k32 for d = 128, m16n8k16 for d = 64, against int8 q): byte j of word w holds
four fields P = 0..3 (bits 2P, 2P+1); masked in place the byte is 4^P c, and

    K codes:  token = g + 8 (w & 1),    dim = (d/4) P + 16 (w >> 1) + 4t + j

so one MMA per P covers dims [(d/4) P, (d/4)(P + 1)) of all 16 tokens (tokens on M, head_dim on K). At d = 32
(one word per lane; no CUDA kernel, the CPU paths only) byte j of the word holds token g + 8 (j >> 1), dims
8P + 2t + (j & 1).

V (fp16 operands of mma.m16n8k16): the kernel reads word w in two ways, s = 0 (as is) and s = 1 (rotated
right by 8 bits); in each 16-bit half e of either, field position P = 1..4 (bits 2P, 2P+1 of the half) ORed
under the fp16 exponent of 1024 is the exact value 1024 + 4^P c. So the 2-bit field (s, e, P) of word w sits
at bit 16e + 2P (s = 0), 8 + 2P (s = 1, e = 0) or (24 + 2P) mod 32 (s = 1, e = 1), and with u = (P - 1) >> 1,
x = (P - 1) & 1 it holds

    V codes:  token = 2t + 8 s + e,     dim = 16 (2w + u) + 8 x + g        (A = V^T, head_dim on M)

P = 1 + ((dim >> 3) & 1) + 2 ((dim >> 4) & 1) depends on the head_dim index only: the kernel undoes 4^-P per
output row and carries the 1024 offset algebraically (issue 7).

K scale / zero rows are stored in token order 0, 8, 1, 9, ..., 7, 15 (lane g reads tokens g and g + 8 as
one 32-bit pair); V scale / zero rows in order 0, 1, 8, 9, 2, 3, 10, 11, ... (lane t reads tokens 2t, 2t+1,
2t+8, 2t+9 as one 64-bit word). No head_dim permutation is involved, so nothing is folded into the rotations.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..quant.format import pack_codes, unpack_codes
from ..errors import InputError

TILE = 16
LAYOUTS = ("logical", "tile16")


def _bit(s: int, e: int, P: int) -> int:
    """Bit of the V-side 2-bit field (read variant s, half e, position P = 1..4) in a tile16 word."""
    if s == 0:
        return 16 * e + 2 * P
    return 8 + 2 * P if e == 0 else (24 + 2 * P) % 32


@lru_cache(maxsize=None)
def _field_maps(d: int):
    """(token, dim) of every 2-bit field of a tile16 block, for K and for V (fields in storage order),
    as flat indices token * d + dim."""
    nw = d // 32
    nf = 32 * nw * 16
    k_map, v_map = [0] * nf, [0] * nf
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for w in range(nw):
            for j in range(4):
                for P in range(4):
                    if nw == 1:  # d = 32: no CUDA kernel reads it (64 / 128 only); a bijection for the CPU paths
                        tok, dim = g + 8 * (j >> 1), 8 * P + 2 * t + (j & 1)
                    else:
                        tok, dim = g + 8 * (w & 1), (d // 4) * P + 16 * (w >> 1) + 4 * t + j
                    k_map[(lane * nw + w) * 16 + 4 * j + P] = tok * d + dim
            for s in range(2):
                for e in range(2):
                    for P in range(1, 5):
                        u, x = (P - 1) >> 1, (P - 1) & 1
                        f = (lane * nw + w) * 16 + _bit(s, e, P) // 2
                        v_map[f] = (2 * t + 8 * s + e) * d + 16 * (2 * w + u) + 8 * x + g
    mk = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    return mk(k_map), mk(v_map)


@lru_cache(maxsize=None)
def field_index(d: int, which: str) -> torch.Tensor:
    """``[16 * d]`` int32: the tile16 field (2-bit slot: byte f // 4, bits 2 (f % 4) of the block's codes) that
    holds the code of token ``i // d``, dim ``i % d``; the inverse of the field maps above, for writers that
    store one token's codes at a time (``triton_append``)."""
    return torch.argsort(_field_maps(d)[0 if which == "k" else 1]).to(torch.int32)


def code_weight_exponent(dim: int) -> int:
    """P of a head_dim index on the V side: the kernel's fp16 operand of code c at this dim is 1024 + 4^P c."""
    return 1 + ((dim >> 3) & 1) + 2 * ((dim >> 4) & 1)


# stored index i holds token SCALE_ORDER[which][i]
SCALE_ORDER = {
    "k": torch.tensor([i // 2 + 8 * (i % 2) for i in range(TILE)], dtype=torch.long),
    "v": torch.tensor([2 * (i // 4) + (i & 1) + 8 * ((i >> 1) & 1) for i in range(TILE)], dtype=torch.long),
}
SCALE_INV = {w: torch.argsort(o) for w, o in SCALE_ORDER.items()}


def _pack_fields(fields: torch.Tensor) -> torch.Tensor:
    """[..., n] 2-bit values -> [..., n / 4] uint8, field f at byte f // 4, bits 2 (f % 4) (little endian words)."""
    f = fields.to(torch.uint8).reshape(*fields.shape[:-1], -1, 4)
    return f[..., 0] | (f[..., 1] << 2) | (f[..., 2] << 4) | (f[..., 3] << 6)


def _unpack_fields(packed: torch.Tensor) -> torch.Tensor:
    p = packed
    return torch.stack([p & 3, (p >> 2) & 3, (p >> 4) & 3, (p >> 6) & 3], -1).flatten(-2)


def codes_to_tile16(codes: torch.Tensor, which: str) -> torch.Tensor:
    """Logical packed codes ``[..., 16, d/4]`` (quartered bytes per token) -> tile16 bytes, same shape."""
    d = codes.shape[-1] * 4
    plain = unpack_codes(codes, 2).reshape(*codes.shape[:-2], TILE * d)  # [..., token * d + dim]
    src = _field_maps(d)[0 if which == "k" else 1].to(codes.device)
    return _pack_fields(plain[..., src]).reshape(codes.shape)


def codes_from_tile16(tiles: torch.Tensor, which: str) -> torch.Tensor:
    """Inverse of ``codes_to_tile16``."""
    d = tiles.shape[-1] * 4
    fields = _unpack_fields(tiles.reshape(*tiles.shape[:-2], TILE * d // 4))
    src = _field_maps(d)[0 if which == "k" else 1].to(tiles.device)
    plain = torch.empty_like(fields)
    plain[..., src] = fields
    return pack_codes(plain.reshape(*tiles.shape[:-2], TILE, d), 2)


def scales_to_tile16(x: torch.Tensor, which: str) -> torch.Tensor:
    """Scale or zero ``[..., 16, ng]`` of K (``which="k"``) or V in token order -> tile16 order (token axis -2)."""
    return x[..., SCALE_ORDER[which].to(x.device), :]


def scales_from_tile16(x: torch.Tensor, which: str) -> torch.Tensor:
    return x[..., SCALE_INV[which].to(x.device), :]


def blocks_to_logical(pool, blocks: torch.Tensor, which: str):
    """(codes, scale, zero) of int2 ``blocks`` ``[n]`` in logical layout: ``[n, Hkv, 16, ...]`` (copies)."""
    c = getattr(pool, f"{which}_codes")[blocks]
    s = getattr(pool, f"{which}_scale")[blocks]
    z = getattr(pool, f"{which}_zero")[blocks]
    if pool.layout == "tile16":
        return codes_from_tile16(c, which), scales_from_tile16(s, which), scales_from_tile16(z, which)
    return c, s, z


def blocks_store_logical(pool, blocks: torch.Tensor, which: str, codes, scale, zero) -> None:
    """Write logical-layout ``[n, Hkv, 16, ...]`` contents into int2 ``blocks`` of the pool (any layout)."""
    if pool.layout == "tile16":
        codes, scale, zero = codes_to_tile16(codes, which), scales_to_tile16(scale, which), scales_to_tile16(zero, which)
    getattr(pool, f"{which}_codes")[blocks] = codes
    getattr(pool, f"{which}_scale")[blocks] = scale
    getattr(pool, f"{which}_zero")[blocks] = zero


def convert_pool(pool, layout: str):
    """A copy of ``pool`` with its INT2 tensors in ``layout`` ("logical" or "tile16"); hp tensors shared."""
    from dataclasses import replace

    if layout not in LAYOUTS:
        raise InputError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == pool.layout:
        return pool
    if pool.block_size != TILE:
        raise InputError(f"the tile16 layout needs block_size {TILE}, got {pool.block_size}")
    new = {}
    for which in ("k", "v"):
        c, s, z = (getattr(pool, f"{which}_{n}") for n in ("codes", "scale", "zero"))
        if layout == "tile16":
            new.update({f"{which}_codes": codes_to_tile16(c, which), f"{which}_scale": scales_to_tile16(s, which),
                        f"{which}_zero": scales_to_tile16(z, which)})
        else:
            new.update({f"{which}_codes": codes_from_tile16(c, which), f"{which}_scale": scales_from_tile16(s, which),
                        f"{which}_zero": scales_from_tile16(z, which)})
    if layout == "tile16":  # the record layout of a tile16 pool (kernels/paged.py, tile16_records)
        from .paged import tile16_records

        rec = tile16_records(pool.k_codes.shape[0], pool.num_kv_heads, pool.head_dim, pool.k_scale.dtype,
                             pool.k_codes.device)
        for n, t in new.items():
            rec[n].copy_(t)
        new = rec
    return replace(pool, layout=layout, **new)
