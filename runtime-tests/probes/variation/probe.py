# Python probe: entropy, hash order, clock, identity, listing, addresses.
import locale, os, platform, random, socket, tempfile, time, uuid


def out(key, value):
    print(f"py.{key}: {value}")


out("urandom", os.urandom(8).hex())
out("random", random.random())
out("set", list({"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}))
out("hash", hash("reprorun"))
out("time", time.time())
out("localtime", time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime()))
out("listdir", os.listdir("input"))
out("pid", (os.getpid(), os.getppid()))
out("cpus", (os.cpu_count(), sorted(os.sched_getaffinity(0))))
out("uname", tuple(os.uname()))
out("platform", platform.platform())
out("hostname", socket.gethostname())
out("ids", (os.getuid(), os.getgid(), os.getgroups()))
out("cwd", os.getcwd())
out("home", os.path.expanduser("~"))
d = tempfile.mkdtemp()
out("mkdtemp", d)
out("uuid4", uuid.uuid4())
try:
    out("locale", locale.setlocale(locale.LC_ALL, ""))
except locale.Error as e:
    out("locale", f"error {e}")
out("addr", hex(id(object())))
f = os.path.join(d, "f")
with open(f, "w") as fh:
    fh.write("x")
st = os.stat(f)
out("file", (oct(st.st_mode), int(st.st_mtime)))
out("env", sorted(os.environ.items()))
