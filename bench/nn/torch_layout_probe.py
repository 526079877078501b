#!/usr/bin/env python3
"""Probe (GPU machine): does a channels-last (NDHWC) layout make batch-1 3D
convolutions faster in FP16? Times PyTorch CUDA-graph replay of the
predecoder-shaped CNNs in both layouts (cuDNN benchmark mode)."""
import torch

from torch_cnn import build, graph_replay_us


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
            p50, p99 = graph_replay_us(net, x, 2000)
            print(f"d={d:2d} layers={layers} ch={ch:3d} fp16 {fmt}: p50 {p50:7.1f} us  p99 {p99:7.1f} us", flush=True)


if __name__ == "__main__":
    main()
