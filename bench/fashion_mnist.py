#!/usr/bin/python3
"""Fashion-MNIST side by side: examples/fashion_mnist (tapegrad) against bench/fashion_mnist_torch.py
(PyTorch eager), the same model, settings and data, at the same thread count, run interleaved.

    /usr/bin/python3 bench/fashion_mnist.py                      # 2 rounds of 10 epochs, 2 threads
    /usr/bin/python3 bench/fashion_mnist.py --rounds 1 --epochs 2

Each round runs tapegrad, then PyTorch (so that a slow phase of the machine hits both), and times
each whole process from start to exit (wall clock, and the CPU time it used: on a machine that other
work shares, the wall clock says more about the neighbours than about the program): reading and normalising the data, training, the test
evaluations and, for tapegrad, its checkpoints and metrics.csv. It prints each run, then the
medians and the ratio PyTorch / tapegrad (above 1: tapegrad is faster).
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# python3-torch installs for Debian's own interpreter, whatever python3 comes first on PATH.
TORCH_PYTHON = "/usr/bin/python3"
FINAL = re.compile(r"final test accuracy ([0-9.]+)%; ([0-9.]+) s per epoch")


def cpu_seconds_of_children():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(name, command, env):
    start, cpu_start = time.perf_counter(), cpu_seconds_of_children()
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds, cpu = time.perf_counter() - start, cpu_seconds_of_children() - cpu_start
    if result.returncode != 0:
        sys.exit(f"{name} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    final = FINAL.search(result.stdout)
    if final is None:
        sys.exit(f"{name}: no 'final test accuracy' line in its output:\n{result.stdout}")
    return {"name": name, "seconds": seconds, "cpu": cpu, "accuracy": float(final.group(1)), "epoch": float(final.group(2))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--program", default=os.path.join(HERE, "..", "build", "examples", "fashion_mnist"),
                        help="the tapegrad example's executable")
    parser.add_argument("--huge-pages", action="store_true",
                        help="run both with GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (transparent huge pages for "
                             "malloc's large blocks: far fewer page faults where they are slow, as in VMs)")
    args = parser.parse_args()
    if not os.access(args.program, os.X_OK):
        sys.exit(f"{args.program} is not built: cmake --build build --target fashion_mnist")
    env = dict(os.environ)
    # PyTorch's OpenMP threads spin while they wait for each other; on a machine that other work
    # shares, a spinning thread steals the core its partner needs, and an epoch took 50x longer
    # (90 s instead of 1.8 s at a load average of 8). Passive waiting costs little when the machine
    # is quiet and keeps PyTorch's numbers meaningful when it is not. Set it yourself to override.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if args.huge_pages:
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    common = ["--epochs", str(args.epochs), "--threads", str(args.threads)]
    warmup = [] if args.epochs > 1 else ["--warmup-epochs", "0"]

    runs = []
    with tempfile.TemporaryDirectory(prefix="fashion_mnist_bench_") as out:
        for round_number in range(1, args.rounds + 1):
            for name, command in (
                    ("tapegrad", [args.program, *common, *warmup, "--out", out]),
                    ("pytorch", [TORCH_PYTHON, os.path.join(HERE, "fashion_mnist_torch.py"), *common, *warmup])):
                load = os.getloadavg()[0]
                result = run(name, command, env)
                runs.append(result)
                print(f"round {round_number}  {name:8s}  {result['seconds']:7.2f} s in all ({result['cpu']:6.2f} s of CPU)  "
                      f"{result['epoch']:6.2f} s per epoch  test accuracy {result['accuracy']:.2f}%  (load average {load:.1f} "
                      f"before)", flush=True)

    def median(name, key):
        return statistics.median(r[key] for r in runs if r["name"] == name)

    tapegrad_all, torch_all = median("tapegrad", "seconds"), median("pytorch", "seconds")
    tapegrad_epoch, torch_epoch = median("tapegrad", "epoch"), median("pytorch", "epoch")
    # Both sides are slowed by other work on the machine, PyTorch's OpenMP threads far more (they
    # spin while they wait for each other): the load average says how quiet the machine was.
    print(f"\nmedians over {args.rounds} round(s), {args.epochs} epochs, {args.threads} threads"
          f"{', huge pages' if args.huge_pages else ''}, OMP_WAIT_POLICY={env['OMP_WAIT_POLICY']}; load average at the end "
          f"{' '.join(f'{load:.1f}' for load in os.getloadavg())}:")
    print(f"  {'':8s}  {'whole run':>10s}  {'CPU time':>10s}  {'per epoch':>10s}  {'test accuracy':>13s}")
    for name in ("tapegrad", "pytorch"):
        print(f"  {name:8s}  {median(name, 'seconds'):8.2f} s  {median(name, 'cpu'):8.2f} s  {median(name, 'epoch'):8.2f} s  "
              f"{median(name, 'accuracy'):12.2f}%")
    print(f"  PyTorch / tapegrad: {torch_all / tapegrad_all:.2f}x whole run, "
          f"{median('pytorch', 'cpu') / median('tapegrad', 'cpu'):.2f}x CPU time, {torch_epoch / tapegrad_epoch:.2f}x per epoch")


if __name__ == "__main__":
    main()
