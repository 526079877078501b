#!/usr/bin/env python3
"""Draws a checkpoint's training log: loss, edge precision/recall and the
residual density ratio against training time.

    python3 plot.py ckpt.pt out.png [--log out.jsonl]
"""
import argparse
import json

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("png")
    ap.add_argument("--log", help="also write the log as JSON lines")
    a = ap.parse_args()
    ck = torch.load(a.ckpt, map_location="cpu", weights_only=False)
    log = ck["log"]
    if a.log:
        with open(a.log, "w") as f:
            for m in log:
                f.write(json.dumps(m) + "\n")
    t = [m["train_s"] / 60 for m in log]
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ax[0].semilogy(t, [m["loss"] for m in log])
    ax[0].set_title("training loss (BCE per edge slot)")
    ax[1].plot(t, [m["precision"] for m in log], label="precision")
    ax[1].plot(t, [m["recall"] for m in log], label="recall")
    ax[1].set_title("applied edges vs true edges (eval batch)")
    ax[1].legend()
    ax[2].plot(t, [m["density_ratio"] for m in log])
    ax[2].set_title("residual / input detection events (eval batch)")
    for x in ax:
        x.set_xlabel("training minutes")
        x.grid(alpha=0.3)
    cfg = ck["config"]
    fig.suptitle(f"predecoder {cfg['layers']} layers x {cfg['width']} channels, "
                 f"{ck['step']} steps on {ck.get('device', '?')}")
    fig.tight_layout()
    fig.savefig(a.png, dpi=90)


if __name__ == "__main__":
    main()
