"""Co-running GPU job for the `gpu-train` trace: a ResNet-18 training loop (torchvision, random data,
batch 128 x 3 x 224 x 224, SGD, bf16 autocast) whose batches are made on the host in pinned memory and
copied to the GPU each step, as a data loader would. Runs until killed (SIGTERM/SIGINT)."""
import signal, sys, time
import torch, torchvision

signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
torch.manual_seed(0)
dev = torch.device("cuda")
model = torchvision.models.resnet18(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
host = [torch.randn(128, 3, 224, 224).pin_memory() for _ in range(4)]
labels = torch.randint(0, 1000, (128,), device=dev)
step, t0 = 0, time.time()
try:
    while True:
        x = host[step % 4].to(dev, non_blocking=True).to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if step % 200 == 0:
            torch.cuda.synchronize()
            print(f"gpu-train: step {step}, {step / (time.time() - t0):.1f} steps/s, loss {loss.item():.3f}", flush=True)
except (KeyboardInterrupt, SystemExit):
    pass
