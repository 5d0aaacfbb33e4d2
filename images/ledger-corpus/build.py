#!/usr/bin/env python3
"""The ledger corpus of `reprorun reproduce ledger` (README.md beside this script).

    build.py OUT [--reprorun PATH] [--python PATH]

Writes OUT/{py,js,go} (one git repository each, fixed dates: the same hashes everywhere),
OUT/instances.jsonl, OUT/predictions.jsonl and OUT/expected.json. The seedless-random tests
assert the draw the benchmark's run saw: build.py runs each instance's test command once
under reprorun's shim (`reprorun exec`, the shim arm's conditions) to read it, twice to check
that it is stable. Needs git, python3 with pytest (Debian's python3-pytest), node >= 20, go
and reprorun ($REPRORUN, else --reprorun, else `reprorun` in PATH).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

CREATED_AT = "2023-05-10T12:00:00Z"
# The time bombs: each language's licence check fails from this day on.
BOMB_DAY = "2031-03-15"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "reprorun corpus",
    "GIT_AUTHOR_EMAIL": "corpus@reprorun.invalid",
    "GIT_COMMITTER_NAME": "reprorun corpus",
    "GIT_COMMITTER_EMAIL": "corpus@reprorun.invalid",
    "GIT_AUTHOR_DATE": "2023-05-01T09:00:00Z",
    "GIT_COMMITTER_DATE": "2023-05-01T09:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
TAGS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def die(msg):
    sys.exit(f"ledger-corpus: {msg}")


def run(cmd, **kw):
    """`cmd`'s output, whatever its status (a probe's tests may fail: they print first)."""
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def git(repo, *args):
    env = dict(os.environ, **GIT_ENV)
    p = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        die(f"git {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


# -- the three projects ---------------------------------------------------------------------
# Each: its files at the base commit (`add` subtracts), the model patch's file (`add` fixed),
# the test file the test patch adds, and per test id what it depends on (`expected.json`).

PY_LIB = '''"""ledgerpy: one function per way a test can depend on its environment."""
import datetime
import locale
import os
import random
import time


def add(a, b):
    return a - b


def licence_valid():
    """The bundled licence expires on BOMB_DAY."""
    return datetime.date.today() < datetime.date(BOMB_Y, BOMB_M, BOMB_D)


def epoch_hour():
    return time.localtime(0).tm_hour


def tags():
    return list({TAGS})


def decimal_point():
    locale.setlocale(locale.LC_ALL, "")
    return locale.localeconv()["decimal_point"]


def token():
    return random.getrandbits(32)


def workers():
    return len(os.sched_getaffinity(0))


def listing(path):
    os.makedirs(path, exist_ok=True)
    for name in ["b", "a", "c"]:
        open(os.path.join(path, name), "w").close()
    return os.listdir(path)
'''

PY_TESTS = '''import os

import ledgerpy

# The first draw of the process, whichever tests run (module import, at collection).
TOKEN = ledgerpy.token()


def test_add():
    assert ledgerpy.add(2, 3) == 5


def test_licence():
    assert ledgerpy.licence_valid()


def test_epoch_hour():
    assert ledgerpy.epoch_hour() == 0


def test_tags():
    assert ledgerpy.tags() == @@TAGS@@


def test_decimal_point():
    assert ledgerpy.decimal_point() == "."


def test_token():
    t = TOKEN
    if os.environ.get("LEDGER_PROBE"):
        print(f"PROBE token={t}")
    assert t == @@TOKEN@@


def test_workers():
    assert ledgerpy.workers() == 1


def test_listing():
    assert ledgerpy.listing("made") == ["a", "b", "c"]
'''

JS_LIB = '''"use strict";
// tablefmt-like helpers, one per way a test can depend on its environment.
const fs = require("node:fs");
const path = require("node:path");

exports.add = (a, b) => a - b;
exports.licenceValid = () => new Date() < new Date("BOMB_DAYT00:00:00Z");
exports.epochHour = () => new Date(0).getHours();
exports.price = (x) => x.toLocaleString();
exports.token = () => Math.floor(Math.random() * 4294967296);
exports.workers = () => require("node:os").availableParallelism();
exports.listing = (dir) => {
  fs.mkdirSync(dir, { recursive: true });
  for (const n of ["b", "a", "c"]) fs.writeFileSync(path.join(dir, n), "");
  // The directory's own order (readdirSync sorts: libuv's scandir uses alphasort).
  const d = fs.opendirSync(dir);
  const names = [];
  for (let e = d.readSync(); e !== null; e = d.readSync()) names.push(e.name);
  d.closeSync();
  return names;
};
'''

JS_TESTS = '''"use strict";
const test = require("node:test");
const assert = require("node:assert");
const lib = require("../lib");
// The first draw of the process, whichever tests run or fail before the one that checks it.
const TOKEN = lib.token();

test("adds", () => assert.strictEqual(lib.add(2, 3), 5));
test("licence is valid", () => assert.ok(lib.licenceValid()));
test("epoch hour is midnight", () => assert.strictEqual(lib.epochHour(), 0));
test("prices use a decimal point", () => assert.strictEqual(lib.price(1234.5), "1,234.5"));
test("token matches the snapshot", () => {
  const t = TOKEN;
  if (process.env.LEDGER_PROBE) console.log(`PROBE token=${t}`);
  assert.strictEqual(t, @@TOKEN@@);
});
test("one worker", () => assert.strictEqual(lib.workers(), 1));
test("listing is sorted", () => assert.deepStrictEqual(lib.listing("made"), ["a", "b", "c"]));
'''

GO_LIB = '''// Package ledgergo has one function per way a test can depend on its environment.
package ledgergo

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"runtime"
	"strings"
	"time"
)

func Add(a, b int) int { return a - b }

// LicenceValid: the bundled licence expires on BOMB_DAY.
func LicenceValid() bool {
	return time.Now().Before(time.Date(BOMB_Y, BOMB_M, BOMB_D, 0, 0, 0, 0, time.UTC))
}

func EpochHour() int { return time.Unix(0, 0).Local().Hour() }

// DecimalPoint follows the POSIX locale variables, as CLI tools do.
func DecimalPoint() string {
	lang := ""
	for _, k := range []string{"LC_ALL", "LC_NUMERIC", "LANG"} {
		if v := os.Getenv(k); v != "" {
			lang = v
			break
		}
	}
	for _, p := range []string{"de", "fr", "it", "es", "nl", "pt", "ru", "sv", "da", "fi", "pl"} {
		if strings.HasPrefix(lang, p+"_") {
			return ","
		}
	}
	return "."
}

func Token() uint32 {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return binary.LittleEndian.Uint32(b[:])
}

func Workers() int { return runtime.NumCPU() }

func Listing(dir string) []string {
	_ = os.MkdirAll(dir, 0o755)
	for _, n := range []string{"b", "a", "c"} {
		_ = os.WriteFile(dir+"/"+n, nil, 0o644)
	}
	f, err := os.Open(dir)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1) // the directory's own order, as getdents gives it
	return names
}
'''

GO_TESTS = '''package ledgergo

import (
	"os"
	"reflect"
	"testing"
)

// The first draw of the process, whichever tests run.
var token = Token()

func TestAdd(t *testing.T) {
	if Add(2, 3) != 5 {
		t.Fatal("2 + 3")
	}
}

func TestLicence(t *testing.T) {
	if !LicenceValid() {
		t.Fatal("the licence expired")
	}
}

func TestEpochHour(t *testing.T) {
	if h := EpochHour(); h != 0 {
		t.Fatalf("epoch at hour %d", h)
	}
}

func TestDecimalPoint(t *testing.T) {
	if p := DecimalPoint(); p != "." {
		t.Fatalf("decimal point %q", p)
	}
}

func TestToken(t *testing.T) {
	tok := token
	if os.Getenv("LEDGER_PROBE") != "" {
		t.Logf("PROBE token=%d", tok)
	}
	if tok != @@TOKEN@@ {
		t.Fatalf("token %d", tok)
	}
}

func TestWorkers(t *testing.T) {
	if n := Workers(); n != 1 {
		t.Fatalf("%d workers", n)
	}
}

func TestListing(t *testing.T) {
	if got := Listing("made"); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("listing %v", got)
	}
}
'''


def bomb(text):
    y, m, d = BOMB_DAY.split("-")
    return (text.replace("BOMB_DAY", BOMB_DAY).replace("BOMB_Y", str(int(y)))
            .replace("BOMB_M", str(int(m))).replace("BOMB_D", str(int(d))))


def projects(py):
    """Per language: (name, files at base, lib path, fixed lib, test path, tests, cmd, ids)."""
    py_lib = bomb(PY_LIB).replace("{TAGS}", "{" + ", ".join(json.dumps(t) for t in TAGS) + "}")
    js_lib = bomb(JS_LIB)
    go_lib = bomb(GO_LIB)
    pyt = "tests/test_ledger.py::"
    return [
        {
            "name": "py",
            "files": {"ledgerpy/__init__.py": py_lib, "tests/__init__.py": "",
                      "pyproject.toml": "[project]\nname = \"ledgerpy\"\nversion = \"0.1.0\"\n"},
            "lib": "ledgerpy/__init__.py",
            "fix": ("return a - b", "return a + b"),
            "test_path": "tests/test_ledger.py",
            "tests": PY_TESTS,
            "test_cmd": f"{py} -m pytest -p no:cacheprovider -rA tests",
            "ids": {
                "stable": pyt + "test_add", "time_bomb": pyt + "test_licence",
                "timezone": pyt + "test_epoch_hour", "hash_order": pyt + "test_tags",
                "locale": pyt + "test_decimal_point", "random": pyt + "test_token",
                "cpus": pyt + "test_workers", "dir_order": pyt + "test_listing",
            },
        },
        {
            "name": "js",
            "files": {"lib.js": js_lib,
                      "package.json": "{\"name\": \"ledgerjs\", \"version\": \"0.1.0\", \"private\": true}\n"},
            "lib": "lib.js",
            "fix": ("(a, b) => a - b", "(a, b) => a + b"),
            "test_path": "test/ledger.test.js",
            "tests": JS_TESTS,
            "test_cmd": "node --test test/",
            "ids": {
                "stable": "adds", "time_bomb": "licence is valid",
                "timezone": "epoch hour is midnight", "locale": "prices use a decimal point",
                "random": "token matches the snapshot", "cpus": "one worker",
                "dir_order": "listing is sorted",
            },
        },
        {
            "name": "go",
            "files": {"go.mod": "module example.com/ledgergo\n\ngo 1.19\n", "ledger.go": go_lib},
            "lib": "ledger.go",
            "fix": ("return a - b", "return a + b"),
            "test_path": "ledger_test.go",
            "tests": GO_TESTS,
            "test_cmd": "go test -v -vet=off -count=1 ./...",
            "ids": {
                "stable": "TestAdd", "time_bomb": "TestLicence", "timezone": "TestEpochHour",
                "locale": "TestDecimalPoint", "random": "TestToken", "cpus": "TestWorkers",
                "dir_order": "TestListing",
            },
        },
    ]


# What each kind of test shows in the ledger: its class and the causes it must name (the
# leave-one-out pin and its failure mode, the variation), or its first failing day.
EXPECT = {
    "stable": {"class": "stable_pass", "causes": []},
    "time_bomb": {"class": "stable_pass", "causes": ["time"], "fails_after": BOMB_DAY},
    "timezone": {"class": "environment", "causes": ["env", "environment", "timezone"]},
    "hash_order": {"class": "environment", "causes": ["hash_ordering", "hash_seed"]},
    "locale": {"class": "environment", "causes": ["env", "environment", "locale"]},
    "random": {"class": "environment", "causes": ["random", "randomness"]},
    "cpus": {"class": "environment", "causes": ["cpus"]},
    "dir_order": {"class": "environment", "causes": ["dir_order"]},
}


def diff_new_file(path, text):
    lines = text.splitlines()
    out = [f"diff --git a/{path} b/{path}", "new file mode 100644", "--- /dev/null",
           f"+++ b/{path}", f"@@ -0,0 +1,{len(lines)} @@"]
    out += ["+" + l for l in lines]
    return "\n".join(out) + "\n"


def make_repo(path, files):
    os.makedirs(path)
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(path, rel)) or path, exist_ok=True)
        with open(os.path.join(path, rel), "w") as f:
            f.write(text)
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    return git(path, "rev-parse", "HEAD").strip()


def model_patch(repo, lib, fix):
    text = open(os.path.join(repo, lib)).read()
    with open(os.path.join(repo, lib), "w") as f:
        f.write(text.replace(*fix, 1))
    d = git(repo, "diff", "--no-color", "--no-ext-diff")
    git(repo, "checkout", "-q", "--", lib)
    return d


def probe_token(reprorun, repo, p, mpatch, tests):
    """The draw the test sees under the shim: the test command run as the shim runs it."""
    values = set()
    for _ in range(2):
        with tempfile.TemporaryDirectory() as tmp:
            tree = os.path.join(tmp, "tree")
            shutil.copytree(repo, tree, ignore=shutil.ignore_patterns(".git"))
            subprocess.run(["patch", "-s", "-p1", "-d", tree], input=mpatch, text=True, check=True)
            dest = os.path.join(tree, p["test_path"])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "w") as f:
                f.write(tests.replace("@@TOKEN@@", "0"))
            out = run([reprorun, "exec", "--date", CREATED_AT, "--workdir", tree, "--",
                       "/bin/sh", "-c", "export LEDGER_PROBE=1; " + p["test_cmd"]])
            m = re.search(r"PROBE token=(\d+)", out.stdout + out.stderr)
            if not m:
                die(f"{p['name']}: the token probe printed nothing:\n{out.stdout}\n{out.stderr}")
            values.add(int(m.group(1)))
    if len(values) != 1:
        die(f"{p['name']}: the token is not stable under the shim: {sorted(values)}")
    return values.pop()


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        die(__doc__)
    out = os.path.abspath(args[0])
    opts = dict(zip(args[1::2], args[2::2]))
    reprorun = opts.get("--reprorun") or os.environ.get("REPRORUN") or shutil.which("reprorun")
    py = opts.get("--python") or "/usr/bin/python3"
    if not reprorun:
        die("reprorun not found: set REPRORUN or pass --reprorun PATH")
    if os.path.exists(out) and os.listdir(out):
        if not os.path.exists(os.path.join(out, ".ledger-corpus")):
            die(f"{out} is not empty and not a ledger corpus: refusing to overwrite it")
        shutil.rmtree(out)
    os.makedirs(out, exist_ok=True)
    open(os.path.join(out, ".ledger-corpus"), "w").close()
    # Set order under the shim's PYTHONHASHSEED=0, for this interpreter.
    tags = run([py, "-c", f"print(list({{{', '.join(json.dumps(t) for t in TAGS)}}}))"],
               env={"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"}).stdout.strip()
    instances, predictions, expected = [], [], {}
    for p in projects(py):
        repo = os.path.join(out, p["name"])
        base = make_repo(repo, p["files"])
        mpatch = model_patch(repo, p["lib"], p["fix"])
        tests = p["tests"].replace("@@TAGS@@", tags)
        token = probe_token(reprorun, repo, p, mpatch, tests)
        tests = tests.replace("@@TOKEN@@", str(token))
        iid = f"ledger-{p['name']}"
        ids = p["ids"]
        instances.append({
            "instance_id": iid,
            "repo": f"reprorun/ledger-corpus-{p['name']}",
            "base_commit": base,
            "problem_statement": "add() subtracts.",
            "test_patch": diff_new_file(p["test_path"], tests),
            "FAIL_TO_PASS": [ids["stable"]],
            "PASS_TO_PASS": [v for k, v in ids.items() if k != "stable"],
            "created_at": CREATED_AT,
            "version": "0.1",
            "repo_path": p["name"],
            "test_cmd": p["test_cmd"],
            "recorded_resolved": True,
        })
        predictions.append({"instance_id": iid, "model_name_or_path": "reprorun-corpus/ledger",
                            "model_patch": mpatch})
        expected[iid] = {ids[k]: dict(EXPECT[k], kind=k) for k in ids}
    with open(os.path.join(out, "instances.jsonl"), "w") as f:
        f.writelines(json.dumps(i, sort_keys=True) + "\n" for i in instances)
    with open(os.path.join(out, "predictions.jsonl"), "w") as f:
        f.writelines(json.dumps(p, sort_keys=True) + "\n" for p in predictions)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    print(out)


if __name__ == "__main__":
    main()
