#!/usr/bin/env python3
"""The example corpus of `reprorun reproduce`: assembling it (build.sh) and checking it (verify.sh).

    corpus.py assemble OUT PYTHON REPRORUN
        After build.sh has written OUT/repo, OUT/wheels and the mirrors: computes the values
        the hash-order and random tests assert (by running the patched code the way the
        benchmark did, under reprorun's shim), and writes OUT/instances.jsonl,
        OUT/predictions.jsonl and OUT/expected.json. Every instance is then run once under
        the shim and must be resolved.
    corpus.py verify OUT [--shim K] [--no-shim K] [--tz ZONE] [--only NAME]... [--pins]
        Emulates both arms of `reprorun reproduce` with `reprorun exec` (REPRORUN, else
        `reprorun` in PATH) and prints a table of what each instance did; --pins adds one
        run of the shim without each pin (clock, hash_seed, random, env, mirror).

Only the standard library; git and patch must be in PATH.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = os.path.join(HERE, "corpus.json")

# Git sees neither the caller's configuration nor a surrounding repository.
GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "reprorun corpus",
    "GIT_AUTHOR_EMAIL": "corpus@reprorun.invalid",
    "GIT_COMMITTER_NAME": "reprorun corpus",
    "GIT_COMMITTER_EMAIL": "corpus@reprorun.invalid",
    "GIT_AUTHOR_DATE": "2023-01-01T00:00:00+00:00",
    "GIT_COMMITTER_DATE": "2023-01-01T00:00:00+00:00",
}
for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY"):
    os.environ.pop(var, None)
os.environ.update(GIT_ENV)

# The fallbacks `reprorun reproduce` tries, in order, for a model patch.
APPLY_METHODS = [
    ("git apply", ["git", "apply", "-v"]),
    ("git apply --3way", ["git", "apply", "-v", "--3way"]),
    ("git apply --reject", ["git", "apply", "-v", "--reject"]),
    ("patch --fuzz=5", ["patch", "--batch", "--fuzz=5", "-p1"]),
]

RESULT_LINE = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")


def die(msg):
    sys.exit(f"corpus.py: {msg}")


def run(cmd, cwd=None, input=None, env=None, check=True):
    p = subprocess.run(cmd, cwd=cwd, input=input, env=env, capture_output=True, text=True)
    if check and p.returncode != 0:
        die(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}")
    return p


def git(tree, *args, **kw):
    return run(["git", *args], cwd=tree, **kw)


def checkout(repo, commit, dest):
    """A fresh clone of repo at commit (detached), as the pipeline makes one."""
    run(["git", "clone", "-q", "--no-checkout", repo, dest])
    git(dest, "checkout", "-q", "--detach", commit)
    return dest


def apply_patch(tree, text, methods=APPLY_METHODS):
    """Applies text with the first method that works; returns its name. Between attempts the
    tree goes back to its committed state, so a failed attempt leaves nothing behind."""
    for name, cmd in methods:
        p = run(cmd, cwd=tree, input=text, check=False)
        if p.returncode == 0:
            return name
        git(tree, "reset", "-q", "--hard")
        git(tree, "clean", "-q", "-fd")
    return None


def commit_all(tree, msg):
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "--allow-empty", "-m", msg)


def patched_tree(repo, inst, model_patch, test_patch, dest):
    """base + model_patch (+ test_patch), as the pipeline builds it. Returns the model
    patch's apply method."""
    checkout(repo, inst["base_commit"], dest)
    method = apply_patch(dest, model_patch) if model_patch is not None else "(none)"
    if method is None:
        return None
    commit_all(dest, "model patch")
    if test_patch is not None and apply_patch(dest, test_patch, APPLY_METHODS[:1]) is None:
        die(f"{inst['instance_id']}: the test patch does not apply with git apply")
    return method


def diff_of(tree):
    """The working tree against HEAD as git diff prints it, new files included."""
    git(tree, "add", "-A", "-N")
    return git(tree, "diff", "--no-color", "--no-ext-diff").stdout


# -- probes: what the benchmark's run saw ---------------------------------------------------

PROBES = {
    # Set order depends on PYTHONHASHSEED (0 under the shim) and the interpreter.
    "categories": (
        "tests/test_inventory.py",
        "print(json.dumps(mod.make_catalog().categories()))",
    ),
    # The global `random` is seeded when it is first imported, from getrandom(): under the
    # shim the first bytes of this process's seeded stream, which depends on the seed and on
    # the process's pid in the sandbox (3: /bin/sh -c is 2 and forks python). Nothing else in
    # the test run draws from the global generator before this test.
    "featured": (
        "tests/test_featured.py",
        "print(json.dumps([item.sku for item in mod.make_storefront().featured(3)]))",
    ),
}

PROBE_TEMPLATE = """\
import importlib.util, json, sys
sys.path.insert(0, "/work")
spec = importlib.util.spec_from_file_location("probe_target", "/work/{path}")
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
{body}
"""


def shim_cmd(reprorun, out, inst, tree, command):
    """`reprorun exec` with the shim arm's conditions (reprorun's defaults)."""
    return [reprorun, "exec", "--date", inst["created_at"],
            "--mirror", os.path.join(out, inst["mirror"]),
            "--workdir", tree, "--", "/bin/sh", "-c", command]


def run_probe(reprorun, out, py, inst, kind, tree):
    path, body = PROBES[kind]
    with open(os.path.join(tree, ".corpus-probe.py"), "w") as f:
        f.write(PROBE_TEMPLATE.format(path=path, body=body))
    # The probe runs exactly where the test command runs: /bin/sh -c, then python as the
    # sandbox's pid 3.
    values = set()
    for _ in range(2):
        p = run(shim_cmd(reprorun, out, inst, tree, f"{py} /work/.corpus-probe.py"))
        values.add(p.stdout.strip())
    os.unlink(os.path.join(tree, ".corpus-probe.py"))
    if len(values) != 1:
        die(f"{inst['instance_id']}: probe {kind} is not stable under the shim: {values}")
    return json.loads(values.pop())


# -- assemble -------------------------------------------------------------------------------

def collected_tests(py, tree):
    p = run([py, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", "tests"],
            cwd=tree, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "PYTHONHASHSEED": "0",
                           "PYTHONDONTWRITEBYTECODE": "1"})
    return [line for line in p.stdout.splitlines() if "::" in line]


def assemble(out, py, reprorun):
    spec = json.load(open(SPEC))
    repo = os.path.join(out, "repo")
    instances, predictions, expected = [], [], []
    work = tempfile.mkdtemp(prefix="corpus-")
    try:
        for n, s in enumerate(spec["instances"]):
            name = s["name"]
            base_commit = git(repo, "rev-parse", f"refs/tags/{s['base']}^{{commit}}").stdout.strip()
            inst = {
                "instance_id": f"corpus-shelf__{name}",
                "repo": spec["repo"],
                "base_commit": base_commit,
                "created_at": s["created_at"],
                "mirror": spec["mirror"],
            }
            model_patch = open(os.path.join(HERE, "patches", name, "model.diff")).read()
            test_patch = open(os.path.join(HERE, "patches", name, "test.diff")).read()
            p2p = spec["p2p_by_base"][s["base"]]

            # PASS_TO_PASS is exactly what the base commit's suite collects.
            tree = checkout(repo, base_commit, os.path.join(work, f"{n}-base"))
            got = collected_tests(py, tree)
            if sorted(got) != sorted(p2p):
                die(f"{name}: tests at {s['base']} are {got}, corpus.json says {p2p}")

            if "probe" in s:
                placeholder = s["probe"]["placeholder"]
                if test_patch.count(placeholder) != 1:
                    die(f"{name}: {placeholder} must occur once in test.diff")
                tree = os.path.join(work, f"{n}-probe")
                patched_tree(repo, inst, model_patch, test_patch.replace(placeholder, "None"), tree)
                value = run_probe(reprorun, out, py, inst, s["probe"]["kind"], tree)
                # Write the value in, then let git print the patch again (index lines right).
                tree = checkout(repo, base_commit, os.path.join(work, f"{n}-test"))
                substituted = test_patch.replace(placeholder, json.dumps(value))
                if apply_patch(tree, substituted, APPLY_METHODS[:1]) is None:
                    die(f"{name}: the substituted test patch does not apply")
                test_patch = diff_of(tree)
                s = dict(s, probed_value=value)

            # The model patch applies, and with the method the corpus means it to need.
            tree = os.path.join(work, f"{n}-check")
            method = patched_tree(repo, inst, model_patch, test_patch, tree)
            want = s.get("model_patch_needs", "git apply")
            if method is None or not want.startswith(method.split(" --fuzz")[0]):
                die(f"{name}: model patch applied with {method!r}, expected {want!r}")

            test_cmd = s.get("test_cmd", spec["test_cmd"]).format(python=py)
            record = {
                "instance_id": inst["instance_id"],
                "repo": spec["repo"],
                "base_commit": base_commit,
                "problem_statement": s["problem_statement"],
                "test_patch": test_patch,
                "FAIL_TO_PASS": s["FAIL_TO_PASS"],
                "PASS_TO_PASS": p2p,
                "created_at": s["created_at"],
                "version": "0.2" if s["base"] >= "04" else "0.1",
                "repo_path": "repo",
                "test_cmd": test_cmd,
                "mirror": spec["mirror"],
                "recorded_resolved": True,
            }
            instances.append(record)
            predictions.append({
                "instance_id": inst["instance_id"],
                "model_name_or_path": spec["model_name_or_path"],
                "model_patch": model_patch,
            })
            exp = {
                "instance_id": inst["instance_id"],
                "mode": s["mode"],
                "shim": "resolved",
                "no_shim": s["no_shim"],
                "model_patch_applies_with": method,
            }
            if "no_shim_needs" in s:
                exp["no_shim_needs"] = s["no_shim_needs"]
            exp["unresolved_without_pins"] = s["pins"]
            if "probed_value" in s:
                exp["asserted_value"] = s["probed_value"]
            expected.append(exp)

        write_jsonl(os.path.join(out, "instances.jsonl"), instances)
        write_jsonl(os.path.join(out, "predictions.jsonl"), predictions)
        with open(os.path.join(out, "expected.json"), "w") as f:
            json.dump(expected, f, indent=2)
            f.write("\n")

        if os.environ.get("CORPUS_NO_CHECK") != "1":
            # Every instance must be resolved under the shim, here and now.
            for n, (inst, pred) in enumerate(zip(instances, predictions)):
                res = run_instance(out, reprorun, inst, pred, ["shim"], 1,
                                   os.path.join(work, f"{n}-self"))
                if res["shim"][0]["resolved"] is not True:
                    die(f"{inst['instance_id']}: not resolved under the shim:\n"
                        f"{res['shim'][0]['log']}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# -- verify ---------------------------------------------------------------------------------

# shim_without_PIN: the shim with one pin swapped for its no-shim value.
WITHOUT = {
    "clock": [],  # --date now, in place of the date
    "hash_seed": ["--env", "PYTHONHASHSEED=random"],
    "random": ["--random", "real"],
    "env": ["--env", "TZ={tz}"],
    "mirror": [],
}


def arm_cmd(arm, reprorun, out, inst, tree, tz):
    if arm in ("shim", "baseline_shim"):
        return shim_cmd(reprorun, out, inst, tree, inst["test_cmd"]), None
    if arm.startswith("shim_without_"):
        pin = arm[len("shim_without_"):]
        cmd = shim_cmd(reprorun, out, inst, tree, inst["test_cmd"])
        if pin == "mirror":
            cmd[cmd.index("--mirror") + 1] = os.path.join(out, "mirror-live")
        if pin == "clock":
            cmd[cmd.index("--date") + 1] = "now"
            return cmd, None
        extra = [a.format(tz=tz) for a in WITHOUT[pin]]
        return cmd[:2] + extra + cmd[2:], None
    # no_shim, emulated: real clock, real entropy, random hash seed, the caller's TZ, the live
    # index.
    env = dict(os.environ, TZ=tz)
    cmd = [reprorun, "exec", "--date", "now", "--random", "real",
           "--env", "PYTHONHASHSEED=random", "--env", f"TZ={tz}",
           "--mirror", os.path.join(out, "mirror-live"),
           "--workdir", tree, "--", "/bin/sh", "-c", inst["test_cmd"]]
    return cmd, env


def outcome(inst, log):
    status = {}
    for line in log.splitlines():
        m = RESULT_LINE.match(line)
        if m:
            status[m.group(2)] = m.group(1)
    wanted = inst["FAIL_TO_PASS"] + inst["PASS_TO_PASS"]
    failed = [t for t in wanted if status.get(t) != "PASSED"]
    return not failed, failed


def run_instance(out, reprorun, inst, pred, arms, k, work, tz="Asia/Tokyo"):
    """Runs the given arms k times each; each run gets a fresh copy of the patched tree."""
    repo = os.path.join(out, inst["repo_path"])
    os.makedirs(work, exist_ok=True)
    trees = {}
    result = {"method": None}
    for arm in arms:
        baseline = arm.startswith("baseline")
        if baseline not in trees:
            dest = os.path.join(work, "baseline" if baseline else "patched")
            method = patched_tree(repo, inst, None if baseline else pred["model_patch"],
                                  inst["test_patch"], dest)
            if not baseline:
                result["method"] = method
            trees[baseline] = dest
        runs = []
        for i in range(k):
            tree = os.path.join(work, f"run-{arm}-{i}")
            shutil.copytree(trees[baseline], tree, symlinks=True)
            cmd, env = arm_cmd(arm, reprorun, out, inst, tree, tz)
            t0 = time.monotonic()
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            wall = time.monotonic() - t0
            log = p.stdout + p.stderr
            ok, failed = outcome(inst, log)
            runs.append({"resolved": ok, "failed": failed, "rc": p.returncode,
                         "wall_s": round(wall, 2), "log": log})
            shutil.rmtree(tree, ignore_errors=True)
        result[arm] = runs
    return result


def verify(out, k_shim, k_no, tz, only, pins):
    reprorun = os.environ.get("REPRORUN") or shutil.which("reprorun") or die("no reprorun")
    out = os.path.abspath(out)
    instances = [json.loads(l) for l in open(os.path.join(out, "instances.jsonl"))]
    predictions = {p["instance_id"]: p for p in
                   (json.loads(l) for l in open(os.path.join(out, "predictions.jsonl")))}
    rows = []
    bad = 0
    expected = {e["instance_id"]: e for e in json.load(open(os.path.join(out, "expected.json")))}
    work = tempfile.mkdtemp(prefix="corpus-verify-")
    try:
        for inst in instances:
            if only and not any(inst["instance_id"].endswith(o) for o in only):
                continue
            iid = inst["instance_id"]
            plan = [("shim", k_shim), ("no_shim", k_no), ("baseline_shim", 1)]
            res = {}
            for arm, k in plan:
                r = run_instance(out, reprorun, inst, predictions[iid], [arm], k,
                                 os.path.join(work, iid, arm), tz)
                res[arm] = r[arm]
                res["method"] = res.get("method") or r["method"]
            n_shim = sum(r["resolved"] for r in res["shim"])
            n_no = sum(r["resolved"] for r in res["no_shim"])
            n_base = sum(r["resolved"] for r in res["baseline_shim"])
            exp = expected[iid]
            fails = sorted({t.split("::")[1] for r in res["no_shim"] for t in r["failed"]})
            changed = []
            if pins:
                # Which single pin, left out, makes the patch unresolved (one run each).
                for pin in WITHOUT:
                    arm = f"shim_without_{pin}"
                    r = run_instance(out, reprorun, inst, predictions[iid], [arm], 1,
                                     os.path.join(work, iid, arm), tz)
                    if not r[arm][0]["resolved"]:
                        changed.append(pin)
            ok = n_shim == k_shim and n_base == 0
            want_no, want_pins = exp["no_shim"], exp["unresolved_without_pins"]
            if "no_shim_needs" in exp and tz in ("UTC", "Etc/UTC", "UTC0", ":UTC"):
                # locale-tz: only a caller whose TZ is not UTC makes it fail.
                want_no, want_pins = "resolved", [p for p in want_pins if p != "env"]
            if pins and changed != want_pins:
                ok = False
            if want_no == "unresolved":
                ok = ok and n_no <= k_no // 2
            elif want_no == "resolved":
                ok = ok and n_no == k_no
            bad += not ok
            walls = [r["wall_s"] for a in ("shim", "no_shim") for r in res[a]]
            rows.append((iid.split("__")[1], res["method"], f"{n_shim}/{k_shim}",
                         f"{n_no}/{k_no}", f"{n_base}/1", ", ".join(fails) or "-",
                         f"{min(walls):.2f}-{max(walls):.2f}", "ok" if ok else "UNEXPECTED")
                        + ((", ".join(changed) or "none",) if pins else ()))
            if not ok:
                for arm in ("shim", "no_shim", "baseline_shim"):
                    for r in res[arm]:
                        print(f"--- {iid} {arm} rc={r['rc']} failed={r['failed']}\n{r['log'][-3000:]}",
                              file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    head = ("instance", "model patch applied with", "shim resolved", "no-shim resolved",
            "baseline (shim)", "no-shim failing tests", "run wall s", "verdict")
    if pins:
        head += ("unresolved without pin",)
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"(no-shim emulated with TZ={tz}, --date now, --random real, PYTHONHASHSEED=random, "
          f"mirror-live)")
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 5 and argv[1] == "assemble":
        assemble(os.path.abspath(argv[2]), argv[3], argv[4])
        return 0
    if len(argv) >= 3 and argv[1] == "verify":
        import argparse
        ap = argparse.ArgumentParser(prog="corpus.py verify")
        ap.add_argument("out")
        ap.add_argument("--shim", type=int, default=3)
        ap.add_argument("--no-shim", type=int, default=5)
        ap.add_argument("--tz", default="Asia/Tokyo")
        ap.add_argument("--only", action="append", default=[])
        ap.add_argument("--pins", action="store_true",
                        help="also run the shim without each pin once (leave-one-out)")
        a = ap.parse_args(argv[2:])
        return verify(a.out, a.shim, a.no_shim, a.tz, a.only, a.pins)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
