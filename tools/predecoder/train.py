#!/usr/bin/env python3
"""Trains the surface-code predecoder; resumable from a checkpoint.

    python3 train.py --out ckpt.pt --minutes 8 [--resume ckpt.pt] [--seed 1]

One network for every distance and both bases (fully convolutional). Each
step draws a circuit family (distance from --distances, basis from --bases,
default X and Z, rounds = distance or --rounds R) and a batch of shots with
per-shot noise strengths from --ps,
sampled on the device (sampler.py). Loss: binary cross-entropy of the edge
logits against the edge labels, over the edge slots that exist. Mixed
precision (bf16 autocast) on a GPU. The run stops after --minutes (or
--steps) and saves the checkpoint; running again with --resume continues the
same schedule (the learning rate follows a cosine over --total-steps).

Every --log-every steps a line goes to the log (stdout and the checkpoint):
loss, edge precision/recall, and the residual event density over the input
density at p = 0.003 on a fixed evaluation batch. plot.py draws the curves.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layout as L  # noqa: E402
import net  # noqa: E402
from sampler import Source  # noqa: E402


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="checkpoint to write")
    ap.add_argument("--resume", help="checkpoint to continue from")
    ap.add_argument("--init-onnx", help="start from the network of an exported model (a fresh optimizer "
                    "and schedule: fine-tuning); its width and depth replace --width / --layers")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--distances", default="5,7,9,11")
    ap.add_argument("--ps", default="0.001,0.002,0.003,0.0045,0.006,0.008")
    ap.add_argument("--noise", default="depolarizing", choices=["depolarizing", "si1000"])
    ap.add_argument("--rounds", type=int, default=0,
                    help="rounds of every circuit family (default 0: rounds = distance)")
    ap.add_argument("--bases", default="xz", choices=["xz", "x", "z"],
                    help="memory-experiment bases to train on (default both)")
    ap.add_argument("--cells-per-batch", type=int, default=300_000,
                    help="grid cells per batch (batch = this / cells of the distance's grid)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--total-minutes", type=float, default=14.0,
                    help="length of the cosine learning-rate schedule, in training minutes over all runs")
    ap.add_argument("--minutes", type=float, default=0, help="stop after this much training time")
    ap.add_argument("--steps", type=int, default=0, help="stop after this many steps (this run)")
    ap.add_argument("--log-every", type=int, default=200)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return ap.parse_args(argv)


def lr_at(step, train_s, args):
    """Linear warm-up over 300 steps, then a cosine over the planned training
    time (time rather than steps, so that a plan holds on any device)."""
    warm = 300
    if step < warm:
        return args.lr * (step + 1) / warm
    t = min(1.0, train_s / (args.total_minutes * 60))
    return args.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * t)))


def self_check(src: Source, geo: net.Geometry, gen):
    """The labels must explain the events and the observables exactly."""
    ev, obs, lab, _ = src.sample(64, gen)
    logits = lab * 2 - 1  # logit > 0 exactly where the label is 1
    _, residual, frame = geo.apply_corrections(logits, ev)
    if residual.abs().sum() != 0 or not torch.equal(frame, obs):
        raise RuntimeError(f"label self-check failed for {src.specs[0]}")


@torch.no_grad()
def evaluate(model, src, geo, batch, dev):
    ev, obs, lab, _ = batch
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
        logits = model(geo.inputs(ev))
    pred, residual, frame = geo.apply_corrections(logits, ev)
    tp = (pred * lab).sum().item()
    return {"precision": tp / max(1.0, pred.sum().item()),
            "recall": tp / max(1.0, (lab * geo.valid).sum().item()),
            "density_ratio": residual.sum().item() / max(1.0, ev.sum().item()),
            "frame_err": (frame != obs).any(dim=1).float().mean().item()}


def main(argv=None):
    args = parse(argv)
    dev = torch.device(args.device)
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    ckpt = torch.load(args.resume, map_location="cpu", weights_only=False) if args.resume else None
    if ckpt and args.init_onnx:
        sys.exit("train: --resume and --init-onnx exclude each other")
    init = None
    if args.init_onnx:
        from export import load_model_from_onnx
        init, _ = load_model_from_onnx(args.init_onnx)
    if ckpt or init:
        for k in ("width", "layers"):
            setattr(args, k, ckpt["config"][k] if ckpt else getattr(init, k))
    model = net.Predecoder(args.width, args.layers)
    if init:
        model.load_state_dict(init.state_dict())
    model = model.to(dev).to(memory_format=torch.channels_last_3d)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    step, log, trained_s = 0, [], 0.0
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        step, log, trained_s = ckpt["step"], ckpt["log"], ckpt.get("trained_s", 0.0)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed * 1_000_003 + step)  # a resumed run draws fresh shots
    ds = [int(x) for x in args.distances.split(",")]
    ps = [float(x) for x in args.ps.split(",")]
    t0 = time.time()
    with cf.ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 1)) as pool:
        sources = [Source(b, d, args.rounds or d, ps, dev, args.noise, pool) for d in ds for b in args.bases]
    geos = [net.Geometry(s.layout, dev) for s in sources]
    for s, g in zip(sources, geos):
        self_check(s, g, gen)
    print(f"setup {time.time() - t0:.1f} s: {len(sources)} circuit families, "
          f"{net.count_params(model)} parameters", flush=True)
    # Fixed evaluation batch: the largest distance, Z basis (X if only X is trained), p = 0.003.
    ev_src = max((s for s in sources if "memory_z" in s.specs[0]["task"] or args.bases == "x"),
                 key=lambda s: s.layout.shape)
    ev_geo = geos[sources.index(ev_src)]
    eg = torch.Generator(device=dev)
    eg.manual_seed(777)
    p3 = min(range(len(ps)), key=lambda i: abs(ps[i] - 0.003))
    ev_batch = ev_src.sample(256, eg, torch.full((256,), p3, device=dev))

    start = last_save = time.time()
    this_run = 0
    while True:
        i = step % len(sources)
        src, geo = sources[i], geos[i]
        T, H, W = src.layout.shape
        bsz = max(8, args.cells_per_batch // (T * H * W))
        ev, obs, lab, _ = src.sample(bsz, gen)
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step, trained_s + time.time() - start, args)
        x = geo.inputs(ev).contiguous(memory_format=torch.channels_last_3d)
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
            logits = model(x)
        loss = (F.binary_cross_entropy_with_logits(logits.float(), lab, reduction="none")
                * geo.valid).sum() / (geo.valid.sum() * bsz)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        this_run += 1
        elapsed = time.time() - start
        done = (args.minutes and elapsed >= args.minutes * 60) or (args.steps and this_run >= args.steps)
        if step % args.log_every == 0 or done:
            m = evaluate(model, ev_src, ev_geo, ev_batch, dev)
            m.update(step=step, loss=loss.item(), lr=opt.param_groups[0]["lr"],
                     train_s=round(trained_s + elapsed, 1))
            log.append(m)
            print(json.dumps(m), flush=True)
        if done or time.time() - last_save > 120:
            save(args, model, opt, step, log, trained_s + time.time() - start, dev)
            last_save = time.time()
        if done:
            break


def save(args, model, opt, step, log, trained_s, dev):
    """Writes the checkpoint atomically (a run cut short keeps the last one)."""
    tmp = args.out + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "log": log,
                "trained_s": trained_s, "config": model.config(),
                "train_args": {k: v for k, v in vars(args).items() if k not in ("out", "resume")},
                "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}, tmp)
    os.replace(tmp, args.out)
    print(f"saved {args.out}: step {step}, {trained_s:.0f} s of training in all", flush=True)


if __name__ == "__main__":
    main()
