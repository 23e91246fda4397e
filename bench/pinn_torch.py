#!/usr/bin/python3
"""examples/pinn in PyTorch 1.13 eager: the same physics-informed network, initialisation,
collocation points, loss, optimisers and iteration counts, for the side-by-side comparison.

Problem: -u''(x) = pi^2 sin(pi x) on [-1, 1], u(-1) = u(1) = 0; exact solution u = sin(pi x).
Network: Linear(1, H) -> tanh -> (Linear(H, H) -> tanh) x (depth - 1) -> Linear(H, 1), float64.
Initialisation: Xavier-uniform weights from splitmix64(seed) (layer by layer, each weight [out, in]
row-major, u = (z >> 11) 2^-53, w = (2u - 1) sqrt(6 / (in + out))), biases 0.
Points: N interior collocation points x_i = -1 + 2 (i + 1/2) / N, and the two boundary points.
Loss: mean((u_xx + pi^2 sin(pi x))^2) + mean(u(+-1)^2), u_x and u_xx by
torch.autograd.grad(..., create_graph=True).
Training: Adam(lr) for --adam-steps steps, then --lbfgs-steps calls of
LBFGS(lr=1, max_iter=--lbfgs-iters, history_size=--history, tolerance_grad=0, tolerance_change=0,
line_search_fn="strong_wolfe") -- tolerances 0 so that both programs run every iteration.
Error: relative L2 error of u against sin(pi x) on 10001 evenly spaced points of [-1, 1].

    /usr/bin/python3 bench/pinn_torch.py --threads 2
"""
import argparse
import math
import time

import torch

MASK = (1 << 64) - 1


def splitmix64(state):
    """The next (state, value) of splitmix64."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def make_params(hidden, depth, seed, dtype):
    sizes = [1] + [hidden] * depth + [1]
    state = seed
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        values = []
        for _ in range(fan_out * fan_in):
            state, z = splitmix64(state)
            values.append((2.0 * ((z >> 11) * 2.0 ** -53) - 1.0) * bound)
        w = torch.tensor(values, dtype=dtype).reshape(fan_out, fan_in).requires_grad_()
        b = torch.zeros(fan_out, dtype=dtype, requires_grad=True)
        params += [w, b]
    return params


def net(params, x):
    h = x
    for k in range(0, len(params) - 2, 2):
        h = torch.tanh(torch.nn.functional.linear(h, params[k], params[k + 1]))
    return torch.nn.functional.linear(h, params[-2], params[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=20)
    parser.add_argument("--depth", type=int, default=2, help="hidden layers")
    parser.add_argument("--points", type=int, default=64, help="interior collocation points")
    parser.add_argument("--adam-steps", type=int, default=200)
    parser.add_argument("--adam-lr", type=float, default=1e-3)
    parser.add_argument("--lbfgs-steps", type=int, default=1)
    parser.add_argument("--lbfgs-iters", type=int, default=150)
    parser.add_argument("--history", type=int, default=50)
    parser.add_argument("--float32", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    dtype = torch.float32 if args.float32 else torch.float64

    params = make_params(args.hidden, args.depth, args.seed, dtype)
    n = args.points
    x = (-1 + 2 * (torch.arange(n, dtype=dtype) + 0.5) / n).reshape(n, 1).requires_grad_()
    forcing = math.pi ** 2 * torch.sin(math.pi * x.detach())
    boundary = torch.tensor([[-1.0], [1.0]], dtype=dtype)

    def loss_fn():
        u = net(params, x)
        ones = torch.ones_like(u)
        (u_x,) = torch.autograd.grad(u, x, ones, create_graph=True)
        (u_xx,) = torch.autograd.grad(u_x, x, ones, create_graph=True)
        residual = u_xx + forcing
        return (residual ** 2).mean() + (net(params, boundary) ** 2).mean()

    start = time.perf_counter()
    adam = torch.optim.Adam(params, lr=args.adam_lr)
    for step in range(1, args.adam_steps + 1):
        adam.zero_grad()
        loss = loss_fn()
        loss.backward()
        adam.step()
        if step % 250 == 0 or step == args.adam_steps:
            print(f"adam step {step} loss {loss.item():.6e}", flush=True)
    adam_seconds = time.perf_counter() - start

    lbfgs = torch.optim.LBFGS(params, lr=1, max_iter=args.lbfgs_iters, history_size=args.history,
                              tolerance_grad=0, tolerance_change=0, line_search_fn="strong_wolfe")

    def closure():
        lbfgs.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    for step in range(1, args.lbfgs_steps + 1):
        lbfgs.step(closure)
        state = lbfgs.state[params[0]]
        print(f"lbfgs step {step} loss {closure().item():.6e} iterations {state['n_iter']} "
              f"evaluations {state['func_evals']}", flush=True)
    seconds = time.perf_counter() - start

    with torch.no_grad():
        grid = torch.linspace(-1, 1, 10001, dtype=torch.float64).reshape(-1, 1)
        u = net([p.detach().to(torch.float64) for p in params], grid)
        exact = torch.sin(math.pi * grid)
        error = (torch.linalg.norm(u - exact) / torch.linalg.norm(exact)).item()
    print(f"time {seconds:.3f} s (adam {adam_seconds:.3f} s, lbfgs {seconds - adam_seconds:.3f} s), "
          f"{args.threads} threads, torch {torch.__version__}")
    print(f"relative L2 error {error:.3e}")


if __name__ == "__main__":
    main()
