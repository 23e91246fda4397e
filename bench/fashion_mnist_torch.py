#!/usr/bin/python3
"""examples/fashion_mnist.cpp in PyTorch 1.13 eager, for the side-by-side timing (bench/fashion_mnist.py).

The same model, optimiser, schedule, loss, batch size, normalisation and random streams as the
tapegrad example, and the same data: Debian's dataset-fashion-mnist .gz files read with gzip and
NumPy. Data loading is inside the timed run, as it is in the C++ program. It prints the lines the
C++ program prints (one per epoch, then "final test accuracy ...") so that one parser reads both.

    /usr/bin/python3 bench/fashion_mnist_torch.py --threads 2
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def read_idx(path):
    """An IDX file (.gz or plain) as a NumPy array: magic (0, 0, type, dims), big-endian dims, data."""
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        data = f.read()
    if data[2] != 0x08:
        sys.exit(f"{path}: only unsigned 8-bit IDX files are read here")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def find_idx(directory, name):
    for candidate in (name + ".gz", name):
        if os.path.exists(os.path.join(directory, candidate)):
            return os.path.join(directory, candidate)
    sys.exit(f"no {name}(.gz) in {directory}: install the Debian package dataset-fashion-mnist, or pass --data")


def read_split(directory, prefix):
    images = torch.from_numpy(read_idx(find_idx(directory, prefix + "-images-idx3-ubyte")).copy()).float()
    labels = torch.from_numpy(read_idx(find_idx(directory, prefix + "-labels-idx1-ubyte")).astype(np.int64))
    return images, labels



def load_standardised(args):
    """The training (first --limit) and test images, scaled to [0, 1] and standardised with the
    training images' mean and std, once up front; returns them, their labels and (mean, std)."""
    train_images, train_labels = read_split(args.data, "train")
    test_images, test_labels = read_split(args.data, "t10k")
    if args.limit > 0:
        train_images, train_labels = train_images[:args.limit], train_labels[:args.limit]
    mean, std = train_images.mean().item() / 255, train_images.std().item() / 255
    train_images = (train_images - 255 * mean) / (255 * std)
    test_images = (test_images - 255 * mean) / (255 * std)
    return train_images, train_labels, test_images, test_labels, (mean, std)


def make_model(args):
    return nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 512), nn.LayerNorm(512), nn.GELU(),
                         nn.Dropout(args.dropout), nn.Linear(512, 10))


def make_optimizer(model, args, steps_per_epoch):
    """AdamW and its per-step schedule: --warmup-epochs of linear warm-up from lr/100, then cosine."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    warmup_steps = args.warmup_epochs * steps_per_epoch
    cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, (args.epochs - args.warmup_epochs) * steps_per_epoch)
    if warmup_steps == 0:
        return optimizer, cosine
    warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=warmup_steps)
    return optimizer, torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[warmup_steps])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    parser.add_argument("--matmul-precision", choices=["highest", "high", "medium"], default="highest",
                        help="torch.set_float32_matmul_precision (PyTorch 1.13 uses it on CUDA only)")
    args = parser.parse_args()
    if args.warmup_epochs >= args.epochs:
        sys.exit("--warmup-epochs must be less than --epochs")
    torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision(args.matmul_precision)
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")  # noqa: E731
    run_start = time.perf_counter()

    train_images, train_labels, test_images, test_labels, (mean, std) = load_standardised(args)
    load_seconds = time.perf_counter() - run_start

    torch.manual_seed(args.seed)
    shuffle_generator = torch.Generator().manual_seed(args.seed)
    test_generator = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(TensorDataset(train_images, train_labels), batch_size=args.batch, shuffle=True,
                              generator=shuffle_generator)
    test_loader = DataLoader(TensorDataset(test_images, test_labels), batch_size=1000, generator=test_generator)

    model = make_model(args)
    steps_per_epoch = len(train_loader)
    optimizer, schedule = make_optimizer(model, args, steps_per_epoch)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    print(f"fashion_mnist (PyTorch {torch.__version__}): {len(train_labels)} training / {len(test_labels)} test "
          f"images (mean {mean:.4f}, std {std:.4f}; read in {load_seconds:.2f} s), {args.epochs} epochs of "
          f"{steps_per_epoch} batches of {args.batch}, {torch.get_num_threads()} threads, autocast {args.autocast}", flush=True)

    seconds_sum = 0.0
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        loss_sum, correct, seen = 0.0, 0, 0
        for images, labels in train_loader:
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                logits = model(images)
                loss = criterion(logits, labels)
            loss.backward()
            optimizer.step()
            schedule.step()
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
        train_seconds = time.perf_counter() - start
        model.eval()
        test_loss_sum, test_correct = 0.0, 0
        with torch.no_grad(), autocast():
            for images, labels in test_loader:
                logits = model(images)
                test_loss_sum += criterion(logits, labels).item() * len(labels)
                test_correct += (logits.argmax(1) == labels).sum().item()
        seconds = time.perf_counter() - start
        seconds_sum += seconds
        test_accuracy = test_correct / len(test_labels)
        print(f"epoch {epoch:2d}/{args.epochs}  train loss {loss_sum / seen:.4f}  train acc {100 * correct / seen:.2f}%  "
              f"test loss {test_loss_sum / len(test_labels):.4f}  test acc {100 * test_accuracy:.2f}%  "
              f"lr {optimizer.param_groups[0]['lr']:.2e}  {seen / train_seconds:.0f} samples/s  {seconds:.2f} s",
              flush=True)
    print(f"final test accuracy {100 * test_accuracy:.2f}%; {seconds_sum / args.epochs:.2f} s per epoch (training and "
          f"evaluation) at {torch.get_num_threads()} threads, {time.perf_counter() - run_start:.2f} s in all")


if __name__ == "__main__":
    main()
