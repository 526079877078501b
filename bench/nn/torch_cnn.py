#!/usr/bin/env python3
"""Predecoder-shaped 3D CNNs in PyTorch, for bench/nn (GPU machine only).

For each shape (4 input channels on a (T, d, d) grid with T = d; 3 or 5
hidden Conv3d+ReLU layers of 32, 64 or 128 channels, kernel 3, padding 1;
a final Conv3d to 1 channel), this script:
  - exports the model to OUT/NAME.onnx (torch.onnx.export, opset 17),
  - writes a random input and PyTorch's FP32 output (OUT/NAME.in.bin,
    OUT/NAME.out.bin) so bench_nn_gpu --check can compare the engine,
  - times batch-1 inference in PyTorch with CUDA graph replay (cuDNN,
    benchmark mode; TF32 off for FP32), FP32 and FP16: p50/p99 in µs of
    g.replay() + torch.cuda.synchronize() on the host,
and writes OUT/torch_times.txt ("NAME PREC P50 P99" per line).

--predecoder NAME:S[:W] (repeatable) also times the convolution stack of the
shipped predecoder models (models/predecoder_d*: 3 -> W -> W -> W -> 9
channels, kernel 3, padding 1, ReLU between, on an S x S x S grid; W = 128,
the default, for the files without a suffix, 32 for the *_fast family) under
NAME; the models' integer/gather tail is left out, so PyTorch's figure is a
lower bound for the whole model. Nothing is exported for these.
--skip-grid: only the --predecoder stacks.
"""
import argparse
import copy
import os
import time

import torch


def build(layers, ch, cin=4, cout=1):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Conv3d(cin, ch, 3, padding=1), torch.nn.ReLU()]
        cin = ch
    mods.append(torch.nn.Conv3d(cin, cout, 3, padding=1))
    return torch.nn.Sequential(*mods).eval()


def export(net, x, path):
    """TorchScript exporter (opset 17) where this torch still has it, else
    the dynamo exporter (opset 18); weights embedded either way."""
    try:
        torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["y"], opset_version=17,
                          dynamo=False)
    except Exception as e:  # noqa: BLE001 - report and fall back
        print(f"# TorchScript export failed ({type(e).__name__}: {e}); using dynamo=True", flush=True)
        torch.onnx.export(net, (x,), path, input_names=["x"], output_names=["y"], opset_version=18,
                          dynamo=True, external_data=False)


def graph_replay_us(net, x, iters):
    """p50 and p99 (µs) of one CUDA-graph replay of net(x) + synchronize,
    timed on the host; net and x already on the GPU in their dtype/layout."""
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(20):
                net(x)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            net(x)
        torch.cuda.synchronize()
        for _ in range(200):
            g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            g.replay()
            torch.cuda.synchronize()
            ts.append((time.perf_counter() - t0) * 1e6)
    ts.sort()
    return ts[len(ts) // 2], ts[min(len(ts) - 1, int(len(ts) * 0.99))]


def time_replay(net, x, half, iters):
    dt = torch.float16 if half else torch.float32
    return graph_replay_us(copy.deepcopy(net).to("cuda", dt), x.to("cuda", dt), iters)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--distances", type=int, nargs="+", default=[7, 13])
    p.add_argument("--layers", type=int, nargs="+", default=[3, 5])
    p.add_argument("--channels", type=int, nargs="+", default=[32, 64, 128])
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--predecoder", action="append", default=[], metavar="NAME:S[:W]")
    p.add_argument("--skip-grid", action="store_true")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}")
    rows = []
    for spec in a.predecoder:
        parts = spec.split(":")
        if len(parts) not in (2, 3):
            p.error(f"--predecoder {spec}: expected NAME:S or NAME:S:W")
        name, size, width = parts[0], int(parts[1]), int(parts[2]) if len(parts) == 3 else 128
        net, x = build(3, width, cin=3, cout=9), torch.randn(1, 3, size, size, size)
        for half in (False, True):
            p50, p99 = time_replay(net, x, half, a.iters)
            rows.append(f"{name} {'fp16' if half else 'fp32'} {p50:.2f} {p99:.2f}")
            print(rows[-1], flush=True)
    for d in [] if a.skip_grid else a.distances:
        for layers in a.layers:
            for ch in a.channels:
                name = f"cnn3d_d{d}_l{layers}_c{ch}"
                net = build(layers, ch)
                x = torch.randn(1, 4, d, d, d)
                export(net, x, os.path.join(a.out, name + ".onnx"))
                with torch.no_grad():
                    y = net.to("cuda")(x.to("cuda")).cpu()
                net = net.cpu()
                x.numpy().astype("float32").tofile(os.path.join(a.out, name + ".in.bin"))
                y.numpy().astype("float32").tofile(os.path.join(a.out, name + ".out.bin"))
                for half in (False, True):
                    p50, p99 = time_replay(net, x, half, a.iters)
                    rows.append(f"{name} {'fp16' if half else 'fp32'} {p50:.2f} {p99:.2f}")
                    print(rows[-1], flush=True)
    with open(os.path.join(a.out, "torch_times.txt"), "w") as f:
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
