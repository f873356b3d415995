"""Pool layouts of the INT2 tier: "logical" (``oscarkv.quant`` format, row by row) and "tile16" (CUDA kernel).

Both layouts use the same tensors and shapes (``k_codes [nb, Hkv, 16, d/4]`` uint8, ``k_scale [nb, Hkv, 16, 1]``
...); tile16 only reorders bits inside each (block, KV head), so it is a pure function of the logical
format. Torch implementation of the transform both ways (CPU and GPU), used by the reference ops, the
tests and ``convert_pool``; the CUDA append kernel writes tile16 directly and is tested against it.

tile16 (block_size 16, one scale group per row): the 16 x d codes of one (block, head) are stored so that
lane l of a warp loads its mma.m16n8k16 A fragments for the whole tile with one 128-bit (d=128) or 64-bit
(d=64) load. Lane l owns 32-bit words [l * d/32, (l + 1) * d/32); in word w the 2-bit field j (bits 2j, 2j+1)
holds, with i = j & 7, half = j >> 3, step = 2w + (i >> 2), r = i & 3, g = l >> 2, t = l & 3,
row = g + 8 (r & 1), col = 2t + 8 (r >> 1) + half:

    K codes:  token = row, dim = 16 step + col      (A operand = K, tokens on M)
    V codes:  token = col, dim = 16 step + row      (A operand = V^T, head_dim on M)

Scale and zero rows are stored in token order 0, 8, 1, 9, ..., 7, 15 (lane g reads tokens g and g + 8 as
one 32-bit pair). No head_dim permutation is involved, so nothing is folded into the rotations.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from ..quant.format import pack_codes, unpack_codes

TILE = 16
LAYOUTS = ("logical", "tile16")


@lru_cache(maxsize=None)
def _field_maps(d: int):
    """(token, dim) of every 2-bit field of a tile16 block, for K and for V (fields in storage order)."""
    nw = d // 32
    tok_k, dim_k, tok_v, dim_v = [], [], [], []
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for w in range(nw):
            for j in range(16):
                i, half = j & 7, j >> 3
                step, r = 2 * w + (i >> 2), i & 3
                row = g + 8 * (r & 1)
                col = 2 * t + 8 * (r >> 1) + half
                tok_k.append(row)
                dim_k.append(16 * step + col)
                tok_v.append(col)
                dim_v.append(16 * step + row)
    mk = lambda x: torch.tensor(x, dtype=torch.long)  # noqa: E731
    return (mk(tok_k) * d + mk(dim_k)), (mk(tok_v) * d + mk(dim_v))


# stored index s holds token SCALE_ORDER[s]
SCALE_ORDER = torch.tensor([s // 2 + 8 * (s % 2) for s in range(TILE)], dtype=torch.long)
SCALE_INV = torch.argsort(SCALE_ORDER)


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


def scales_to_tile16(x: torch.Tensor) -> torch.Tensor:
    """Scale or zero ``[..., 16, ng]`` in token order -> tile16 order (token axis -2)."""
    return x[..., SCALE_ORDER.to(x.device), :]


def scales_from_tile16(x: torch.Tensor) -> torch.Tensor:
    return x[..., SCALE_INV.to(x.device), :]


def blocks_to_logical(pool, blocks: torch.Tensor, which: str):
    """(codes, scale, zero) of int2 ``blocks`` ``[n]`` in logical layout: ``[n, Hkv, 16, ...]`` (copies)."""
    c = getattr(pool, f"{which}_codes")[blocks]
    s = getattr(pool, f"{which}_scale")[blocks]
    z = getattr(pool, f"{which}_zero")[blocks]
    if pool.layout == "tile16":
        return codes_from_tile16(c, which), scales_from_tile16(s), scales_from_tile16(z)
    return c, s, z


def blocks_store_logical(pool, blocks: torch.Tensor, which: str, codes, scale, zero) -> None:
    """Write logical-layout ``[n, Hkv, 16, ...]`` contents into int2 ``blocks`` of the pool (any layout)."""
    if pool.layout == "tile16":
        codes, scale, zero = codes_to_tile16(codes, which), scales_to_tile16(scale), scales_to_tile16(zero)
    getattr(pool, f"{which}_codes")[blocks] = codes
    getattr(pool, f"{which}_scale")[blocks] = scale
    getattr(pool, f"{which}_zero")[blocks] = zero


def convert_pool(pool, layout: str):
    """A copy of ``pool`` with its INT2 tensors in ``layout`` ("logical" or "tile16"); hp tensors shared."""
    from dataclasses import replace

    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if layout == pool.layout:
        return pool
    if pool.block_size != TILE:
        raise ValueError(f"the tile16 layout needs block_size {TILE}, got {pool.block_size}")
    new = {}
    for which in ("k", "v"):
        c, s, z = (getattr(pool, f"{which}_{n}") for n in ("codes", "scale", "zero"))
        if layout == "tile16":
            new.update({f"{which}_codes": codes_to_tile16(c, which), f"{which}_scale": scales_to_tile16(s),
                        f"{which}_zero": scales_to_tile16(z)})
        else:
            new.update({f"{which}_codes": codes_from_tile16(c, which), f"{which}_scale": scales_from_tile16(s),
                        f"{which}_zero": scales_from_tile16(z)})
    return replace(pool, layout=layout, **new)
