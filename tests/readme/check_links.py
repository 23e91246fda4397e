#!/usr/bin/python3
"""Checks every relative link of the repository's Markdown pages: the file it names must exist, and
an anchor (#section) must be a heading of that page, slugged as GitHub slugs headings.

    check_links.py <repository root>

Prints each broken link as `page:line: target (why)` and exits with 1 if there is any. Links in
code blocks and links to other sites (http:, https:, mailto:) are not checked.
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_code(path):
    """(line number, text) of the lines of a Markdown file that are not inside ``` fences."""
    fenced = False
    with open(path, encoding="utf-8") as page:
        for number, line in enumerate(page, 1):
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def anchors(path):
    seen = {}
    result = set()
    for _, line in lines_outside_code(path):
        match = re.match(r"#{1,6} (.*)", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def markdown_files(root):
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
                            cwd=root, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return [os.path.join(root, name) for name in listed.stdout.split()]
    return [os.path.join(folder, name) for folder, _, names in os.walk(root)
            if "/build" not in folder and "/.git" not in folder for name in names if name.endswith(".md")]


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = markdown_files(root)
    anchor_cache = {}
    broken = 0
    for page in pages:
        for number, line in lines_outside_code(page):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                linked = os.path.normpath(os.path.join(os.path.dirname(page), file_part)) if file_part else page
                where = f"{os.path.relpath(page, root)}:{number}: {target}"
                if not os.path.exists(linked):
                    print(f"{where} (no such file)")
                    broken += 1
                elif anchor and linked.endswith(".md"):
                    if linked not in anchor_cache:
                        anchor_cache[linked] = anchors(linked)
                    if anchor not in anchor_cache[linked]:
                        print(f"{where} (no heading with that anchor)")
                        broken += 1
    print(f"{len(pages)} pages checked, {broken} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
