#!/usr/bin/python3
"""Fashion-MNIST side by side: examples/fashion_mnist (tapegrad) against bench/fashion_mnist_torch.py
(PyTorch eager), the same model, settings and data, at the same thread count, run interleaved.

    /usr/bin/python3 bench/fashion_mnist.py                      # 2 rounds of 10 epochs, 2 threads
    /usr/bin/python3 bench/fashion_mnist.py --rounds 1 --epochs 2

Each round runs tapegrad, then PyTorch with OpenMP waiting actively and passively (so that a slow phase of the machine hits both), and times
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
    if args.huge_pages:
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    # PyTorch at its best: its OpenMP threads spin while they wait for each other (libgomp's default,
    # ACTIVE), which is fastest on a quiet machine (1.96 s against 2.9 s per epoch passive, Zen 5), but
    # on a machine that other work shares a spinning thread steals the core its partner needs and an
    # epoch took 50x longer (90 s at a load average of 8). So every round runs PyTorch both ways and the
    # ratio takes its faster policy; set OMP_WAIT_POLICY yourself to run only that one.
    policies = [env["OMP_WAIT_POLICY"]] if "OMP_WAIT_POLICY" in env else ["ACTIVE", "PASSIVE"]
    torch_names = [f"pytorch {policy.lower()}" for policy in policies]
    common = ["--epochs", str(args.epochs), "--threads", str(args.threads)]
    warmup = [] if args.epochs > 1 else ["--warmup-epochs", "0"]

    runs = []
    with tempfile.TemporaryDirectory(prefix="fashion_mnist_bench_") as out:
        for round_number in range(1, args.rounds + 1):
            torch_command = [TORCH_PYTHON, os.path.join(HERE, "fashion_mnist_torch.py"), *common, *warmup]
            for name, command, run_env in (
                    ("tapegrad", [args.program, *common, *warmup, "--out", out], env),
                    *((name, torch_command, {**env, "OMP_WAIT_POLICY": policy})
                      for name, policy in zip(torch_names, policies))):
                load = os.getloadavg()[0]
                result = run(name, command, run_env)
                runs.append(result)
                print(f"round {round_number}  {name:15s}  {result['seconds']:7.2f} s in all ({result['cpu']:6.2f} s of CPU)  "
                      f"{result['epoch']:6.2f} s per epoch  test accuracy {result['accuracy']:.2f}%  (load average {load:.1f} "
                      f"before)", flush=True)

    def median(name, key):
        return statistics.median(r[key] for r in runs if r["name"] == name)

    best_torch = min(torch_names, key=lambda name: median(name, "seconds"))
    print(f"\nmedians over {args.rounds} round(s), {args.epochs} epochs, {args.threads} threads"
          f"{', huge pages' if args.huge_pages else ''}; load average at the end "
          f"{' '.join(f'{load:.1f}' for load in os.getloadavg())}:")
    print(f"  {'':15s}  {'whole run':>10s}  {'CPU time':>10s}  {'per epoch':>10s}  {'test accuracy':>13s}")
    for name in ("tapegrad", *torch_names):
        print(f"  {name:15s}  {median(name, 'seconds'):8.2f} s  {median(name, 'cpu'):8.2f} s  {median(name, 'epoch'):8.2f} s  "
              f"{median(name, 'accuracy'):12.2f}%")
    print(f"  PyTorch at its best ({best_torch}) / tapegrad: "
          f"{median(best_torch, 'seconds') / median('tapegrad', 'seconds'):.2f}x whole run, "
          f"{median(best_torch, 'cpu') / median('tapegrad', 'cpu'):.2f}x CPU time, "
          f"{median(best_torch, 'epoch') / median('tapegrad', 'epoch'):.2f}x per epoch")

if __name__ == "__main__":
    main()
