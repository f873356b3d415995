"""Thirty-second session, CPU: what bf16 split partials (bench/results/2026-12-05_s32_bf16_partials.patch) cost in
precision. Random q, K, V (V with mean 0.5, std 2), float64 exact attention; the kernel's split-K merge done in fp32
with each split's normalised partial O / L kept in fp32 or rounded to bf16; relative Frobenius error of the merged
output against the exact one, before and after the output's own rounding to bf16. "peaky": every 997th score +8.

    .venv/bin/python bench/results/2026-12-05_s32_bf16_partials_precision.py
"""
import torch

torch.manual_seed(0)


def run(N=131072, S=32, G=4, D=128, peaky=False):
    q = torch.randn(G, D, dtype=torch.float64)
    k = torch.randn(N, D, dtype=torch.float64)
    v = torch.randn(N, D, dtype=torch.float64) * 2 + 0.5
    s = q @ k.T / D**0.5
    if peaky:
        s[:, ::997] += 8.0
    exact = torch.softmax(s, -1) @ v
    ms, ls, os_ = [], [], []
    for ss, vv in zip(s.float().chunk(S, -1), v.float().chunk(S, 0)):
        m = ss.max(-1, keepdim=True).values
        p = torch.exp(ss - m)
        ls.append(p.sum(-1, keepdim=True))
        ms.append(m)
        os_.append((p @ vv) / ls[-1])
    lse = torch.stack(ms) + torch.stack(ls).log()
    w = torch.softmax(lse, 0)
    O = torch.stack(os_)
    out32, out16 = (w * O).sum(0), (w * O.bfloat16().float()).sum(0)
    rel = lambda a: ((a.double() - exact).norm() / exact.norm()).item()  # noqa: E731
    fin = lambda a: a.bfloat16().float()  # noqa: E731
    print(f"N={N} S={S} peaky={peaky}: fp32 partials {rel(out32):.2e} -> bf16 out {rel(fin(out32)):.2e}; "
          f"bf16 partials {rel(out16):.2e} -> bf16 out {rel(fin(out16)):.2e}; exact rounded to bf16 {rel(fin(exact)):.2e}")


for peaky in (False, True):
    run(peaky=peaky)
    run(N=32768, S=16, peaky=peaky)
