#!/usr/bin/python3
"""examples/char_lstm in PyTorch 1.13 eager: the same character LSTM, data, split, initialisation,
optimiser and batches, for the side-by-side comparison of quality and speed.

Data, split, vocabulary and batches are char_gpt's twin's (bench/char_gpt_torch.py, imported from
it): the King James Bible from Debian's `bible` program, every tenth chapter validating, or
`--text FILE` split 90/10; nanoGPT's get_batch from one torch.Generator seeded with --seed, shared
by training and evaluation in the order they ask.

Model: `embedding` Embedding(vocab, n_embd) -> `lstm` LSTM(n_embd, hidden_size, num_layers,
batch_first, dropout) from zero states for every batch -> `head` Linear(hidden_size, vocab), with
PyTorch's default initialisation (torch.manual_seed(seed), the modules built in this order).
Adam(lr 2e-3, betas 0.9, 0.99, eps 1e-8, no weight decay), gradient norm clipped to 1.0, constant
learning rate. Iterations it = 0 .. max_iters-1 each take one step; evaluation (mean loss over
eval_iters batches of train, then of val, in eval mode without gradients) runs before the step of
every it % eval_interval == 0 and once after the last step.

    /usr/bin/python3 bench/char_lstm_torch.py --threads 2 --seed 0
"""
import argparse
import math
import statistics
import sys
import time

import torch
from torch import nn

# The data, the batches, the loss and its estimate are char_gpt's twin's (any model of [B, T] -> logits).
from char_gpt_torch import LN2, bible_corpus, cpu_name, estimate_loss, file_corpus, get_batch, loss_of


class CharLSTM(nn.Module):
    """The model of examples/char_lstm, with the same module names (so state_dict keys match)."""

    def __init__(self, vocab_size, n_embd, hidden_size, num_layers, dropout):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, n_embd)
        self.lstm = nn.LSTM(n_embd, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, idx):
        # idx: [B, T] int64 -> logits [B, T, vocab]; h_0 = c_0 = 0
        output, _ = self.lstm(self.embedding(idx))
        return self.head(output)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iters", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--text", default=None, help="train on this UTF-8 file instead of the KJV Bible")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--block-size", type=int, default=128)
    parser.add_argument("--n-embd", type=int, default=128)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--grad-clip", type=float, default=1.0)
    parser.add_argument("--eval-interval", type=int, default=250)
    parser.add_argument("--eval-iters", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    run_start = time.perf_counter()

    train_text, val_text, text, facts = file_corpus(args.text) if args.text else bible_corpus()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    train_tokens = torch.tensor([index[c] for c in train_text], dtype=torch.int64)
    val_tokens = torch.tensor([index[c] for c in val_text], dtype=torch.int64)
    for name, tokens in (("training", train_tokens), ("validation", val_tokens)):
        if len(tokens) <= args.block_size:
            sys.exit(f"char_lstm_torch: the {name} text has {len(tokens)} characters, not more than "
                     f"--block-size {args.block_size}")
    print(f"corpus: {facts['source']}: {len(text)} characters, {len(chars)} distinct; "
          f"train {len(train_text)} / val {len(val_text)} characters "
          f"(read in {time.perf_counter() - run_start:.2f} s)", flush=True)

    torch.manual_seed(args.seed)
    batch_generator = torch.Generator().manual_seed(args.seed)
    model = CharLSTM(len(chars), args.n_embd, args.hidden_size, args.num_layers, args.dropout)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.0)
    n_params = sum(p.numel() for p in model.parameters())
    tokens_per_step = args.batch_size * args.block_size
    print(f"char_lstm (PyTorch {torch.__version__} eager): n_embd {args.n_embd}, num_layers {args.num_layers}, "
          f"hidden_size {args.hidden_size}, block_size {args.block_size}, batch {args.batch_size}, "
          f"dropout {args.dropout}, {n_params} parameters, {args.max_iters} iterations, lr {args.lr}, "
          f"seed {args.seed}, {torch.get_num_threads()} threads, {cpu_name()}", flush=True)

    def report(it, step_ms):
        losses = estimate_loss(model, (("train", train_tokens), ("val", val_tokens)), args, batch_generator)
        timing = ""
        if step_ms:
            median = statistics.median(step_ms)
            timing = f"  step {median:.1f} ms (median of {len(step_ms)}), {tokens_per_step / median * 1e3:.0f} tokens/s"
        print(f"iter {it:5d}  train loss {losses['train']:.4f} ({losses['train'] / LN2:.4f} bpc)  "
              f"val loss {losses['val']:.4f} ({losses['val'] / LN2:.4f} bpc){timing}", flush=True)
        return losses

    step_ms = []
    train_start = time.perf_counter()
    for it in range(args.max_iters):
        if it % args.eval_interval == 0:
            report(it, step_ms)
        start = time.perf_counter()
        x, y = get_batch(train_tokens, args.batch_size, args.block_size, batch_generator)
        loss = loss_of(model, x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        step_ms.append(1e3 * (time.perf_counter() - start))
    losses = report(args.max_iters, step_ms)
    train_seconds = time.perf_counter() - train_start
    median = statistics.median(step_ms) if step_ms else math.nan
    print(f"timing: step {median:.2f} ms median over {len(step_ms)} steps, "
          f"{tokens_per_step / median * 1e3:.0f} tokens/s; training with evaluation {train_seconds:.1f} s, "
          f"whole run {time.perf_counter() - run_start:.1f} s", flush=True)
    print(f"final val loss {losses['val']:.4f} ({losses['val'] / LN2:.4f} bits per character)")


if __name__ == "__main__":
    main()
