# SmolLM2 experiments (issue 10 task 2): variants of the centered OSCAR cache at 4096 tokens, default
# windows (sink 64, recent 256, page 16), calibrated on 8192 tokens of pydoc-calib (as `make run`),
# evaluated on pydoc-eval. Usage: smol_exp.py OUT.jsonl variant[,variant...]
import sys, json, time, torch
from dataclasses import replace
from pathlib import Path
torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", "2")))
from oscarkv.cli.commands import _load
from oscarkv.calibrate import collect_stats, build_rotations
from oscarkv.data import builtin_text, token_ids
from oscarkv.eval.harness import evaluate
from oscarkv.methods import make_method, LayerPlan
import oscarkv.methods as M

MODEL = __import__("os").environ.get("MODEL", "default")
CTX = int(__import__("os").environ.get("CTX", "4096"))
CAL = int(__import__("os").environ.get("CAL", "8192"))
DATA = __import__("os").environ.get("DATA", "pydoc-eval")
SINK, RECENT, PAGE = (0, 0, 1) if __import__("os").environ.get("PURE") else (64, 256, 16)
CACHE = Path(__import__("os").environ.get("CACHE", "/tmp/acc2/smol"))
CACHE.mkdir(parents=True, exist_ok=True)
lm = _load(MODEL)
SEQ = int(__import__("os").environ.get("SEQ", "1024"))
AW = None if __import__("os").environ.get("NOAW") else "default"
stats_path = CACHE / (f"stats{CAL}a.pt" if SEQ == 1024 else f"stats{CAL}_seq{SEQ}{'' if AW else 'n'}.pt")
if stats_path.exists():
    stats = torch.load(stats_path, weights_only=False)
else:
    ids = token_ids(lm.tokenizer, builtin_text("pydoc-calib"), CAL, what="calib")
    t = time.time(); stats = collect_stats(lm.model, ids, seq_len=min(SEQ, CAL), attn_windows=AW); print(f"stats {time.time()-t:.0f}s", flush=True)
    torch.save(stats, stats_path)

_rots = {}
def rot(**kw):
    key = tuple(sorted(kw.items()))
    f = CACHE / ("rot_" + "_".join(f"{k}-{v}" for k, v in key) + ("" if SEQ == 1024 else f"_seq{SEQ}") + ("" if CAL == 8192 or MODEL != "default" else f"_cal{CAL}") + ".safetensors")
    if key not in _rots:
        from oscarkv.rotation import RotationSet
        if f.exists():
            _rots[key] = RotationSet.load(f)
        else:
            t = time.time(); rs = build_rotations(stats, model_id=lm.model_id, **kw); rs.save(f)
            print(f"built {f.name} {time.time()-t:.0f}s rel={[round(max(rs.meta['relative_error'][x]),3) for x in 'kv']}", flush=True)
            _rots[key] = rs
    return _rots[key]

# K-only / V-only analysis: patch what the banded evaluation reads back
ONLY = {"mode": None}
_orig = LayerPlan.fake_quant_kv
def patched(self, k, v, sink):
    kq, vq = _orig(self, k, v, sink)
    if ONLY["mode"] == "k":
        return kq, v
    if ONLY["mode"] == "v":
        return k, vq
    return kq, vq
LayerPlan.fake_quant_kv = patched

# de-biasing gain (diagnostic): the INT2 reconstruction of centered rows shrinks them (regression slope
# beta < 1); scale the dequantized centered rows by gamma = 1/beta per layer and KV head (K: C_Q-weighted
# logits, V: score-weighted), measured on the calibration sample
from oscarkv.rotation.centering import center as _center
GAIN = {"on": "", "g": None}
def compute_gains(rs, method):
    gk, gv = [], []
    for i in range(stats.dims.num_layers):
        plan = method.layer_plan(i, stats.dims.head_dim, rs)
        smp = stats.sample[i]
        k = smp.k.transpose(0, 1)[None]; v = smp.v.transpose(0, 1)[None]
        kq, vq = _orig(plan, k, v, 0)
        kc, kqc = _center(k, plan.k_mean), _center(kq, plan.k_mean)
        cq = stats.cq[i].float()
        gk.append(((kc @ cq) * kc).sum(-1).mean(-1)[0] / ((kc @ cq) * kqc).sum(-1).mean(-1)[0])
        w = (smp.w / stats.vcov[i].mean_weight().clamp_min(1e-300)).transpose(0, 1).float()  # [H, N]
        vc, vqc = _center(v, plan.v_mean)[0], _center(vq, plan.v_mean)[0]
        gv.append((w * (vc * vc).sum(-1)).mean(-1) / (w * (vc * vqc).sum(-1)).mean(-1))
    return torch.stack(gk), torch.stack(gv)
_prev_patched = LayerPlan.fake_quant_kv
def gain_patched(self, k, v, sink):
    kq, vq = _prev_patched(self, k, v, sink)
    if GAIN["on"] and self.k_mean is not None and self.k_cfg is not None:
        i = GAIN["layer_of"][id(self)]
        gk, gv = GAIN["g"]
        if "k" in GAIN["on"] and kq is not k:
            kq = self.k_mean[None, :, None] + gk[i][None, :, None, None] * (kq - self.k_mean[None, :, None])
        if "v" in GAIN["on"] and vq is not v:
            vq = self.v_mean[None, :, None] + gv[i][None, :, None, None] * (vq - self.v_mean[None, :, None])
    return kq, vq
LayerPlan.fake_quant_kv = gain_patched
_orig_layer_plan = M.KVMethod.layer_plan
def lp(self, layer, head_dim, rotations=None):
    p = _orig_layer_plan(self, layer, head_dim, rotations)
    GAIN.setdefault("layer_of", {})[id(p)] = layer
    return p
M.KVMethod.layer_plan = lp

# write-time least-squares refit of scale/zero (codes <-> (scale, zero) alternation), read path unchanged
from oscarkv.quant.format import group_scale_zero, storage_dtype
_fq = M.fake_quantize
REFIT = {"iters": 0, "kinds": "kv"}
def refit_fq(x, cfg):
    if not REFIT["iters"] or cfg.levels is not None:
        return _fq(x, cfg)
    d = x.shape[-1]; g = cfg.group(d); top = cfg.n_levels - 1
    xg, scale, zero = group_scale_zero(x, cfg)
    xu = x.float().reshape(xg.shape)
    s, z = scale.float()[..., None], zero.float()[..., None]
    for _ in range(REFIT["iters"]):
        c = torch.floor((xu - z) / s + 0.5).clamp(0, top)
        n = c.shape[-1]; sc = c.sum(-1, keepdim=True); scc = (c * c).sum(-1, keepdim=True)
        sx = xu.sum(-1, keepdim=True); sxc = (xu * c).sum(-1, keepdim=True)
        den = n * scc - sc * sc
        ok = den > 1e-9
        s_new = torch.where(ok, (n * sxc - sc * sx) / den.clamp_min(1e-9), s)
        ok = ok & (s_new > 1e-8)
        s = torch.where(ok, s_new, s)
        z = torch.where(ok, (sx - s * sc) / n, z)
    sdt = storage_dtype(cfg.scale_dtype)
    s = s.to(sdt).float(); z = z.to(sdt).float()
    c = torch.floor((xu - z) / s + 0.5).clamp(0, top)
    return (z + s * c).reshape(x.shape).to(x.dtype)
M.fake_quantize = refit_fq

C = dict(center=True)
VARIANTS = {
    # name: (method name, make_method kw, rotation-recipe kw, only)
    "plus": ("oscar-plus", {}, C, None),
    "plus-perhead": ("oscar-plus", {}, dict(center=True, per_head=True), None),
    "perhead-Konly": ("oscar-plus", {}, dict(center=True, per_head=True), "k"),
    "perhead-Vonly": ("oscar-plus", {}, dict(center=True, per_head=True), "v"),
    "ph-h-Konly": ("oscar-plus", {}, dict(center=True, per_head=True, composition="h"), "k"),
    "ph-ks-Konly": ("oscar-plus", {}, dict(center=True, per_head=True, key_scale=True), "k"),
    "ph-noclip-Konly": ("oscar-plus", {"clip": "off"}, dict(center=True, per_head=True), "k"),
    "ph-paperclip-Konly": ("oscar-plus", {"clip": "default"}, dict(center=True, per_head=True), "k"),
    "pl-Konly": ("oscar-plus", {}, C, "k"),
    "pl-Vonly": ("oscar-plus", {}, C, "v"),
    "aw-ph": ("oscar-plus", {}, dict(center=True, per_head=True, key_weighting="attention"), None),
    "aw-ph-Konly": ("oscar-plus", {}, dict(center=True, per_head=True, key_weighting="attention"), "k"),
    "aw-pl": ("oscar-plus", {}, dict(center=True, key_weighting="attention"), None),
    "aw-ph-ks": ("oscar-plus", {}, dict(center=True, per_head=True, key_weighting="attention", key_scale=True), None),
    "aw-ph-ks-Konly": ("oscar-plus", {}, dict(center=True, per_head=True, key_weighting="attention", key_scale=True), "k"),
    "ph-lm-Vonly": ("oscar", {"center": "on", "levels": "lloyd-max"}, dict(center=True, per_head=True, levels="lloyd-max"), "v"),
    "ph-lm-Konly": ("oscar", {"center": "on", "levels": "lloyd-max"}, dict(center=True, per_head=True, levels="lloyd-max"), "k"),
    "perhead-g64": ("oscar-plus", {"group_size": 64}, dict(center=True, per_head=True, group_size=64), None),
    "plus-g64": ("oscar-plus", {"group_size": 64}, dict(center=True, group_size=64), None),
    "kivi": ("kivi", {}, None, None),
    "int4-Konly": ("int4", {}, C, "k"),
    "int4-Vonly": ("int4", {}, C, "v"),
    "hadamard-Konly": ("hadamard", {}, C, "k"),
    "hadamard-Vonly": ("hadamard", {}, C, "v"),
    "kivi-Konly": ("kivi", {}, C, "k"),
    "kivi-Vonly": ("kivi", {}, C, "v"),
}
def extra(name):
    return VARIANTS[name]

out = Path(sys.argv[1])
ref = {}
ids = token_ids(lm.tokenizer, builtin_text(DATA), what=DATA)
for name in sys.argv[2].split(","):
    REFIT["iters"] = 0
    GAIN["on"] = ""
    KSHIFT = 0.0
    if "@kclip" in name:
        name, sh = name.split("@kclip"); KSHIFT = float(sh)
    if "@gain" in name:
        name, GAIN["on"] = name.split("@gain"); GAIN["on"] = GAIN["on"] or "kv"
    if "@refit" in name:
        name, it = name.split("@refit"); REFIT["iters"] = int(it or 4)
    mname, mkw, rkw, only = extra(name)
    m = make_method(mname, sink=SINK, recent=RECENT, page=PAGE, **mkw)
    rs = rot(**rkw) if rkw is not None else None
    if KSHIFT:
        rs = replace(rs, k_clip=(rs.k_clip + KSHIFT).clamp(max=1.0))
    ONLY["mode"] = only
    if GAIN["on"]:
        GAIN["g"] = compute_gains(rs, m)
        print("gains k", [round(x, 3) for x in GAIN["g"][0].flatten().tolist()][:12], "v", [round(x, 3) for x in GAIN["g"][1].flatten().tolist()][:12], flush=True)
    t = time.time()
    res = evaluate(lm.model, ids, [make_method("bf16"), m], rs, context=CTX, sequences=1, score_from=512, progress=False, reference=ref)
    row = res["results"][-1]; b = next(r for r in res["results"] if r["method"] == "bf16")
    rec = {"variant": name + (f"@refit{REFIT['iters']}" if REFIT["iters"] else "") + (f"@gain{GAIN['on']}" if GAIN["on"] else "") + (f"@kclip{KSHIFT:+.2f}" if KSHIFT else ""), "model": MODEL, "context": CTX, "tokens": res["tokens"], "data": DATA, "sink": SINK, "recent": RECENT,
           "page": PAGE, "calib_tokens": CAL, "seq_len": SEQ, "recipe": {k: v for k, v in rkw.items()} if rkw else None, "only": only,
           **row, "dppl": row["ppl"] / b["ppl"] - 1, "bf16_ppl": b["ppl"]}
    print(json.dumps(rec), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")
