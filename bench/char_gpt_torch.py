#!/usr/bin/python3
"""examples/char_gpt in PyTorch 1.13 eager: the same character-level GPT, data, split, initialisation,
optimiser and schedule, for the side-by-side comparison of quality and speed.

Data: the King James Bible as `bible -f Gen1:1-Rev22:21` prints it (Debian's bible-kjv and
bible-kjv-text), one verse a line as "Ge1:1 In the beginning...". Each verse loses its reference (up
to the first space) and gains a "\n"; the chapter is the reference's part before ':' (book and
chapter, "Ge1"), and chapters are numbered 0, 1, 2... in order of appearance; chapter k goes to
validation iff k % 10 == 9. The vocabulary is the sorted distinct characters of the whole text.
`--text FILE` trains on a UTF-8 file instead: characters are code points, the last 10% of the text
(nanoGPT's shakespeare_char split) is validation.

Model (GPT): `wte` Embedding(vocab, n_embd) + `wpe` Embedding(block_size, n_embd) -> `drop` Dropout
-> `h` TransformerEncoder of n_layer TransformerEncoderLayer(n_embd, n_head, 4 n_embd, dropout,
gelu, batch_first, norm_first) under a float causal mask -> `ln_f` LayerNorm -> `lm_head`
Linear(n_embd, vocab, bias=False) whose weight IS wte.weight. GPT-2 initialisation: every Linear
weight, in_proj_weight and embedding N(0, 0.02), biases 0, LayerNorm 1/0, then every layer's
self_attn.out_proj.weight and linear2.weight N(0, 0.02/sqrt(2 n_layer)). AdamW(betas 0.9, 0.99,
eps 1e-8) with weight decay 0.1 on Linear weights and in_proj_weight, 0 on biases, LayerNorm and
embeddings (so on the tied head). nanoGPT's get_lr: it < 100 -> lr (it+1)/101, then cosine from lr
to lr/10 over it in [100, max_iters]. Gradient norm clipped to 1.0.

Randomness: torch.manual_seed(seed) before the model is built (initialisation, dropout); the batches
(nanoGPT's get_batch: B offsets uniform in [0, len - block - 1], x = tokens[o : o+block], y = the
next characters) come from one torch.Generator seeded with seed, shared by training and evaluation
in the order they ask. Iterations it = 0 .. max_iters-1 each take one step; evaluation (mean loss
over eval_iters batches of train, then of val, in eval mode without gradients) runs before the step
of every it % eval_interval == 0 and once after the last step.

    /usr/bin/python3 bench/char_gpt_torch.py --threads 2 --seed 0
"""
import argparse
import bz2
import math
import platform
import shutil
import statistics
import subprocess
import sys
import time

import torch
from torch import nn
from torch.nn import functional as F

LN2 = math.log(2.0)


# ------------------------------------------------------------------------------------------------
# Data


def bible_verses():
    """The KJV verses as (chapter key, text) pairs, from Debian's `bible` program."""
    if shutil.which("bible") is None:
        sys.exit("char_gpt_torch: the program `bible` is missing: install the Debian packages bible-kjv and "
                 "bible-kjv-text (or pass --text FILE)")
    result = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip():
        sys.exit(f"char_gpt_torch: `bible -f Gen1:1-Rev22:21` failed (exit {result.returncode}): "
                 f"{result.stderr.strip()}; install bible-kjv-text")
    verses = []
    for line in result.stdout.splitlines():
        if not line.strip():
            continue
        reference, _, text = line.partition(" ")
        verses.append((reference.split(":", 1)[0], text))
    return verses


def bible_corpus():
    """Split by chapter: chapter k (in order of appearance) is validation iff k % 10 == 9."""
    verses = bible_verses()
    train_parts, val_parts, all_parts = [], [], []
    chapter, previous_key = -1, None
    for key, text in verses:
        if key != previous_key:
            chapter, previous_key = chapter + 1, key
        (val_parts if chapter % 10 == 9 else train_parts).append(text + "\n")
        all_parts.append(text + "\n")
    facts = {"source": "bible -f Gen1:1-Rev22:21", "verses": len(verses), "chapters": chapter + 1}
    return "".join(train_parts), "".join(val_parts), "".join(all_parts), facts


def file_corpus(path):
    """A UTF-8 text file; the last 10% of its characters are validation."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as error:
        sys.exit(f"char_gpt_torch: cannot read --text {path}: {error.strerror}")
    if not raw:
        sys.exit(f"char_gpt_torch: --text {path} is empty: give a UTF-8 or ASCII text file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        sys.exit(f"char_gpt_torch: --text {path} is not UTF-8 text (byte {error.start}): give a UTF-8 or ASCII file")
    if "\0" in text:
        sys.exit(f"char_gpt_torch: --text {path} holds NUL bytes (a binary file?): give a UTF-8 or ASCII file")
    split = int(0.9 * len(text))
    return text[:split], text[split:], text, {"source": path}


# ------------------------------------------------------------------------------------------------
# Model


class GPT(nn.Module):
    """The GPT of examples/char_gpt, with the same module names (so state_dict keys match)."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, dropout):
        super().__init__()
        self.block_size = block_size
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(n_embd, n_head, 4 * n_embd, dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.h = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied: one tensor, named wte.weight by named_parameters()
        # Float causal mask: -inf above the diagonal is added to the attention scores.
        self.register_buffer("causal_mask", torch.triu(torch.full((block_size, block_size), float("-inf")), 1),
                             persistent=False)

    def forward(self, idx):
        # idx: [B, T] int64 -> logits [B, T, vocab]
        T = idx.shape[1]
        if T > self.block_size:
            raise ValueError(f"sequence of {T} characters is longer than block_size {self.block_size}")
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(T, device=idx.device)))
        x = self.h(x, mask=self.causal_mask[:T, :T].to(x.dtype))
        return self.lm_head(self.ln_f(x))


def init_gpt2(model, n_layer):
    """GPT-2's initialisation. model.apply visits children before parents in registration order;
    the tied wte/lm_head weight is drawn twice (as Embedding, then as lm_head), the second draw stays."""

    def init(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0.0, 0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 0.02)
        elif isinstance(module, nn.MultiheadAttention):
            nn.init.normal_(module.in_proj_weight, 0.0, 0.02)
            nn.init.zeros_(module.in_proj_bias)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    model.apply(init)
    # Residual projections: the sum of 2 n_layer residual branches keeps its variance.
    for name, p in model.named_parameters():
        if name.endswith("self_attn.out_proj.weight") or name.endswith("linear2.weight"):
            nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))


def param_groups(model, weight_decay):
    """Decay for Linear weights and in_proj_weight (matrices that multiply activations); none for
    biases, LayerNorm and embeddings (and so for the tied head)."""
    linear_weights = {f"{name}.weight" for name, module in model.named_modules() if isinstance(module, nn.Linear)}
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # the tied weight comes once, as wte.weight
        (decay if name in linear_weights or name.endswith("in_proj_weight") else no_decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def get_lr(it, lr, warmup_iters, lr_decay_iters, min_lr):
    """nanoGPT's schedule: linear warm-up to lr, then cosine down to min_lr at lr_decay_iters."""
    if it < warmup_iters:
        return lr * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (lr - min_lr)


def get_batch(tokens, batch_size, block_size, generator):
    """nanoGPT's get_batch: B offsets in [0, len - block - 1]; x [B, T] and its shift y [B, T]."""
    offsets = torch.randint(len(tokens) - block_size, (batch_size,), generator=generator)
    x = torch.stack([tokens[o:o + block_size] for o in offsets.tolist()])
    y = torch.stack([tokens[o + 1:o + 1 + block_size] for o in offsets.tolist()])
    return x, y


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


@torch.no_grad()
def estimate_loss(model, splits, args, generator):
    model.eval()
    out = {}
    for name, tokens in splits:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            losses = [loss_of(model, *get_batch(tokens, args.batch_size, args.block_size, generator)).item()
                      for _ in range(args.eval_iters)]
        out[name] = sum(losses) / len(losses)
    model.train()
    return out


# ------------------------------------------------------------------------------------------------


def cpu_name():
    """lscpu's model name with /proc/cpuinfo's family and model, e.g. 'AMD EPYC (family 26, model 2)'."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    name = fields.get("model name", platform.processor() or "unknown CPU")
    return f"{name} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iters", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text", default=None, help="train on this UTF-8 file instead of the KJV Bible")
    parser.add_argument("--batch-size", type=int, default=12)
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--n-layer", type=int, default=4)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-interval", type=int, default=250)
    parser.add_argument("--eval-iters", type=int, default=20)
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    parser.add_argument("--matmul-precision", choices=["highest", "high", "medium"], default="highest",
                        help="torch.set_float32_matmul_precision (PyTorch 1.13 uses it on CUDA only)")
    args = parser.parse_args()
    if args.n_embd % args.n_head != 0:
        sys.exit(f"char_gpt_torch: --n-head {args.n_head} does not divide --n-embd {args.n_embd}")
    torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision(args.matmul_precision)
    run_start = time.perf_counter()

    train_text, val_text, text, facts = file_corpus(args.text) if args.text else bible_corpus()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    train_tokens = torch.tensor([index[c] for c in train_text], dtype=torch.int64)
    val_tokens = torch.tensor([index[c] for c in val_text], dtype=torch.int64)
    for name, tokens in (("training", train_tokens), ("validation", val_tokens)):
        if len(tokens) <= args.block_size:
            sys.exit(f"char_gpt_torch: the {name} text has {len(tokens)} characters, not more than "
                     f"--block-size {args.block_size}")
    # bzip2 -9 for scale: on the validation text alone (what the model is scored on) and on the whole
    # text in its order (a larger input compresses better).
    bzip2_val_bpc = 8 * len(bz2.compress(val_text.encode("utf-8"), 9)) / len(val_text)
    bzip2_all_bpc = 8 * len(bz2.compress(text.encode("utf-8"), 9)) / len(text)
    load_seconds = time.perf_counter() - run_start
    corpus = (f"corpus: {facts['source']}: "
              + (f"{facts['verses']} verses, {facts['chapters']} chapters, " if "verses" in facts else "")
              + f"{len(text)} characters, {len(chars)} distinct; "
              f"train {len(train_text)} / val {len(val_text)} characters; "
              f"bzip2 -9: {bzip2_val_bpc:.4f} bits per character on the validation text, {bzip2_all_bpc:.4f} on the "
              f"whole text (read in {load_seconds:.2f} s)")
    print(corpus, flush=True)

    torch.manual_seed(args.seed)
    batch_generator = torch.Generator().manual_seed(args.seed)
    model = GPT(len(chars), args.block_size, args.n_layer, args.n_head, args.n_embd, args.dropout)
    init_gpt2(model, args.n_layer)
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=args.lr, betas=(0.9, 0.99), eps=1e-8)
    # nanoGPT's get_num_params: position embeddings excluded, the tied head counted once.
    n_params = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    tokens_per_step = args.batch_size * args.block_size
    flops_per_step = (6 * n_params + 12 * args.n_layer * args.n_embd * args.block_size) * tokens_per_step
    print(f"char_gpt (PyTorch {torch.__version__} eager): n_layer {args.n_layer}, n_head {args.n_head}, "
          f"n_embd {args.n_embd}, block_size {args.block_size}, batch {args.batch_size}, dropout {args.dropout}, "
          f"{n_params} parameters (without wpe), {args.max_iters} iterations, lr {args.lr}, seed {args.seed}, "
          f"{torch.get_num_threads()} threads, autocast {args.autocast}, matmul precision {args.matmul_precision}, "
          f"{cpu_name()}", flush=True)

    def report(it, step_ms):
        losses = estimate_loss(model, (("train", train_tokens), ("val", val_tokens)), args, batch_generator)
        timing = ""
        if step_ms:
            median = statistics.median(step_ms)
            timing = (f"  step {median:.1f} ms (median of {len(step_ms)}), "
                      f"{flops_per_step / median / 1e6:.1f} GFLOP/s")
        print(f"iter {it:5d}  train loss {losses['train']:.4f} ({losses['train'] / LN2:.4f} bpc)  "
              f"val loss {losses['val']:.4f} ({losses['val'] / LN2:.4f} bpc){timing}", flush=True)
        return losses

    step_ms, step_cpu_ms = [], []  # wall time and the process's CPU time (all threads) of each step
    train_start = time.perf_counter()
    min_lr = args.lr / 10
    warmup_iters = 100
    for it in range(args.max_iters):
        if it % args.eval_interval == 0:
            report(it, step_ms)
        start, cpu_start = time.perf_counter(), time.process_time()
        lr = get_lr(it, args.lr, warmup_iters, args.max_iters, min_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch(train_tokens, args.batch_size, args.block_size, batch_generator)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            loss = loss_of(model, x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step_ms.append(1e3 * (time.perf_counter() - start))
        step_cpu_ms.append(1e3 * (time.process_time() - cpu_start))
    losses = report(args.max_iters, step_ms)
    train_seconds = time.perf_counter() - train_start
    median = statistics.median(step_ms) if step_ms else float("nan")
    cpu_median = statistics.median(step_cpu_ms) if step_cpu_ms else float("nan")
    print(f"timing: step {median:.2f} ms median over {len(step_ms)} steps, CPU time {cpu_median:.2f} ms; "
          f"{flops_per_step / 1e9:.3f} GFLOP per step by 6N + 12 L d T per token, "
          f"{flops_per_step / median / 1e6:.1f} GFLOP/s; training with evaluation {train_seconds:.1f} s, "
          f"whole run {time.perf_counter() - run_start:.1f} s", flush=True)
    print(f"final val loss {losses['val']:.4f} ({losses['val'] / LN2:.4f} bits per character)")


if __name__ == "__main__":
    main()
