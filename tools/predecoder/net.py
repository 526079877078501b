"""The predecoder network and the residual/frame arithmetic, in PyTorch.

The network is fully convolutional over the (round, row, column) grid, so one
set of weights serves every distance and both bases: input channels are the
detection events and two constant masks (an X-type / a Z-type detector is at
this cell); output channels are logits, one per edge type of
`layout.EDGE_TYPES`, anchored at each cell. An edge whose logit is above 0
(and that exists in the circuit's error model) is applied as a correction.

`apply_corrections` is the same arithmetic the exported ONNX graph does
(export.py): the residual is the events XOR the syndrome of the applied
edges; the frame is the XOR of their observable masks.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import layout as L


class Predecoder(nn.Module):
    """`layers` k=3 convolutions: 3 -> width -> ... -> width -> K, ReLU between."""

    def __init__(self, width: int = 128, layers: int = 4):
        super().__init__()
        if layers < 2:
            raise ValueError("need at least 2 layers")
        chans = [L.NUM_IN_CHANNELS] + [width] * (layers - 1) + [L.NUM_EDGE_TYPES]
        self.convs = nn.ModuleList(nn.Conv3d(a, b, 3, padding=1) for a, b in zip(chans, chans[1:]))
        self.width, self.layers = width, layers

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, c in enumerate(self.convs):
            x = c(x)
            if i + 1 < len(self.convs):
                x = F.relu(x)
        return x

    def config(self) -> dict:
        return {"width": self.width, "layers": self.layers}


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def flops_per_inference(model: Predecoder, shape: tuple[int, int, int]) -> int:
    """Multiply-adds x 2 of the convolutions over one grid ('same' padding)."""
    cells = shape[0] * shape[1] * shape[2]
    return sum(2 * cells * c.in_channels * c.out_channels * 27 for c in model.convs)


class Geometry:
    """Per-circuit constant tensors on a device."""

    def __init__(self, lay: L.Layout, device):
        T, H, W = lay.shape
        self.shape = lay.shape
        self.sites = torch.tensor(np.stack([lay.site_x, lay.site_z]), device=device)[None]
        self.valid = torch.tensor(lay.slot_valid, device=device)[None]            # [1,K,T,H,W]
        obs = lay.slot_obs.reshape(L.NUM_EDGE_TYPES * T * H * W, lay.num_observables)
        self.obs = torch.tensor(obs, device=device)                              # [K*THW, Lobs]
        w, reach = L.syndrome_kernel()
        self.syn_w = torch.tensor(w, device=device)
        self.reach = reach
        self.det_cell = torch.tensor(lay.det_cell, device=device)

    def inputs(self, det_grid: torch.Tensor) -> torch.Tensor:
        """[B, T, H, W] events -> [B, 3, T, H, W] network input."""
        b = det_grid.shape[0]
        return torch.cat([det_grid[:, None], self.sites.expand(b, -1, -1, -1, -1)], dim=1)

    def grid_from_dets(self, dets: torch.Tensor) -> torch.Tensor:
        """[B, N] events in detector order -> [B, T, H, W]."""
        T, H, W = self.shape
        g = torch.zeros(dets.shape[0], T * H * W, dtype=dets.dtype, device=dets.device)
        g[:, self.det_cell] = dets
        return g.view(-1, T, H, W)

    def apply_corrections(self, logits: torch.Tensor, det_grid: torch.Tensor, threshold: float = 0.0):
        """Applies the edges whose logit is above `threshold` and returns (applied edges [B,K,T,H,W],
        residual events [B,T,H,W], frame [B,Lobs]), all 0/1 float32."""
        pred = (logits.float() > threshold).float() * self.valid
        counts = F.conv3d(pred, self.syn_w, padding=self.reach)[:, 0]
        residual = torch.remainder(det_grid.float() + counts, 2.0)
        frame = torch.remainder(pred.flatten(1) @ self.obs, 2.0)
        return pred, residual, frame
