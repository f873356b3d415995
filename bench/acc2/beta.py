import torch, sys
torch.set_num_threads(1)
from oscarkv.rotation import RotationSet, rotate, unrotate
from oscarkv.rotation.centering import center
from oscarkv.methods import make_method
stats = torch.load(sys.argv[1], weights_only=False)
rs = RotationSet.load(sys.argv[2])
m = make_method("oscar-plus")
for i in range(stats.dims.num_layers):
    plan = m.layer_plan(i, stats.dims.head_dim, rs)
    s = stats.sample[i]
    k = s.k.transpose(0, 1)[None]  # [1,H,N,d]
    v = s.v.transpose(0, 1)[None]
    kq, vq = plan.fake_quant_kv(k, v, 0)
    kc, kqc = center(k, plan.k_mean), center(kq, plan.k_mean)
    cq = stats.cq[i].float()
    num = ((kc @ cq) * kqc).sum(-1).mean(-1); den = ((kc @ cq) * kc).sum(-1).mean(-1); d2 = ((kqc @ cq) * kqc).sum(-1).mean(-1)
    vc, vqc = center(v, plan.v_mean), center(vq, plan.v_mean)
    bv = (vc * vqc).sum(-1).mean(-1) / (vc * vc).sum(-1).mean(-1)
    print(i, "K beta", [round(x, 3) for x in (num / den)[0].tolist()], "spread ratio", [round(x, 3) for x in (d2 / den)[0].tolist()], "V beta", [round(x, 3) for x in bv[0].tolist()])
