#!/usr/bin/env python3
"""Deterministic rewrite of one branch of a git repository for the real audit corpus.

    rewrite.py GIT_DIR REF NEW_REF [MAX_BYTES]

Rebuilds every commit reachable from REF (parents first) into NEW_REF, inside GIT_DIR:
a blob larger than its limit or absent from the clone (a partial or size-limited
snapshot) is replaced by a short text placeholder naming its path, size and original id.
Limits: source and configuration files (by suffix) and requirements, setup and README files
of any suffix: 1 MiB (the auditor reads them); other .md and .txt files: 64 KiB (papers'
data lists are .txt); anything else (images, notebooks, archives, data): MAX_BYTES (default
16384). A commit whose tree and parents are unchanged keeps its original id, so
histories without large or missing files keep their real commit ids; a rewritten commit
keeps its author, committer, dates and message (signatures are dropped). The same input
gives the same output on every machine. Needs git and Python 3 only.
"""
import os
import subprocess
import sys


# Source and configuration files are kept up to 1 MiB: the auditor reads them.
SOURCE_SUFFIXES = (".py", ".sh", ".yaml", ".yml", ".toml", ".cfg", ".ini")
SOURCE_NAMES = ("requirements", "setup", "readme", "environment", "pyproject")
SOURCE_LIMIT = 1 << 20
# Other text (documentation, data lists): 64 KiB.
TEXT_SUFFIXES = (".md", ".txt", ".rst")
TEXT_LIMIT = 64 << 10


def limit_of(path, limit):
    """The largest blob kept at PATH."""
    base = path.rsplit("/", 1)[-1].lower()
    if path.endswith(SOURCE_SUFFIXES) or base.startswith(SOURCE_NAMES):
        return SOURCE_LIMIT
    if base.endswith(TEXT_SUFFIXES):
        return TEXT_LIMIT
    return limit


def git(gd, *args, input=None, env=None):
    r = subprocess.run(["git", "--git-dir", gd, *args], input=input, capture_output=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"rewrite.py: git {' '.join(args)}: {r.stderr.decode(errors='replace').strip()}")
    return r.stdout


def main():
    if len(sys.argv) not in (4, 5):
        raise SystemExit(__doc__)
    gd, ref, new_ref = sys.argv[1:4]
    limit = int(sys.argv[4]) if len(sys.argv) == 5 else 16384
    sizes = {}
    # One batch-check of every object the branch names; a missing object prints "missing".
    objs = git(gd, "rev-list", "--objects", "--missing=print", ref).decode().split("\n")
    ids = [o.split(" ", 1)[0].lstrip("?") for o in objs if o]
    out = git(gd, "cat-file", "--batch-check=%(objectname) %(objecttype) %(objectsize)",
              input=("\n".join(ids) + "\n").encode()).decode()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3:
            sizes[parts[0]] = (parts[1], int(parts[2]))
        elif len(parts) == 2 and parts[1] == "missing":
            sizes[parts[0]] = ("missing", -1)
    trees = {}
    stripped = []

    def placeholder(path, sha, size):
        what = "absent from the clone" if size < 0 else f"{size} bytes"
        text = (f"reprorun audit-real: file stripped from this corpus ({what}); "
                f"path {path}, original blob {sha}\n")
        return git(gd, "hash-object", "-w", "--stdin", input=text.encode()).decode().strip()

    def tree(sha, prefix):
        key = (sha, prefix)
        if key in trees:
            return trees[key]
        entries = git(gd, "ls-tree", "-z", sha).split(b"\0")
        lines = []
        for e in entries:
            if not e:
                continue
            meta, name = e.split(b"\t", 1)
            mode, typ, obj = meta.decode().split(" ")
            path = prefix + name.decode(errors="replace")
            if typ == "tree":
                obj = tree(obj, path + "/")
            elif typ == "blob":
                kind, size = sizes.get(obj, ("missing", -1))
                lim = limit_of(path, limit)
                if kind == "missing" or size > lim:
                    stripped.append(f"{path}\t{obj}\t{size}")
                    obj = placeholder(path, obj, size)
            lines.append(f"{mode} {typ} {obj}\t".encode() + name)
        new = git(gd, "mktree", "-z", input=b"\0".join(lines) + b"\0").decode().strip()
        trees[key] = new
        return new

    commits = git(gd, "rev-list", "--topo-order", "--reverse", ref).decode().split()
    mapped = {}
    for c in commits:
        raw = git(gd, "cat-file", "commit", c)
        head, _, msg = raw.partition(b"\n\n")
        hdr = {}
        parents = []
        for line in head.split(b"\n"):
            k, _, v = line.partition(b" ")
            if k == b"parent":
                parents.append(v.decode())
            elif k in (b"tree", b"author", b"committer") and k not in hdr:
                hdr[k] = v.decode(errors="replace")
        new_tree = tree(hdr[b"tree"], "")
        new_parents = [mapped[p] for p in parents]
        if new_tree == hdr[b"tree"] and new_parents == parents:
            mapped[c] = c
            continue
        env = dict(os.environ)
        for who, key in (("AUTHOR", b"author"), ("COMMITTER", b"committer")):
            ident = hdr[key]
            name_email, _, date = ident.rpartition("> ")
            name, _, email = name_email.partition(" <")
            env[f"GIT_{who}_NAME"] = name
            env[f"GIT_{who}_EMAIL"] = email
            env[f"GIT_{who}_DATE"] = date
        args = ["commit-tree", new_tree]
        for p in new_parents:
            args += ["-p", p]
        mapped[c] = git(gd, *args, input=msg, env=env).decode().strip()
    git(gd, "update-ref", new_ref, mapped[commits[-1]])
    for s in sorted(set(stripped)):
        print(s)


if __name__ == "__main__":
    main()
