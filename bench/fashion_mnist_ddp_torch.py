#!/usr/bin/python3
"""examples/fashion_mnist --distributed in PyTorch 1.13: DistributedDataParallel on the gloo backend.

The model, optimiser, schedule, loss, normalisation and data of bench/fashion_mnist_torch.py, trained
data-parallel the way `mpirun -np N fashion_mnist --distributed` trains it: N processes on this
machine (torch.multiprocessing.spawn, rendezvous on 127.0.0.1, no torchrun), each with a
DistributedSampler share of the training images (seed --seed, set_epoch each epoch), --batch images
per process and step (PyTorch's convention, and tapegrad's), rank r seeding its dropout with
--seed + r, and every N-th test image evaluated per rank, the sums all-reduced. Rank 0 prints the
lines the C++ program prints (bench/fashion_mnist_dist.py reads "final test accuracy ...").

    /usr/bin/python3 bench/fashion_mnist_ddp_torch.py --np 2 --threads 1
"""
import argparse
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import load_standardised, make_model, make_optimizer  # noqa: E402  (beside this file)


def summed(values):
    """Every rank's values, summed element by element (one all-reduce in float64)."""
    sums = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(sums)
    return sums.tolist()


def train(rank, args, port, run_start):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.np)
    torch.set_num_threads(args.threads)
    log = (lambda *a, **k: print(*a, **k, flush=True)) if rank == 0 else (lambda *a, **k: None)

    train_images, train_labels, test_images, test_labels, _ = load_standardised(args)
    test_images, test_labels = test_images[rank::args.np], test_labels[rank::args.np]  # every N-th, no padding
    load_seconds = time.perf_counter() - run_start

    torch.manual_seed(args.seed + rank)  # DDP broadcasts rank 0's initialisation; dropout differs per rank
    sampler = DistributedSampler(TensorDataset(train_images, train_labels), num_replicas=args.np, rank=rank,
                                 shuffle=True, seed=args.seed)
    train_loader = DataLoader(TensorDataset(train_images, train_labels), batch_size=args.batch, sampler=sampler)
    test_loader = DataLoader(TensorDataset(test_images, test_labels), batch_size=1000,
                             generator=torch.Generator().manual_seed(args.seed))

    ddp = DistributedDataParallel(make_model(args))
    steps_per_epoch = len(train_loader)
    optimizer, schedule = make_optimizer(ddp, args, steps_per_epoch)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    log(f"fashion_mnist DDP (PyTorch {torch.__version__}, gloo): {len(train_labels)} training images (read in "
        f"{load_seconds:.2f} s), {args.epochs} epochs of {steps_per_epoch} batches of {args.batch} on each of "
        f"{args.np} ranks, {torch.get_num_threads()} threads each")

    seconds_sum = 0.0
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        sampler.set_epoch(epoch - 1)
        ddp.train()
        loss_sum, correct, seen = 0.0, 0, 0
        for images, labels in train_loader:
            optimizer.zero_grad(set_to_none=True)
            logits = ddp(images)
            loss = criterion(logits, labels)
            loss.backward()  # DDP's hooks average the gradients over the ranks
            optimizer.step()
            schedule.step()
            loss_sum += loss.item() * len(labels)
            correct += (logits.argmax(1) == labels).sum().item()
            seen += len(labels)
        loss_sum, correct, seen = summed([loss_sum, correct, seen])
        ddp.eval()
        test_loss_sum, test_correct, test_seen = 0.0, 0, 0
        with torch.no_grad():
            for images, labels in test_loader:
                logits = ddp.module(images)
                test_loss_sum += criterion(logits, labels).item() * len(labels)
                test_correct += (logits.argmax(1) == labels).sum().item()
                test_seen += len(labels)
        test_loss_sum, test_correct, test_seen = summed([test_loss_sum, test_correct, test_seen])
        seconds = time.perf_counter() - start
        seconds_sum += seconds
        test_accuracy = test_correct / test_seen
        log(f"epoch {epoch:2d}/{args.epochs}  train loss {loss_sum / seen:.4f}  train acc {100 * correct / seen:.2f}%  "
            f"test loss {test_loss_sum / test_seen:.4f}  test acc {100 * test_accuracy:.2f}%  "
            f"lr {optimizer.param_groups[0]['lr']:.2e}  {seen / seconds:.0f} samples/s  {seconds:.2f} s")
    log(f"final test accuracy {100 * test_accuracy:.2f}%; {seconds_sum / args.epochs:.2f} s per epoch (training and "
        f"evaluation) on {args.np} ranks of {torch.get_num_threads()} threads, {time.perf_counter() - run_start:.2f} s in all")
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2, help="processes (ranks)")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128, help="per rank, as in DDP")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--warmup-epochs", type=int, default=1)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="per rank")
    parser.add_argument("--limit", type=int, default=0)
    args = parser.parse_args()
    if args.warmup_epochs >= args.epochs:
        sys.exit("--warmup-epochs must be less than --epochs")
    # The clock starts before the processes do: their start-up is part of the run, as mpirun's is.
    mp.spawn(train, args=(args, free_port(), time.perf_counter()), nprocs=args.np, join=True)


if __name__ == "__main__":
    main()
