#!/usr/bin/env python3
"""Probe (GPU machine): does a channels-last (NDHWC) layout make batch-1 3D
convolutions faster in FP16? Times PyTorch CUDA-graph replay of the
predecoder-shaped CNNs in both layouts (cuDNN benchmark mode)."""
import time

import torch

from torch_cnn import build


def replay_time(net, x, iters=2000):
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
    return ts[len(ts) // 2], ts[int(len(ts) * 0.99)]


def main():
    torch.backends.cudnn.benchmark = True
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    for d, layers, ch in [(13, 3, 128), (13, 3, 32), (7, 3, 32), (13, 5, 64)]:
        for fmt in ("ncdhw", "ndhwc"):
            net = build(layers, ch).cuda().half()
            x = torch.randn(1, 4, d, d, d, device="cuda", dtype=torch.float16)
            if fmt == "ndhwc":
                net = net.to(memory_format=torch.channels_last_3d)
                x = x.to(memory_format=torch.channels_last_3d)
            p50, p99 = replay_time(net, x)
            print(f"d={d:2d} layers={layers} ch={ch:3d} fp16 {fmt}: p50 {p50:7.1f} us  p99 {p99:7.1f} us", flush=True)


if __name__ == "__main__":
    main()
