#!/usr/bin/python3
"""Fashion-MNIST data-parallel side by side: `mpirun -np 2 fashion_mnist --distributed --threads 1`
(tapegrad) against bench/fashion_mnist_ddp_torch.py (PyTorch DDP, gloo, 2 processes of 1 thread),
the same model, settings and data, plus the scaling point: 2 ranks of 1 thread against
1 process of 2 threads with the same global batch.

    /usr/bin/python3 bench/fashion_mnist_dist.py                     # 2 rounds of 10 epochs
    /usr/bin/python3 bench/fashion_mnist_dist.py --rounds 1 --epochs 2 --limit 10000

Each round runs the three in turn (a slow phase of the shared machine hits all of them) and times
each whole job from launch to exit, as bench/fashion_mnist.py does: start-up (mpirun's or
torch.multiprocessing.spawn's), reading the data on every rank, training, the test evaluations and,
for tapegrad, rank 0's checkpoints and metrics.csv. --batch is per rank (PyTorch's DDP convention),
so the single process trains with 2 × --batch: the same steps and the same images per step.
mpirun runs with --bind-to none, as the Python processes run (unpinned).
"""
import argparse
import math
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from fashion_mnist import TORCH_PYTHON, run  # noqa: E402  (times a command, reads its "final test accuracy")

RANKS = 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=128, help="per rank")
    parser.add_argument("--limit", type=int, default=0, help="train on the first N images; 0: all 60000")
    parser.add_argument("--program", default=os.path.join(HERE, "..", "build", "examples", "fashion_mnist"),
                        help="the tapegrad example's executable (built with tapegrad::distributed)")
    parser.add_argument("--mpirun", default="mpirun")
    args = parser.parse_args()
    if not os.access(args.program, os.X_OK):
        sys.exit(f"{args.program} is not built: cmake --build build --target fashion_mnist")
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see bench/fashion_mnist.py: spinning OpenMP threads
    common = ["--epochs", str(args.epochs), "--limit", str(args.limit)]
    if args.epochs == 1:
        common += ["--warmup-epochs", "0"]
    images = args.limit if args.limit > 0 else 60000
    steps_per_epoch = math.ceil(math.ceil(images / RANKS) / args.batch)  # the same in all three runs
    mpirun = [args.mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(RANKS)]

    runs = []
    with tempfile.TemporaryDirectory(prefix="fashion_mnist_dist_bench_") as out:
        configurations = (
            ("tapegrad 2x1", [*mpirun, args.program, "--distributed", "--threads", "1", "--batch", str(args.batch),
                              *common, "--out", out + "/dist"]),
            ("pytorch 2x1", [TORCH_PYTHON, os.path.join(HERE, "fashion_mnist_ddp_torch.py"), "--np", str(RANKS),
                             "--threads", "1", "--batch", str(args.batch), *common]),
            ("tapegrad 1x2", [args.program, "--threads", str(RANKS), "--batch", str(RANKS * args.batch), *common,
                              "--out", out + "/single"]))
        for round_number in range(1, args.rounds + 1):
            for name, command in configurations:
                load = os.getloadavg()[0]
                result = run(name, command, env)
                runs.append(result)
                print(f"round {round_number}  {name:12s}  {result['seconds']:7.2f} s in all ({result['cpu']:6.2f} s of CPU)  "
                      f"{result['epoch']:6.2f} s per epoch  test accuracy {result['accuracy']:.2f}%  (load average "
                      f"{load:.1f} before)", flush=True)

    def median(name, key):
        return statistics.median(r[key] for r in runs if r["name"] == name)

    print(f"\nmedians over {args.rounds} round(s), {args.epochs} epochs of {images} images, {steps_per_epoch} steps of "
          f"{RANKS} x {args.batch} images; load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}:")
    print(f"  {'':12s}  {'whole run':>10s}  {'CPU time':>10s}  {'per epoch':>10s}  {'steps/s':>8s}  {'test accuracy':>13s}")
    for name, _ in configurations:
        print(f"  {name:12s}  {median(name, 'seconds'):8.2f} s  {median(name, 'cpu'):8.2f} s  {median(name, 'epoch'):8.2f} s  "
              f"{steps_per_epoch / median(name, 'epoch'):8.1f}  {median(name, 'accuracy'):12.2f}%")
    print(f"  PyTorch DDP / tapegrad, 2 ranks x 1 thread: "
          f"{median('pytorch 2x1', 'seconds') / median('tapegrad 2x1', 'seconds'):.2f}x whole run, "
          f"{median('pytorch 2x1', 'epoch') / median('tapegrad 2x1', 'epoch'):.2f}x per epoch")
    print(f"  tapegrad 2 ranks x 1 thread / 1 process x 2 threads, steps/s: "
          f"{median('tapegrad 1x2', 'epoch') / median('tapegrad 2x1', 'epoch'):.2f}")


if __name__ == "__main__":
    main()
