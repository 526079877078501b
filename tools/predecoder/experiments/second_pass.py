"""Experiment (2026-11-29, issue 16): weighted matching with a network's edge logits, then a
correlated second pass, on the same shots, against the weighted first pass alone.

The second pass takes the first pass's edges (found through an identity faults matrix) and, for every
edge paired with one of them by a decomposed hyperedge of the circuit's DEM (a Y error), lowers that
partner's weight: A to min(w, the conditional weight -log odds p(f | e)) (PyMatching's correlated rule
on the prior), B by the full prior-to-conditional shift (w - (w_prior - w_cond)), C by half that shift.
Result on d = 7 Z, p = 0.006 (bench/results/d7-training-plateau-h200-2026-11-29.md): no gain.

    .venv-train/bin/python tools/predecoder/experiments/second_pass.py MODEL.onnx z 7 0.006 20000 8500002
"""
import sys, os, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np, scipy.sparse as sp
import concurrent.futures as cf
import layout as L, evaluate as E

def structure(spec):
    lay = L.build_layout(L.make_circuit(spec))
    slots, ends, _ = L.edge_list(lay)
    idx = {int(s): i for i, s in enumerate(slots)}
    nE = len(ends)
    marg = np.zeros(nE)
    joint = {}
    for p, sl in zip(lay.probs, lay.err_slots):
        es = sorted({idx[s] for s in sl})
        for e in es:
            marg[e] = marg[e] * (1 - p) + p * (1 - marg[e])
        if len(es) > 1:
            for a in es:
                for b in es:
                    if a != b:
                        q = joint.get((a, b), 0.0)
                        joint[(a, b)] = q * (1 - p) + p * (1 - q)
    partners = [[] for _ in range(nE)]
    for (a, b), q in joint.items():
        pc = min(0.5, q / max(marg[a], 1e-15))
        partners[a].append((b, pc))
    H, F = E._weighted_graph(spec)  # evaluate.py's matching graph of the network's edges
    I = sp.identity(nE, dtype=np.uint8, format="csc")
    wprior = np.log((1 - marg) / np.maximum(marg, 1e-15))
    return lay, slots, H, F, I, partners, wprior

S = {}
def job(args):
    import pymatching
    spec, dets, logits = args
    key = L.spec_str(spec)
    if key not in S:
        S[key] = structure(spec)
    lay, slots, H, F, I, partners, wprior = S[key]
    out = {k: [] for k in ("w", "A", "B", "C")}
    for i in range(len(dets)):
        w = -np.clip(logits[i].astype(np.float64), -30, 30)
        m = pymatching.Matching.from_check_matrix(H, weights=w, faults_matrix=I, use_virtual_boundary_node=True)
        chosen = m.decode(dets[i]).astype(bool)
        out["w"].append((F @ chosen.astype(np.uint8)) % 2)
        for var in ("A", "B", "C"):
            w2 = w.copy()
            for e in np.nonzero(chosen)[0]:
                for f, pc in partners[e]:
                    wc = np.log((1 - pc) / pc)
                    if var == "A":
                        w2[f] = min(w2[f], wc)
                    elif var == "B":
                        w2[f] = min(w2[f], w[f] - (wprior[f] - wc))
                    else:  # C: half shift
                        w2[f] = min(w2[f], w[f] - 0.5 * (wprior[f] - wc))
            m2 = pymatching.Matching.from_check_matrix(H, weights=w2, faults_matrix=F, use_virtual_boundary_node=True)
            out[var].append(m2.decode(dets[i]))
    return {k: np.array(v, np.uint8) for k, v in out.items()}

def main():
    import torch
    from export import load_model_from_onnx
    import net
    onnx, basis, d, p, shots, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    torch.set_num_threads(2)
    model, _ = load_model_from_onnx(onnx)
    model = model.eval()
    spec = L.circuit_spec(basis, d, d, p)
    lay, slots, *_ = structure(spec)
    geo = net.Geometry(lay, "cpu")
    dp, op = E._sample((spec, seed, shots))
    n, nobs = lay.num_detectors, lay.num_observables
    dets = E.unpack(dp, n); obs = E.unpack(op, nobs)
    t = time.time()
    lg = []
    for g, out in E._infer(model, geo, dets, 256, "cpu", True):
        lg.append(out.float().flatten(1)[:, torch.tensor(slots)].numpy())
    lg = np.concatenate(lg)
    print(f"inference {time.time()-t:.0f} s", flush=True)
    sub = 250
    res = {k: [] for k in ("w", "A", "B", "C")}
    with cf.ProcessPoolExecutor(2) as pool:
        for r in pool.map(job, [(spec, dets[i:i+sub], lg[i:i+sub]) for i in range(0, shots, sub)]):
            for k in res: res[k].append(r[k])
        fails = {k: int((np.concatenate(v) != obs).any(axis=1).sum()) for k, v in res.items()}
        fails["mwpm"] = E._failures(spec, pool, [dp], obs, nobs, False)
        fails["corr"] = E._failures(spec, pool, [dp], obs, nobs, True)
    wbad = (np.concatenate(res["w"]) != obs).any(axis=1)
    for k in ("A", "B", "C"):
        kb = (np.concatenate(res[k]) != obs).any(axis=1)
        fails[k + "_disc"] = (int((wbad & ~kb).sum()), int((~wbad & kb).sum()))
    print(json.dumps({"onnx": onnx, "basis": basis, "d": d, "p": p, "shots": shots, "seed": seed, **fails}), flush=True)

if __name__ == "__main__":
    main()
