#!/usr/bin/python3
"""Runs tapegrad's and libtorch's benchmarks interleaved and prints one comparison table.

    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2 --target tg_bench tg_bench_torch
    python3 bench/run.py --build build            # the full comparison (~10 minutes on 2 cores)
    python3 bench/run.py --build build --quick    # a few iterations: checks the plumbing in ~1 minute
    python3 bench/run.py --build build --raw raw.txt            # also keep every program's output...
    python3 bench/run.py --build build --from-raw raw.txt       # ...and print the table again from it

Every round runs, at 1 and then at 2 threads, tg_bench and then tg_bench_torch once per libtorch
environment below (A B B' B'' A B B' B'' ...), so that a noisy neighbour slows both sides alike.
Each program reports the median of its samples per case; this script takes the median across
rounds, then libtorch's best (lowest) over its environments, per case and thread count.

Giving libtorch its best chance (the environments tried, per case the fastest is reported):
  * Debian's libtorch calls the system BLAS (libblas.so.3, chosen by update-alternatives), so
    install OpenBLAS (`apt-get install libopenblas0-openmp`); with the reference BLAS its GEMMs
    are ~10x slower. This script prints which BLAS libblas.so.3 resolves to.
  * OPENBLAS_CORETYPE is unset: some machines set it to Haswell, which halves OpenBLAS's GEMM
    speed on AVX-512 CPUs.
  * libtorch 1.13 runs its own kernels with AVX2 unless ATEN_CPU_CAPABILITY=avx512: tried both
    where the CPU has AVX-512 (F, BW, VL, DQ); on a CPU without, the avx512 environments are skipped
    (forced, libtorch would die with SIGILL) and the table says which were.
  * glibc's malloc returns large blocks to the OS (page faults on every step) unless
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296:
    tried with and without.
  * Not in the issue's list, but libtorch's best at 2 threads on a shared, loaded machine:
    OMP_WAIT_POLICY=PASSIVE. Debian's libtorch and OpenBLAS run on libgomp, whose idle workers
    spin; when other processes want the same cores, every parallel region then waits for a
    descheduled worker (measured here: train_step/256x512x512 at 2 threads 50-110 ms -> 4-6 ms).
  * Gradients are reset with set_to_none (no memset, no accumulation), forward cases run under
    NoGradGuard: see tg_bench_torch.cpp.
tapegrad runs in the plain environment a user gets (only OPENBLAS_CORETYPE unset).

Standard library only; Debian 12's /usr/bin/python3.
"""

import argparse
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import time

# glibc: keep blocks below 32 MiB on the heap and never trim it, so big tensors are not
# munmap'ed and page-faulted back in on every step.
GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=4294967296"

# libtorch environments tried; libtorch's result per case is the best of them.
TORCH_VARIANTS = {
    "default": {},
    "malloc": {"GLIBC_TUNABLES": GLIBC_TUNABLES},
    "malloc+avx512": {"GLIBC_TUNABLES": GLIBC_TUNABLES, "ATEN_CPU_CAPABILITY": "avx512"},
    "malloc+avx512+passive": {"GLIBC_TUNABLES": GLIBC_TUNABLES, "ATEN_CPU_CAPABILITY": "avx512",
                              "OMP_WAIT_POLICY": "PASSIVE"},
}

# The CPU features an ATEN_CPU_CAPABILITY value needs (ATen's own check, as /proc/cpuinfo names
# them). libtorch 1.13 does not check a forced value: avx512 on a CPU without AVX-512 dies with an
# illegal instruction (SIGILL) at its first vectorised kernel.
ATEN_CAPABILITY_NEEDS = {
    "avx512": ["avx512f", "avx512bw", "avx512vl", "avx512dq"],
    "avx2": ["avx2", "fma"],
    "default": [],
}

LINE = re.compile(r"case=(\S+) threads=(\d+) median_ms=(\S+) p10_ms=(\S+) p90_ms=(\S+) iters=(\d+)")
BANNER = re.compile(r"^# (cpu: .*)$", re.M)  # tg_bench's first line: tg::to_string(tg::cpu_info())
banners = []  # every distinct banner seen, in order (one unless the runs disagree)
STREAM_ELEMENTS = 1 << 25  # must match bench::kStreamElements

# Targets of issue 11: GEMM at least this fraction of the FMA peak measured in the same run, 1 thread;
# 2 threads at least GEMM_THREAD_SPEEDUP x 1 thread.
GEMM_PEAK_FRACTION = 0.8
GEMM_THREAD_SPEEDUP = 1.8
# Targets of issues 5 and 11: libtorch time / tapegrad time at least this much.
LAYER_NORM_SPEEDUP = {"8192x768": 2.0, "32768x64": 2.0, "512x4096": 2.0, "64x8": 10.0, "2x4": 10.0}
TRAIN_SPEEDUP = {"2x5x6": 10.0, "64x32x64": 5.0, "256x512x512": 1.1, "1024x1024x1024": 1.1}
FORWARD_VS_COPY = 1.3          # LayerNorm forward time <= 1.3x a memcpy of the same tensor...
LARGE_LAYER_NORM = ["8192x768", "32768x64", "512x4096"]  # ...where it is memory-bound
THREAD_SPEEDUP = 1.7           # 2 threads vs 1 on the compute-bound training steps
COMPUTE_BOUND = ["train_step/256x512x512", "train_step/1024x1024x1024"]
TINY = ["layer_norm_fwd/2x4", "layer_norm_fwd_bwd/2x4", "layer_norm_fwd/64x8", "layer_norm_fwd_bwd/64x8",
        "train_step/2x5x6", "train_step/64x32x64", "tiny_graph/4"]
# Targets of issue 14: the toolkit's cases at least this many times libtorch at 2 threads, on 1M+
# elements and on tiny shapes; the memory-bound large ones at least TOOLKIT_TRIAD_FRACTION of triad.
TOOLKIT = ["softmax_fwd_bwd", "cross_entropy_fwd_bwd", "gelu_fwd_bwd", "gelu_tanh_fwd_bwd", "dropout_fwd", "adamw_step"]
TOOLKIT_SPEEDUP = {"8192x128": 1.5, "4x8": 5.0}
TOOLKIT_THREADS = 2
TOOLKIT_TRIAD_FRACTION = 0.9
# Targets of issue 31: conv2d forward+backward at least CONV_SPEEDUP x libtorch on every case, the
# dense ones (groups 1) at least CONV_PEAK_FRACTION of the FMA peak; BatchNorm2d forward+backward on
# a DRAM-sized tensor at least TOOLKIT_TRIAD_FRACTION of STREAM triad.
CONV_SPEEDUP = 1.5
CONV_PEAK_FRACTION = 0.7
CONV = re.compile(r"(\d+)x(\d+)x(\d+)x(\d+)x(\d+)k(\d+)(?:s(\d+))?p(\d+)(?:d(\d+))?(?:g(\d+))?$")
NOT_SLOWER_TOLERANCE = 1.05    # "must not get slower with more threads", within 5% of noise


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="the CMake build directory (default: build)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per case per run (default 0.3)")
    parser.add_argument("--repetitions", type=int, default=10, help="minimum samples per case per run (default 10)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--filter", default="", help="only cases whose name contains this")
    parser.add_argument("--variants", default=",".join(TORCH_VARIANTS),
                        help="libtorch environments to try (default: all of %s)" % ", ".join(TORCH_VARIANTS))
    parser.add_argument("--quick", action="store_true", help="1 round, few iterations: a plumbing check")
    parser.add_argument("--raw", help="also append every raw result line to this file")
    parser.add_argument("--from-raw", help="print the table from a file written by --raw instead of running")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.min_time, args.repetitions = 1, 0.02, 3
    args.threads = [int(t) for t in args.threads.split(",")]
    args.variants = [v for v in args.variants.split(",") if v]
    for variant in args.variants:
        if variant not in TORCH_VARIANTS:
            parser.error("unknown variant %r" % variant)
    return args


def cpu_flags():
    """The feature flags of this CPU, from /proc/cpuinfo (empty when it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def runnable_variants(variants, flags):
    """The libtorch environments this CPU can run, and {skipped variant: why}: a variant that forces
    an ATEN_CPU_CAPABILITY whose instructions the CPU lacks would die with SIGILL."""
    runnable, skipped = [], {}
    for variant in variants:
        capability = TORCH_VARIANTS[variant].get("ATEN_CPU_CAPABILITY")
        if capability is not None:
            needs = ATEN_CAPABILITY_NEEDS.get(capability)
            missing = [flag for flag in needs if flag not in flags] if needs is not None else ["(unknown capability)"]
            if missing:
                skipped[variant] = "ATEN_CPU_CAPABILITY=%s needs %s, which this CPU lacks" % (capability,
                                                                                                 " ".join(missing))
                continue
        runnable.append(variant)
    return runnable, skipped


def base_environment():
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)  # never pin OpenBLAS to an older core (Haswell halves GEMM)
    for name in ("GLIBC_TUNABLES", "ATEN_CPU_CAPABILITY", "OMP_WAIT_POLICY"):
        env.pop(name, None)  # set per variant only
    return env


def run(label, program, threads, args, env):
    command = [program, "--threads", str(threads), "--min-time", str(args.min_time),
               "--repetitions", str(args.repetitions)]
    if args.filter:
        command += ["--filter", args.filter]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        sys.exit("%s failed (exit %d):\n%s" % (" ".join(command), result.returncode, result.stderr))
    for banner in BANNER.findall(result.stdout):
        if banner not in banners:
            banners.append(banner)
    if args.raw:
        with open(args.raw, "a") as raw:
            raw.write("# program=%s %s\n%s" % (label, " ".join(command), result.stdout))
    return [(m.group(1), int(m.group(2)), float(m.group(3))) for m in LINE.finditer(result.stdout)]


def load_raw(path):
    """Reads a --raw file back: results[(program, case, threads)] = [median per run], case order."""
    results, order, label = {}, [], None
    for line in open(path):
        if line.startswith("# program="):
            label = line.split()[1].split("=", 1)[1]
        banner = BANNER.match(line)
        if banner and banner.group(1) not in banners:
            banners.append(banner.group(1))
        match = LINE.match(line)
        if match and label:
            results.setdefault((label, match.group(1), int(match.group(2))), []).append(float(match.group(3)))
            if match.group(1) not in order:
                order.append(match.group(1))
    return results, order


def command_output(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine(build, torch_program):
    """CPU, cores, compiler, libtorch version and the BLAS libtorch will load."""
    cpu = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else ("AVX2" if "avx2" in flags else "SSE")
    compiler = "unknown"
    cache = os.path.join(build, "CMakeCache.txt")
    if os.path.exists(cache):
        for line in open(cache):
            if line.startswith("CMAKE_CXX_COMPILER:"):
                compiler = command_output([line.split("=", 1)[1].strip(), "--version"]).splitlines()[0]
    info = {
        "cpu": "%s (%s), %d cores, %s" % (cpu, isa, os.cpu_count(), platform.platform()),
        "compiler": compiler,
        "libtorch": command_output(["dpkg-query", "-W", "-f=${Version}", "libtorch-dev"]) or "not installed",
        "blas": "n/a",
    }
    if torch_program:
        for line in command_output(["ldd", torch_program]).splitlines():
            if line.strip().startswith("libblas.so.3"):
                path = line.split("=>")[1].split("(")[0].strip()
                info["blas"] = "libblas.so.3 -> %s" % os.path.realpath(path)
        if "openblas" not in info["blas"]:
            print("warning: libtorch's BLAS is not OpenBLAS (%s): apt-get install libopenblas0-openmp" % info["blas"],
                  file=sys.stderr)
    return info


def numel(shape):
    n = 1
    for size in shape.split("x"):
        n *= int(size)
    return n


def conv_shape(shape):
    """The sizes in a conv2d case's name (harness.hpp's conv_name) as a dict."""
    n, c_in, c_out, h, w, k, stride, pad, dilation, groups = (
        int(v) if v is not None else None for v in CONV.match(shape).groups())
    stride, dilation, groups = stride or 1, dilation or 1, groups or 1
    h_out = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    w_out = (w + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    return dict(n=n, c_in=c_in, c_out=c_out, h_out=h_out, w_out=w_out, k=k, groups=groups)


def gflops(case, ms):
    """Training step: 2·B·IN·H for the forward matmul + 2·B·IN·H for the weight gradient. The input
    gradient (another 2·B·IN·H) is not counted: x is data, neither library computes it.
    GEMM M×K×N (float32 or bf16 products): 2·M·K·N. bmm forward+backward B×M×K×N: 6·B·M·K·N. FMA peak: the FLOPs per thread and iteration in its name, times threads."""
    family, shape = case.split("/")
    if family == "fma_peak":
        return None  # needs the thread count: see peak_gflops
    if family in ("conv2d_fwd_bwd", "conv2d_bf16_fwd_bwd"):  # 2·N·C_out·H_out·W_out·(C_in/groups)·k² forward, as much for dx and dw
        c = conv_shape(shape)
        macs = c["n"] * c["c_out"] * c["h_out"] * c["w_out"] * (c["c_in"] // c["groups"]) * c["k"] ** 2
        return 6.0 * macs / (ms * 1e-3) / 1e9
    if family == "bmm_fwd_bwd":  # B×M×K×N: 2·B·M·K·N forward, twice that for dA and dB
        b, m, k, n = (int(s) for s in shape.split("x"))
        return 6.0 * b * m * k * n / (ms * 1e-3) / 1e9
    b, i, h = (int(s) for s in shape.split("x"))
    return (2.0 if family in ("gemm", "gemm_bf16") else 4.0) * b * i * h / (ms * 1e-3) / 1e9


def peak_gflops(case, threads, ms):
    return int(case.split("/")[1]) * threads / (ms * 1e-3) / 1e9


def gbps(case, ms):
    """LayerNorm: 8 B per element forward (read x, write y), 20 forward+backward (+ read dy and x,
    write dx); memcpy 8 B; STREAM copy 8 B and triad 12 B per element (no write-allocate); the
    toolkit's cases and the image ones the least traffic their work needs (below)."""
    family, shape = case.split("/")
    per_element = {"layer_norm_fwd": 8, "layer_norm_fwd_bwd": 20, "copy": 8, "stream_copy": 8, "stream_triad": 12,
                   # read x, write y; then read y (or x) and dy, write dx
                   "softmax_fwd_bwd": 20, "gelu_fwd_bwd": 20, "gelu_tanh_fwd_bwd": 20,
                   # read the logits, then read them again and write their gradient
                   "cross_entropy_fwd_bwd": 12,
                   # read x, write y and the 1-byte mask
                   "dropout_fwd": 9,
                   # read the parameter, its gradient and two moments, write the parameter and moments
                   "adamw_step": 28,
                   # forward: read x for the statistics, then read x and write y; backward: read dy and
                   # x for Σdy and Σdy·x̂, then read them again and write dx
                   "batch_norm2d_fwd_bwd": 32,
                   # read x, write y (a quarter of x's elements); read dy, write dx (indices not counted)
                   "max_pool2d_fwd_bwd": 10}
    if family not in per_element:
        return None
    return per_element[family] * numel(shape) / (ms * 1e-3) / 1e9


def fmt(value, digits=3):
    """`digits` significant digits in fixed notation: 0.00123, 12.3, 1234."""
    if value is None:
        return ""
    if value == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return "%.*f" % (decimals, value)


def main():
    args = parse_args()
    bench_dir = os.path.join(args.build, "bench")
    tg_program = os.path.join(bench_dir, "tg_bench")
    torch_program = os.path.join(bench_dir, "tg_bench_torch")
    if not os.access(tg_program, os.X_OK) and not args.from_raw:
        sys.exit("%s not found: cmake --build %s --target tg_bench tg_bench_torch" % (tg_program, args.build))
    if not os.access(torch_program, os.X_OK) and not args.from_raw:
        print("note: %s not built (no libtorch): tapegrad only" % torch_program, file=sys.stderr)
        torch_program = None
    info = machine(args.build, torch_program)
    skipped = {}
    if not args.from_raw:
        args.variants, skipped = runnable_variants(args.variants, cpu_flags())
        for variant, why in skipped.items():
            print("note: libtorch environment %s skipped: %s" % (variant, why), file=sys.stderr)

    env = base_environment()
    programs = [("tapegrad", tg_program, env)]
    if torch_program:
        programs += [("torch:" + v, torch_program, dict(env, **TORCH_VARIANTS[v])) for v in args.variants]

    # results[(program, case, threads)] = [median of round 1, median of round 2, ...]
    results = {}
    order = []  # cases in the programs' output order
    start = time.time()
    if args.from_raw:
        results, order = load_raw(args.from_raw)
        args.rounds = max(len(v) for v in results.values())
        args.variants = [v for v in args.variants if any(k[0] == "torch:" + v for k in results)]
    for round_index in range(0 if args.from_raw else args.rounds):
        # Alternate the order every round (A B C D, then D C B A) so that no program always runs
        # right after the same neighbour or at the same point of a slow drift.
        sequence = programs if round_index % 2 == 0 else programs[::-1]
        for threads in args.threads:
            for label, program, program_env in sequence:
                for case, t, ms in run(label, program, threads, args, program_env):
                    results.setdefault((label, case, t), []).append(ms)
                    if case not in order:
                        order.append(case)
        print("round %d/%d done (%.0f s)" % (round_index + 1, args.rounds, time.time() - start), file=sys.stderr)

    def median(label, case, threads):
        values = results.get((label, case, threads))
        return statistics.median(values) if values else None

    def torch_best(case, threads):
        best = None
        for variant in args.variants:
            ms = median("torch:" + variant, case, threads)
            if ms is not None and (best is None or ms < best[0]):
                best = (ms, variant)
        return best

    peak_case = next((c for c in order if c.startswith("fma_peak/")), None)
    peak = {t: peak_gflops(peak_case, t, median("tapegrad", peak_case, t))
            for t in args.threads if peak_case and median("tapegrad", peak_case, t)}

    triad = {t: gbps("stream_triad/%d" % STREAM_ELEMENTS, median("tapegrad", "stream_triad/%d" % STREAM_ELEMENTS, t))
             for t in args.threads if median("tapegrad", "stream_triad/%d" % STREAM_ELEMENTS, t)}

    when = os.path.getmtime(args.from_raw) if args.from_raw else time.time()
    print("# tapegrad vs libtorch — %s" % time.strftime("%Y-%m-%d %H:%M", time.localtime(when)))
    print()
    if args.from_raw:  # the raw file records each program's `# cpu:` banner, not the host's details
        print("- Machine: as its banner below says (printed from %s; the compiler and libtorch lines below "
              "describe the machine that printed it: %s)" % (args.from_raw, info["cpu"]))
    else:
        print("- Machine: %s" % info["cpu"])
    for banner in banners:
        print("- tapegrad's %s" % banner)
    print("- Compiler: %s" % info["compiler"])
    print("- libtorch: %s (Debian), BLAS: %s" % (info["libtorch"], info["blas"]))
    # The command as it would reproduce this table: the settings that change what runs, and the
    # environment variables that force a kernel choice (a forced-generic run must say so; a table
    # printed --from-raw cannot know them, its raw file's `# cpu:` lines name the kernels).
    forcing = [] if args.from_raw else [
        "%s=%s" % (k, os.environ[k]) for k in ("BLIS_ARCH_TYPE", "TG_GEMM", "TG_CPU_ISA") if k in os.environ]
    command = " ".join(forcing + ["python3 bench/run.py --build %s" % args.build])
    command += " --quick" if args.quick else (" --rounds %d" % args.rounds if args.rounds != 5 else "")
    if args.filter:
        command += " --filter %s" % args.filter
    requested = args.variants + list(skipped)
    if sorted(requested) != sorted(TORCH_VARIANTS):
        command += ' --variants "%s"' % ",".join(v for v in TORCH_VARIANTS if v in requested)
    print("- Command: `%s` — %d round%s, min-time %g s per case per run, medians across rounds; "
          "libtorch at its best of: %s" % (command, args.rounds, "" if args.rounds == 1 else "s", args.min_time,
                                           ", ".join(args.variants) or "(libtorch not run)"))
    for variant, why in skipped.items():
        print("- libtorch environment %s skipped: %s" % (variant, why))
    print()
    print("| case | thr | tapegrad ms | libtorch ms | torch/tg | tg GB/s | % triad | tg GFLOP/s | % FMA peak "
          "| torch GFLOP/s | target | met | libtorch best env |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    verdicts = []
    for case in order:
        family, shape = case.split("/")
        for threads in args.threads:
            tg_ms = median("tapegrad", case, threads)
            if tg_ms is None:
                continue
            best = torch_best(case, threads)
            torch_ms, variant = best if best else (None, "")
            ratio = torch_ms / tg_ms if torch_ms else None
            bandwidth = gbps(case, tg_ms)
            fraction = 100.0 * bandwidth / triad[threads] if bandwidth and threads in triad else None
            # the bf16 families' % FMA peak is of the float32 peak: vdpbf16ps can reach 200%.
            computes = family in ("train_step", "gemm", "gemm_bf16", "bmm_fwd_bwd", "conv2d_fwd_bwd", "conv2d_bf16_fwd_bwd")
            tg_flops = gflops(case, tg_ms) if computes else None
            if family == "fma_peak":
                tg_flops = peak.get(threads)
            torch_flops = gflops(case, torch_ms) if computes and torch_ms else None
            of_peak = 100.0 * tg_flops / peak[threads] if computes and threads in peak else None
            target, met = "", ""
            if family == "gemm" and threads == args.threads[0] and of_peak is not None:
                target, met = "≥ %d%% FMA peak" % round(100 * GEMM_PEAK_FRACTION), of_peak >= 100 * GEMM_PEAK_FRACTION
            elif family == "layer_norm_fwd_bwd" and shape in LAYER_NORM_SPEEDUP and ratio:
                target, met = "≥ %gx torch" % LAYER_NORM_SPEEDUP[shape], ratio >= LAYER_NORM_SPEEDUP[shape]
            elif family == "train_step" and shape in TRAIN_SPEEDUP and ratio:
                target, met = "≥ %gx torch" % TRAIN_SPEEDUP[shape], ratio >= TRAIN_SPEEDUP[shape]
            elif family in TOOLKIT and shape in TOOLKIT_SPEEDUP and threads == TOOLKIT_THREADS and ratio:
                target, met = "≥ %gx torch" % TOOLKIT_SPEEDUP[shape], ratio >= TOOLKIT_SPEEDUP[shape]
                if numel(shape) >= 1 << 20 and fraction is not None:
                    target += ", ≥ %d%% triad" % round(100 * TOOLKIT_TRIAD_FRACTION)
                    met = met and fraction >= 100 * TOOLKIT_TRIAD_FRACTION
            elif family == "conv2d_fwd_bwd" and ratio:
                target, met = "≥ %gx torch" % CONV_SPEEDUP, ratio >= CONV_SPEEDUP
                if conv_shape(shape)["groups"] == 1 and of_peak is not None:
                    target += ", ≥ %d%% FMA peak" % round(100 * CONV_PEAK_FRACTION)
                    met = met and of_peak >= 100 * CONV_PEAK_FRACTION
            elif family == "batch_norm2d_fwd_bwd" and fraction is not None:
                target, met = "≥ %d%% triad" % round(100 * TOOLKIT_TRIAD_FRACTION), \
                    fraction >= 100 * TOOLKIT_TRIAD_FRACTION
            elif family == "layer_norm_fwd" and shape in LARGE_LAYER_NORM:
                copy_ms = median("tapegrad", "copy/" + shape, threads)
                if copy_ms:
                    target, met = "≤ %gx copy (is %.2fx)" % (FORWARD_VS_COPY, tg_ms / copy_ms), \
                        tg_ms <= FORWARD_VS_COPY * copy_ms
            if target:
                verdicts.append(met)
            print("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                case, threads, fmt(tg_ms, 4), fmt(torch_ms, 4), fmt(ratio), fmt(bandwidth), fmt(fraction),
                fmt(tg_flops), fmt(of_peak), fmt(torch_flops), target, "" if target == "" else ("yes" if met else "**no**"),
                variant))

    if len(args.threads) >= 2:
        one, two = args.threads[0], args.threads[1]
        print()
        print("Thread scaling of tapegrad (%d → %d threads): ≥ %gx on the compute-bound steps; "
              "tiny shapes not slower (within %d%%)." % (one, two, THREAD_SPEEDUP,
                                                         round(100 * (NOT_SLOWER_TOLERANCE - 1))))
        print()
        print("| case | %d thr ms | %d thr ms | speed-up | target | met |" % (one, two))
        print("|---|---|---|---|---|---|")
        gemms = [c for c in order if c.startswith("gemm/")]
        for case in ([peak_case] if peak_case else []) + gemms + COMPUTE_BOUND + TINY:
            t1, t2 = median("tapegrad", case, one), median("tapegrad", case, two)
            if t1 is None or t2 is None:
                continue
            if case == peak_case:  # the same work per thread: the speed-up is the throughput ratio
                print("| %s | %s | %s | %s | (reference) | |" % (case, fmt(t1, 4), fmt(t2, 4), fmt(two * t1 / t2)))
                continue
            if case in gemms:
                target, met = "≥ %gx" % GEMM_THREAD_SPEEDUP, t1 / t2 >= GEMM_THREAD_SPEEDUP
            elif case in COMPUTE_BOUND:
                target, met = "≥ %gx" % THREAD_SPEEDUP, t1 / t2 >= THREAD_SPEEDUP
            else:
                target, met = "not slower", t2 <= NOT_SLOWER_TOLERANCE * t1
            verdicts.append(met)
            print("| %s | %s | %s | %s | %s | %s |" % (case, fmt(t1, 4), fmt(t2, 4), fmt(t1 / t2), target,
                                                       "yes" if met else "**no**"))
    if peak:
        print()
        print("FMA peak (tg_bench, register-only float32 FMA loop in the widest vectors): " + "; ".join(
            "%d thr: %s GFLOP/s" % (t, fmt(peak[t])) for t in sorted(peak)))
    if triad:
        def copy_gbps(t):  # absent when --filter left stream_copy out
            ms = median("tapegrad", "stream_copy/%d" % STREAM_ELEMENTS, t)
            return gbps("stream_copy/%d" % STREAM_ELEMENTS, ms) if ms else None
        print()
        print("STREAM (tg_bench, %d Mi floats per array): " % (STREAM_ELEMENTS >> 20) + "; ".join(
            "%d thr: copy %s GB/s, triad %s GB/s" % (t, fmt(copy_gbps(t)) or "not run", fmt(triad[t]))
            for t in sorted(triad)))
    print()
    print("Targets met: %d of %d." % (sum(1 for v in verdicts if v), len(verdicts)))


if __name__ == "__main__":
    main()
