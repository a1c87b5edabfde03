"""Co-running bulk copy job for the `pcie-copies` trace: 256 MiB pinned host buffers copied host-to-device
and device-to-host on two CUDA streams, back to back, in both directions at once (as a model-weight
streamer plus a checkpoint writer would). Runs until killed (SIGTERM/SIGINT)."""
import signal, sys, time
import torch

signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
n = 256 << 20
h_src = torch.empty(n, dtype=torch.uint8).pin_memory().random_()
h_dst = torch.empty(n, dtype=torch.uint8).pin_memory()
d_dst = torch.empty(n, dtype=torch.uint8, device="cuda")
d_src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
k, t0 = 0, time.time()
try:
    while True:
        with torch.cuda.stream(s1):
            d_dst.copy_(h_src, non_blocking=True)
        with torch.cuda.stream(s2):
            h_dst.copy_(d_src, non_blocking=True)
        s1.synchronize(); s2.synchronize()
        k += 1
        if k % 200 == 0:
            dt = time.time() - t0
            print(f"pcie-copies: {k} round trips, {2 * k * n / dt / 1e9:.1f} GB/s both directions", flush=True)
except (KeyboardInterrupt, SystemExit):
    pass
