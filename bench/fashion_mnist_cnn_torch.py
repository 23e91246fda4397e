#!/usr/bin/python3
"""examples/fashion_mnist.cpp --model cnn in PyTorch 1.13 eager, for the side-by-side timing.

The same model (in the same order, so torch.manual_seed(seed) draws the same initial weights), data,
normalisation, augmentation, optimiser, schedule, loss and batch size as the tapegrad example:

    [Conv2d(c→c', 3, padding 1, no bias) → BatchNorm2d → ReLU] × 2 → MaxPool2d(2), for 1→32→32 and
    32→64→64; Flatten → Dropout(0.25) → Linear(64·7·7, 10)
    RandomCrop(28, padding=2, fill=black) then RandomHorizontalFlip(), per sample, in the Dataset
    AdamW (weight decay 0.05) under OneCycleLR (max_lr 3e-3, stepped per batch), cross-entropy with
    label smoothing 0.1, batches of 128, 15 epochs

torchvision is not installed here: RandomCrop, RandomHorizontalFlip and RandomErasing below are
torchvision 0.14's tensor code paths (the same torch.randint / torch.rand draws, in the same
order), in plain torch. tests/fixtures/make_transforms_fixtures.py imports them as the reference
for tg::data::transforms. Data loading, augmentation included, is inside the timed run, as it is
in the C++ program; "data" on each epoch's line is the part of it spent waiting for batches.
It prints the lines the C++ program prints (one per epoch, then "final test accuracy ...").

    /usr/bin/python3 bench/fashion_mnist_cnn_torch.py --threads 2
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import read_split  # noqa: E402  (the same IDX reader as the MLP's twin)


# --- torchvision 0.14's transforms, tensor path ---------------------------------------------------

def _padding_ltrb(padding):
    """torchvision's padding: an int for all four sides, (left/right, top/bottom) or (l, t, r, b)."""
    if isinstance(padding, int):
        return [padding] * 4
    if len(padding) == 2:
        return [padding[0], padding[1], padding[0], padding[1]]
    return list(padding)


def _symmetric_pad(img, left, top, right, bottom):
    """torchvision's _pad_symmetric: mirrored with the edge pixel repeated."""
    h, w = img.shape[-2:]
    rows = torch.tensor(list(range(top - 1, -1, -1)) + list(range(h)) + [-(i + 1) for i in range(bottom)])
    cols = torch.tensor(list(range(left - 1, -1, -1)) + list(range(w)) + [-(i + 1) for i in range(right)])
    return img[..., rows[:, None], cols[None, :]]


def pad(img, padding, fill=0.0, padding_mode="constant"):
    """torchvision.transforms.functional.pad on a tensor [..., H, W]."""
    left, top, right, bottom = _padding_ltrb(padding)
    if padding_mode == "symmetric":
        return _symmetric_pad(img, left, top, right, bottom)
    mode = {"edge": "replicate", "reflect": "reflect", "constant": "constant"}[padding_mode]
    if mode == "constant":
        return F.pad(img, [left, right, top, bottom], mode="constant", value=float(fill))
    # replicate / reflect want a batch of [C, H, W]: as torchvision, add a dim and remove it
    need_squeeze = img.ndim < 4
    out = F.pad(img.unsqueeze(0) if need_squeeze else img, [left, right, top, bottom], mode=mode)
    return out.squeeze(0) if need_squeeze else out


class RandomCrop:
    """torchvision.transforms.RandomCrop(size, padding, pad_if_needed, fill, padding_mode)."""

    def __init__(self, size, padding=None, pad_if_needed=False, fill=0, padding_mode="constant"):
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.padding, self.pad_if_needed, self.fill, self.padding_mode = padding, pad_if_needed, fill, padding_mode

    @staticmethod
    def get_params(img, output_size):
        h, w = img.shape[-2:]
        th, tw = output_size
        if h < th or w < tw:
            raise ValueError(f"Required crop size {(th, tw)} is larger than input image size {(h, w)}")
        if w == tw and h == th:
            return 0, 0, h, w
        i = torch.randint(0, h - th + 1, size=(1,)).item()
        j = torch.randint(0, w - tw + 1, size=(1,)).item()
        return i, j, th, tw

    def __call__(self, img):
        if self.padding is not None:
            img = pad(img, self.padding, self.fill, self.padding_mode)
        height, width = img.shape[-2:]
        if self.pad_if_needed and width < self.size[1]:
            img = pad(img, [self.size[1] - width, 0], self.fill, self.padding_mode)
        height, width = img.shape[-2:]
        if self.pad_if_needed and height < self.size[0]:
            img = pad(img, [0, self.size[0] - height], self.fill, self.padding_mode)
        i, j, h, w = self.get_params(img, self.size)
        return img[..., i:i + h, j:j + w]


class RandomHorizontalFlip:
    """torchvision.transforms.RandomHorizontalFlip(p)."""

    def __init__(self, p=0.5):
        self.p = p

    def __call__(self, img):
        if torch.rand(1) < self.p:
            return img.flip(-1)
        return img


class RandomErasing:
    """torchvision.transforms.RandomErasing(p, scale, ratio, value) (value: a number, a list, or "random")."""

    def __init__(self, p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0):
        self.p, self.scale, self.ratio, self.value = p, scale, ratio, value

    @staticmethod
    def get_params(img, scale, ratio, value=None):
        img_c, img_h, img_w = img.shape[-3], img.shape[-2], img.shape[-1]
        area = img_h * img_w
        log_ratio = torch.log(torch.tensor(ratio))
        for _ in range(10):
            erase_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
            aspect_ratio = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
            h = int(round(math.sqrt(erase_area * aspect_ratio)))
            w = int(round(math.sqrt(erase_area / aspect_ratio)))
            if not (h < img_h and w < img_w):
                continue
            if value is None:
                v = torch.empty([img_c, h, w], dtype=torch.float32).normal_()
            else:
                v = torch.tensor(value)[:, None, None]
            i = torch.randint(0, img_h - h + 1, size=(1,)).item()
            j = torch.randint(0, img_w - w + 1, size=(1,)).item()
            return i, j, h, w, v
        return 0, 0, img_h, img_w, img

    def __call__(self, img):
        if torch.rand(1) < self.p:
            if isinstance(self.value, (int, float)):
                value = [float(self.value)]
            elif isinstance(self.value, str):
                value = None
            else:
                value = [float(v) for v in self.value]
            i, j, h, w, v = self.get_params(img, scale=self.scale, ratio=self.ratio, value=value)
            img = img.clone()
            img[..., i:i + h, j:j + w] = v
        return img


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img


# --- the run ---------------------------------------------------------------------------------------

class AugmentedImages(Dataset):
    """images [N, 1, 28, 28] and labels [N]; each sample through `transform`, as a torchvision dataset."""

    def __init__(self, images, labels, transform=None):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, index):
        image = self.images[index]
        return (self.transform(image) if self.transform else image), self.labels[index]


def conv_block(c_in, c_out):
    return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]


def make_model(args):
    return nn.Sequential(*conv_block(1, 32), *conv_block(32, 32), nn.MaxPool2d(2),
                         *conv_block(32, 64), *conv_block(64, 64), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Dropout(args.dropout), nn.Linear(64 * 7 * 7, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3, help="OneCycleLR's max_lr")
    parser.add_argument("--weight-decay", type=float, default=0.05)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=0)
    parser.add_argument("--autocast", choices=["none", "bf16"], default="none",
                        help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    parser.add_argument("--matmul-precision", choices=["highest", "high", "medium"], default="highest",
                        help="torch.set_float32_matmul_precision (PyTorch 1.13 uses it on CUDA only)")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader worker processes (0: augment in the "
                        "training process, as the C++ program's transforms share its threads)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_float32_matmul_precision(args.matmul_precision)
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16")  # noqa: E731
    run_start = time.perf_counter()

    train_images, train_labels = read_split(args.data, "train")
    test_images, test_labels = read_split(args.data, "t10k")
    if args.limit > 0:
        train_images, train_labels = train_images[:args.limit], train_labels[:args.limit]
    mean, std = train_images.mean().item() / 255, train_images.std().item() / 255
    train_images = ((train_images - 255 * mean) / (255 * std)).unsqueeze(1)
    test_images = ((test_images - 255 * mean) / (255 * std)).unsqueeze(1)
    load_seconds = time.perf_counter() - run_start

    # Standardised up front, so the crop's padding is the standardised black: torchvision's
    # ToTensor → RandomCrop(fill=0) → Normalize pads with exactly that value.
    black = -mean / std
    augment = Compose([RandomCrop(28, padding=2, fill=black), RandomHorizontalFlip()])

    torch.manual_seed(args.seed)
    shuffle_generator = torch.Generator().manual_seed(args.seed)
    test_generator = torch.Generator().manual_seed(args.seed)
    train_loader = DataLoader(AugmentedImages(train_images, train_labels, augment), batch_size=args.batch,
                              shuffle=True, generator=shuffle_generator, num_workers=args.workers)
    test_loader = DataLoader(AugmentedImages(test_images, test_labels), batch_size=1000, generator=test_generator)

    model = make_model(args)
    steps_per_epoch = len(train_loader)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    print(f"fashion_mnist --model cnn (PyTorch {torch.__version__}): {len(train_labels)} training / "
          f"{len(test_labels)} test images (mean {mean:.4f}, std {std:.4f}; read in {load_seconds:.2f} s), "
          f"{args.epochs} epochs of {steps_per_epoch} batches of {args.batch}, {torch.get_num_threads()} threads, autocast {args.autocast}",
          flush=True)

    seconds_sum = 0.0
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        loss_sum, correct, seen, data_seconds = 0.0, 0, 0, 0.0
        batches = iter(train_loader)
        while True:
            wait = time.perf_counter()
            try:
                images, labels = next(batches)
            except StopIteration:
                break
            data_seconds += time.perf_counter() - wait
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
              f"lr {optimizer.param_groups[0]['lr']:.2e}  {seen / train_seconds:.0f} samples/s  "
              f"data {data_seconds:.2f} s  {seconds:.2f} s", flush=True)
    print(f"final test accuracy {100 * test_accuracy:.2f}%; {seconds_sum / args.epochs:.2f} s per epoch (training and "
          f"evaluation) at {torch.get_num_threads()} threads, {time.perf_counter() - run_start:.2f} s in all")


if __name__ == "__main__":
    main()
