"""Experiment (2026-11-29, issue 16): three checkpoints of one network (train.py), their weight
averages ("soups") and their logit averages (ensembles), each with weighted matching on the same
d = 7 shots. Result (bench/results/d7-training-plateau-h200-2026-11-29.md): every variant within the
noise of the others.

    .venv-train/bin/python tools/predecoder/experiments/soup.py z 0.006 30000 8500003 A.pt B.pt C.pt
"""
import os, sys, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np, torch
import concurrent.futures as cf
import layout as L, evaluate as E, net
from export import load_model

basis, p, shots, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
CK = dict(zip(("M0", "M1", "M2"), sys.argv[5:8]))
torch.set_num_threads(2)
models = {k: load_model(v)[0] for k, v in CK.items()}
def soup(keys):
    m = net.Predecoder(models["M0"].width, models["M0"].layers)
    sd = {n: sum(models[k].state_dict()[n] for k in keys) / len(keys) for n in models["M0"].state_dict()}
    m.load_state_dict(sd); return m.eval()
models["S012"] = soup(["M0", "M1", "M2"])
models["S12"] = soup(["M1", "M2"])
spec = L.circuit_spec(basis, 7, 7, p)  # d = 7: the networks compared
lay = L.build_layout(L.make_circuit(spec))
slots = torch.tensor(L.edge_list(lay)[0])
geo = net.Geometry(lay, "cpu")
dp, op = E._sample((spec, seed, shots))
n, nobs = lay.num_detectors, lay.num_observables
dets = E.unpack(dp, n); obs = E.unpack(op, nobs)
logits = {}
for k, m in models.items():
    t = time.time()
    logits[k] = np.concatenate([o.float().flatten(1)[:, slots].numpy() for _, o in E._infer(m, geo, dets, 256, "cpu", True)])
    print(k, f"{time.time()-t:.0f} s", flush=True)
logits["E012"] = (logits["M0"] + logits["M1"] + logits["M2"]) / 3
logits["E12"] = (logits["M1"] + logits["M2"]) / 2
sub = 500
res = {}
with cf.ProcessPoolExecutor(2) as pool:
    for k, lg in logits.items():
        jobs = [(spec, dp[i:i + sub], lg[i:i + sub]) for i in range(0, shots, sub)]
        pred = np.concatenate(list(pool.map(E._match_weighted, jobs)))
        res[k] = (pred != obs).any(axis=1)
    mw = E._failures(spec, pool, [dp], obs, nobs, False)
out = {"basis": basis, "p": p, "shots": shots, "seed": seed, "mwpm": mw}
for k, b in res.items():
    out[k] = int(b.sum())
    out[k + "_vs_M0"] = (int((res["M0"] & ~b).sum()), int((~res["M0"] & b).sum()))
print(json.dumps(out), flush=True)
