"""Circuits, detector grids and edge vocabularies for the surface-code predecoder.

One home for the geometry that training, export and evaluation share:

- `make_circuit(spec)`: a stim circuit from a manifest-style circuit spec
  (`stim.Circuit.generated` task + distance + rounds + noise), with an SI1000
  option that rewrites a noiseless generated circuit.
- `Layout(circuit)`: maps detectors to cells of a (round, row, column) grid
  from their stim coordinates, and maps every graphlike error component of the
  decomposed detector error model to an *edge slot* (anchor cell, edge type).
  An edge type is the grid offset from the anchor (the endpoint that comes
  first in (t, x, y) order) to the other endpoint, or the boundary.

The edge-type vocabulary `EDGE_TYPES` is fixed so that one network serves
every distance and both bases; a circuit whose detector error model needs a
type outside it is refused with a message naming the offset.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import stim

# (dt, dx, dy) in grid units from the anchor; None = an edge to the boundary.
EDGE_TYPES: list[tuple[int, int, int] | None] = [
    None,
    (0, 1, -1), (0, 1, 1),
    (1, 0, 0),
    (1, -1, -1), (1, -1, 1), (1, 1, -1),
    (1, -2, 0), (1, 0, -2),
]
NUM_EDGE_TYPES = len(EDGE_TYPES)
# Input channels of the network: events, "an X-type detector is here",
# "a Z-type detector is here" (type = the checkerboard colour of the cell).
NUM_IN_CHANNELS = 3

NOISE_KEYS = ("after_clifford_depolarization", "before_round_data_depolarization",
              "before_measure_flip_probability", "after_reset_flip_probability")


def uniform_noise(p: float) -> dict:
    """stim's circuit-level depolarizing noise at strength p on every location."""
    return {k: p for k in NOISE_KEYS}


def noise_spec(noise: str, p: float) -> dict:
    """A spec's "noise": uniform circuit-level depolarizing, or SI1000, at strength p."""
    if noise == "depolarizing":
        return uniform_noise(p)
    if noise == "si1000":
        return {"model": "si1000", "p": p}
    raise ValueError(f"unknown noise model {noise!r} (depolarizing, si1000)")


def circuit_spec(basis: str, distance: int, rounds: int, p: float, noise: str = "depolarizing") -> dict:
    basis = basis.lower()
    if basis not in ("x", "z"):
        raise ValueError(f"basis must be x or z, got {basis!r}")
    return {"task": f"surface_code:rotated_memory_{basis}", "distance": int(distance),
            "rounds": int(rounds), "noise": noise_spec(noise, p)}


def _si1000(clean: stim.Circuit, p: float) -> stim.Circuit:
    """Superconducting-inspired SI1000 noise (Gidney, Newman, McEwen 2021) on a
    noiseless circuit: 2-qubit gates DEPOLARIZE2(p), 1-qubit gates
    DEPOLARIZE1(p/10), resets followed by X_ERROR(2p), measurements preceded by
    X_ERROR(5p), idle qubits DEPOLARIZE1(p/10) per gate layer and
    DEPOLARIZE1(2p) during a measurement or reset layer. stim's generated
    circuits use CX rather than CZ; the noise strengths follow the model."""
    qubits = range(clean.num_qubits)
    out = stim.Circuit()
    one_q = {"H", "S", "S_DAG", "SQRT_X", "SQRT_X_DAG", "X", "Y", "Z", "C_XYZ"}
    two_q = {"CX", "CNOT", "CZ", "CY", "XCX", "XCZ", "YCX", "SWAP", "ISWAP"}
    for inst in clean:
        if isinstance(inst, stim.CircuitRepeatBlock):
            out.append(stim.CircuitRepeatBlock(inst.repeat_count, _si1000(inst.body_copy(), p)))
            continue
        name = inst.name
        targets = [t.value for t in inst.targets_copy() if t.is_qubit_target]
        idle = [q for q in qubits if q not in set(targets)]
        if name in ("M", "MZ", "MR", "MX", "MY"):
            out.append("X_ERROR" if name != "MX" else "Z_ERROR", targets, 5 * p)
            out.append(inst)
            if idle:
                out.append("DEPOLARIZE1", idle, 2 * p)
            if name == "MR":
                out.append("X_ERROR", targets, 2 * p)
        elif name in ("R", "RZ", "RX", "RY"):
            out.append(inst)
            out.append("X_ERROR" if name != "RX" else "Z_ERROR", targets, 2 * p)
            if idle:
                out.append("DEPOLARIZE1", idle, 2 * p)
        elif name in one_q:
            out.append(inst)
            out.append("DEPOLARIZE1", targets, p / 10)
            if idle:
                out.append("DEPOLARIZE1", idle, p / 10)
        elif name in two_q:
            out.append(inst)
            out.append("DEPOLARIZE2", targets, p)
            if idle:
                out.append("DEPOLARIZE1", idle, p / 10)
        else:
            out.append(inst)
    return out


def make_circuit(spec: dict) -> stim.Circuit:
    """A stim circuit from a circuit spec (see circuit_spec / the manifest)."""
    noise = spec.get("noise", {})
    if noise.get("model") == "si1000":
        clean = stim.Circuit.generated(spec["task"], distance=spec["distance"], rounds=spec["rounds"])
        return _si1000(clean, float(noise["p"]))
    unknown = set(noise) - set(NOISE_KEYS)
    if unknown:
        raise ValueError(f"unknown noise arguments {sorted(unknown)}")
    return stim.Circuit.generated(spec["task"], distance=spec["distance"], rounds=spec["rounds"],
                                  **noise)


def spec_str(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True)


# Model metadata entry naming the detector layout a model was made for: the
# circuit's detector coordinates, one list per detector in input order
# (compact JSON, integral values written as integers). The C side compares it
# with a DEM's coordinates up to one translation (cudaq_predecoder_check_layout,
# src/predecoder/layout.c), so a model is refused on a circuit of the other
# basis or another layout with the same detector count.
COORDS_KEY = "detector_coordinates"


def layout_mismatch(recorded: str, dem_coords: dict, num_detectors: int):
    """The C rule (cudaq_predecoder_check_layout) written again for the
    Python reference (reference_eval.py), which must not lean on the C
    library it checks: None where the DEM's detector coordinates equal the
    recorded ones up to detector 0's translation (1e-6 relative), else a
    sentence saying what differs. A DEM without coordinates, or with some
    only, cannot be checked: that is a mismatch too."""
    try:
        rows = json.loads(recorded)
        rows = [[float(v) for v in r] for r in rows]
    except (ValueError, TypeError):
        return f"model metadata '{COORDS_KEY}' is not a list of coordinate lists"
    have = [list(dem_coords.get(i, [])) for i in range(num_detectors)]
    with_coords = sum(1 for c in have if c)
    if with_coords == 0:
        return ("the DEM has no detector coordinates, so the model's detector layout cannot be checked "
                "(--skip_layout_check)")
    if with_coords < num_detectors:
        return (f"the DEM gives coordinates to {with_coords} of its {num_detectors} detectors: the "
                "model's detector layout cannot be checked (--skip_layout_check)")
    off = [0.0] * 16
    for d, (c, v) in enumerate(zip(have, rows)):
        same = len(c) == len(v)
        for k in range(len(v) if same else 0):
            if d == 0:
                off[k] = c[k] - v[k]
            want = v[k] + off[k]
            same = same and abs(c[k] - want) <= 1e-6 * (1.0 + abs(want))
        if not same:
            return (f"the DEM's detector layout is not the model's: detector {d} is at {tuple(c)} in the "
                    f"DEM, {tuple(v)} in the model")
    if len(rows) != num_detectors:
        return f"the model's layout has {len(rows)} detectors, the DEM {num_detectors}"
    return None


def coordinates_metadata(circuit: stim.Circuit) -> str:
    coords = circuit.get_detector_coordinates()
    rows = [[int(v) if float(v).is_integer() else float(v) for v in coords.get(i, [])]
            for i in range(circuit.num_detectors)]
    return json.dumps(rows, separators=(",", ":"))


def components(inst: stim.DemInstruction):
    """The `^`-separated parts of a DEM error's targets, as lists of targets."""
    comps = [[]]
    for t in inst.targets_copy():
        if t.is_separator():
            comps.append([])
        else:
            comps[-1].append(t)
    return comps


@dataclasses.dataclass
class Layout:
    """Grid geometry and edge slots of one circuit's decomposed DEM."""
    dem: stim.DetectorErrorModel
    num_detectors: int
    num_observables: int
    shape: tuple[int, int, int]          # (T, H, W) grid
    det_cell: np.ndarray                 # [N] flat cell index of each detector
    site_x: np.ndarray                   # [T, H, W] 1.0 where an X-type detector is
    site_z: np.ndarray                   # [T, H, W] 1.0 where a Z-type detector is
    probs: np.ndarray                    # [E] probability of each DEM error
    err_dets: list[list[int]]            # detectors each error flips (symptom)
    err_obs: np.ndarray                  # [E] observable mask of each error
    err_slots: list[list[int]]           # edge slots (k * THW + cell) of each error's components
    slot_valid: np.ndarray               # [K, T, H, W] 1.0 where an edge slot exists
    slot_obs: np.ndarray                 # [K, T, H, W, L] observables each slot's edge flips

    @property
    def num_cells(self) -> int:
        t, h, w = self.shape
        return t * h * w

    def cell_source(self) -> np.ndarray:
        """[THW] detector index feeding each cell, or N where no detector is."""
        src = np.full(self.num_cells, self.num_detectors, dtype=np.int64)
        src[self.det_cell] = np.arange(self.num_detectors)
        return src


def build_layout(circuit: stim.Circuit) -> Layout:
    dem = circuit.detector_error_model(decompose_errors=True)
    n = dem.num_detectors
    nobs = dem.num_observables
    coords = dem.get_detector_coordinates()
    if len(coords) != n or any(len(coords.get(i, [])) < 3 for i in range(n)):
        raise ValueError("every detector needs (x, y, t) coordinates to be placed on the grid")
    xyz = np.array([coords[i][:3] for i in range(n)], dtype=np.float64)
    x0, y0, t0 = xyz[:, 0].min(), xyz[:, 1].min(), xyz[:, 2].min()
    gx, gy, gt = (xyz[:, 0] - x0) / 2, (xyz[:, 1] - y0) / 2, xyz[:, 2] - t0
    for name, g in (("x/2", gx), ("y/2", gy), ("t", gt)):
        if not np.allclose(g, np.round(g)):
            raise ValueError(f"detector coordinate {name} is not on an integer grid")
    gx, gy, gt = (np.round(g).astype(np.int64) for g in (gx, gy, gt))
    T, H, W = int(gt.max()) + 1, int(gx.max()) + 1, int(gy.max()) + 1
    cell = (gt * H + gx) * W + gy
    if len(np.unique(cell)) != n:
        raise ValueError("two detectors fall on one grid cell")
    THW = T * H * W
    # The checkerboard colour of a cell tells the stabilizer type.
    colour = (gx + gy) % 2
    site = [np.zeros(THW, np.float32), np.zeros(THW, np.float32)]
    for c in (0, 1):
        site[c][cell[colour == c]] = 1.0
    # Which colour is X-type: a detector in the first round belongs to the memory basis.
    basis_is_x = _measures_x(circuit)
    first = colour[gt == gt.min()]
    basis_colour = int(np.bincount(first, minlength=2).argmax())
    xc = basis_colour if basis_is_x else 1 - basis_colour
    site_x, site_z = site[xc].reshape(T, H, W), site[1 - xc].reshape(T, H, W)

    type_index = {t: i for i, t in enumerate(EDGE_TYPES)}
    order = np.lexsort((gy, gx, gt))  # rank of each detector in (t, x, y) order
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    probs, err_dets, err_obs, err_slots = [], [], [], []
    slot_valid = np.zeros((len(EDGE_TYPES), THW), np.float32)
    slot_obs = np.zeros((len(EDGE_TYPES), THW, max(nobs, 1)), np.float32)
    for inst in dem.flattened():
        if inst.type != "error":
            continue
        slots, dets_all, obs_all = [], set(), 0
        for comp in components(inst):
            dets = [t.val for t in comp if t.is_relative_detector_id()]
            obs = 0
            for t in comp:
                if t.is_logical_observable_id():
                    obs ^= 1 << t.val
            if len(dets) == 1:
                k, anchor = type_index[None], dets[0]
            elif len(dets) == 2:
                a, b = sorted(dets, key=lambda i: rank[i])
                off = (int(gt[b] - gt[a]), int(gx[b] - gx[a]), int(gy[b] - gy[a]))
                if off not in type_index:
                    raise ValueError(f"edge offset {off} (dt, dx, dy) is outside the predecoder's "
                                     f"edge vocabulary {EDGE_TYPES}")
                k, anchor = type_index[off], a
            elif len(dets) == 0:
                if obs:
                    raise ValueError("an error flips an observable but no detector")
                continue
            else:
                raise ValueError(f"error component {inst} is not graphlike")
            s = int(cell[anchor])
            if slot_valid[k, s] and not np.array_equal(slot_obs[k, s], _mask(obs, nobs)):
                # Two edges with the same endpoints and different observables
                # would make a logical operator of weight 2.
                raise ValueError(f"edge slot (type {EDGE_TYPES[k]}, cell {s}) has two observable masks")
            slot_valid[k, s] = 1.0
            slot_obs[k, s] = _mask(obs, nobs)
            slots.append(k * THW + s)
            dets_all ^= set(dets)
            obs_all ^= obs
        probs.append(inst.args_copy()[0])
        err_dets.append(sorted(dets_all))
        err_obs.append(obs_all)
        err_slots.append(slots)
    return Layout(dem=dem, num_detectors=n, num_observables=nobs, shape=(T, H, W),
                  det_cell=cell.astype(np.int64), site_x=site_x, site_z=site_z,
                  probs=np.array(probs, np.float64), err_dets=err_dets,
                  err_obs=np.array(err_obs, np.int64), err_slots=err_slots,
                  slot_valid=slot_valid.reshape(len(EDGE_TYPES), T, H, W),
                  slot_obs=slot_obs.reshape(len(EDGE_TYPES), T, H, W, max(nobs, 1))[..., :nobs])


def _mask(obs: int, nobs: int) -> np.ndarray:
    return np.array([(obs >> i) & 1 for i in range(max(nobs, 1))], np.float32)


def _measures_x(circuit: stim.Circuit) -> bool:
    """A memory-X experiment prepares and measures its data qubits in the X
    basis (RX/MX); its first-round detectors are then X-type."""
    return any(inst.name in ("MX", "RX") for inst in circuit.flattened())


def syndrome_kernel() -> tuple[np.ndarray, tuple[int, int, int]]:
    """Fixed convolution [1, K, kt, kx, ky] that turns edge slots into the
    count of corrections touching each cell: the anchor gets the centre tap,
    the far endpoint (anchor + offset) the tap at -offset. Also returns the
    'same' padding."""
    reach = [max(abs(o[i]) for o in EDGE_TYPES if o is not None) for i in range(3)]
    ks = [2 * r + 1 for r in reach]
    w = np.zeros((1, len(EDGE_TYPES), *ks), np.float32)
    for k, off in enumerate(EDGE_TYPES):
        w[0, k, reach[0], reach[1], reach[2]] += 1.0
        if off is not None:
            w[0, k, reach[0] - off[0], reach[1] - off[1], reach[2] - off[2]] += 1.0
    return w, tuple(reach)


def edge_list(lay: Layout):
    """The circuit's matching edges as the network sees them: one per edge
    slot that exists (k-major: edge type, then cell), with (slots [E] flat
    indices k * THW + cell into the network's logits, endpoints [E, 2]
    detector indices with -1 for the boundary, obs [E, Lobs] observables each
    edge flips). The order of the exported models' `edge_logits` output and
    of their `edge_endpoints` metadata."""
    T, H, W = lay.shape
    thw, K = T * H * W, NUM_EDGE_TYPES
    cell_det = np.full(thw, -1, np.int64)
    cell_det[lay.det_cell] = np.arange(lay.num_detectors)
    ks, cells = np.nonzero(lay.slot_valid.reshape(K, thw))
    ends = np.empty((len(ks), 2), np.int64)
    for i, (k, cell) in enumerate(zip(ks.tolist(), cells.tolist())):
        off = EDGE_TYPES[k]
        far = -1
        if off is not None:
            t, x, y = cell // (H * W), (cell // W) % H, cell % W
            far = int(cell_det[((t + off[0]) * H + x + off[1]) * W + y + off[2]])
        ends[i] = (cell_det[cell], far)
    obs = lay.slot_obs.reshape(K, thw, -1)[ks, cells] if lay.num_observables else np.zeros((len(ks), 0))
    return (ks * thw + cells).astype(np.int64), ends, obs.astype(np.uint8)
