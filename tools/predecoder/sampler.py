"""Training data on the device: detection events, observables and edge labels.

A stim detector error model is a list of independent error mechanisms, each
firing with its probability: this is exactly what `stim.DetectorErrorModel.
compile_sampler` samples. We sample the same mechanisms on the GPU (or CPU)
so that training never waits for the host, and we know which mechanisms
fired, which gives the labels: every fired mechanism contributes its
graphlike components (the `^`-separated parts of the decomposed model) to
edge slots, and a slot's label is the parity of its contributions.

One matrix per circuit family (distance, rounds, basis) maps fired mechanisms
to [event cells | observables | edge slots] in one product; the mechanism
list is the same for every noise strength of uniform circuit noise (checked),
so noise strengths differ only in the probability vector.
"""
from __future__ import annotations

import concurrent.futures as cf

import numpy as np
import torch

import layout as L


def _probs_for(args):
    spec, n_err, ref_dets = args
    lay = L.build_layout(L.make_circuit(spec))
    if len(lay.probs) != n_err or lay.err_dets != ref_dets:
        raise ValueError(f"error mechanisms differ between noise strengths for {spec}")
    return lay.probs


class Source:
    """Samples shots of one circuit family at a mix of noise strengths."""

    def __init__(self, basis: str, distance: int, rounds: int, ps: list[float], device,
                 noise: str = "depolarizing", pool: cf.Executor | None = None):
        self.specs = [L.circuit_spec(basis, distance, rounds, p, noise) for p in ps]
        self.ps = list(ps)
        self.layout = L.build_layout(L.make_circuit(self.specs[0]))
        lay = self.layout
        T, H, W = lay.shape
        thw, nobs, K = T * H * W, lay.num_observables, L.NUM_EDGE_TYPES
        self.cols = (thw, nobs, K * thw)
        E = len(lay.probs)
        g = np.zeros((E, thw + nobs + K * thw), np.float32)
        for e in range(E):
            for d in lay.err_dets[e]:
                g[e, lay.det_cell[d]] = 1.0
            for o in range(nobs):
                g[e, thw + o] = (lay.err_obs[e] >> o) & 1
            for s in lay.err_slots[e]:
                g[e, thw + nobs + s] += 1.0
        dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
        self.g = torch.tensor(g, device=device, dtype=dtype)
        jobs = [(s, E, lay.err_dets) for s in self.specs[1:]]
        rest = list(pool.map(_probs_for, jobs)) if pool else [_probs_for(j) for j in jobs]
        self.probs = torch.tensor(np.stack([lay.probs] + rest), device=device, dtype=torch.float32)
        self.device = device

    def sample(self, batch: int, gen: torch.Generator, p_index: torch.Tensor | None = None):
        """Returns (events [B,T,H,W], observables [B,L], labels [B,K,T,H,W], p index [B])."""
        if p_index is None:
            p_index = torch.randint(len(self.ps), (batch,), device=self.device, generator=gen)
        pr = self.probs[p_index]
        fired = (torch.rand(pr.shape, device=self.device, generator=gen) < pr).to(self.g.dtype)
        out = torch.remainder((fired @ self.g).float(), 2.0)
        thw, nobs, _ = self.cols
        T, H, W = self.layout.shape
        events = out[:, :thw].view(batch, T, H, W)
        obs = out[:, thw:thw + nobs]
        labels = out[:, thw + nobs:].view(batch, -1, T, H, W)
        return events, obs, labels, p_index
