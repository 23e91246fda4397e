"""Runs docs/guide/own-data.md ("Training on your own data"): its C++ program (CSV in, a safetensors checkpoint
out), then its Python snippet on that checkpoint, with Debian's /usr/bin/python3 and NumPy, in a
directory of their own. Fails unless both succeed and print the same lines: the probabilities the
model gives one input (to float32 precision: NumPy sums the products in another order) and the
accuracy on the whole CSV (allowing one of the 600 points to fall on the other side).

    own_data_test.py <program> <snippet.py> <work dir>
"""
import os
import re
import subprocess
import sys


def run(command, directory):
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    print(f"$ {' '.join(command)}\n{result.stdout}{result.stderr}")
    if result.returncode != 0:
        sys.exit(f"{command[-1]} exited with {result.returncode}")
    return result.stdout


def numbers_after(label, output):
    match = re.search(re.escape(label) + r"(.*)", output)
    if match is None:
        sys.exit(f"no line '{label}' in:\n{output}")
    return [float(word) for word in match.group(1).split()]


def main():
    program, snippet, directory = (os.path.abspath(path) for path in sys.argv[1:4])
    os.makedirs(directory, exist_ok=True)
    for stale in ("flowers.csv", "flowers.safetensors"):
        if os.path.exists(os.path.join(directory, stale)):
            os.remove(os.path.join(directory, stale))
    cpp = run([program], directory)
    python = run([sys.executable, snippet], directory)

    label = "probabilities at (0.3, -0.2):"
    expected, actual = numbers_after(label, cpp), numbers_after(label, python)
    if len(expected) != 2 or len(actual) != 2:
        sys.exit(f"expected two probabilities, got {expected} and {actual}")
    for e, a in zip(expected, actual):
        if abs(e - a) > 1e-5 * max(abs(e), 1e-3) + 1e-6:
            sys.exit(f"{label} C++ printed {expected}, NumPy computed {actual}")
    label = "accuracy on flowers.csv:"
    (expected,), (actual,) = numbers_after(label, cpp), numbers_after(label, python)
    if abs(expected - actual) > 1.5 / 600:
        sys.exit(f"{label} C++ printed {expected}, NumPy computed {actual}")
    print("the Python snippet reads back what the C++ program trained")


if __name__ == "__main__":
    main()
