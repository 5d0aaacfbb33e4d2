//! Data for the dependency rules: the top-level modules of the Python 3 standard library
//! (3.6 to 3.13, including modules since removed, so an old release is not blamed for
//! importing them), and the import names whose distribution has another name.

use std::collections::BTreeSet;

/// Python 3 standard-library top-level modules, sorted.
#[rustfmt::skip]
pub(super) const STDLIB: &[&str] = &[
    "__future__", "_thread", "abc", "aifc", "argparse", "array", "ast", "asynchat", "asyncio",
    "asyncore", "atexit", "audioop", "base64", "bdb", "binascii", "binhex", "bisect", "builtins",
    "bz2", "cProfile", "calendar", "cgi", "cgitb", "chunk", "cmath", "cmd", "code", "codecs",
    "codeop", "collections", "colorsys", "compileall", "concurrent", "configparser", "contextlib",
    "contextvars", "copy", "copyreg", "crypt", "csv", "ctypes", "curses", "dataclasses",
    "datetime", "dbm", "decimal", "difflib", "dis", "distutils", "doctest", "email", "encodings",
    "ensurepip", "enum", "errno", "faulthandler", "fcntl", "filecmp", "fileinput", "fnmatch",
    "formatter", "fractions", "ftplib", "functools", "gc", "getopt", "getpass", "gettext", "glob",
    "graphlib", "grp", "gzip", "hashlib", "heapq", "hmac", "html", "http", "imaplib", "imghdr",
    "imp", "importlib", "inspect", "io", "ipaddress", "itertools", "json", "keyword", "lib2to3",
    "linecache", "locale", "logging", "lzma", "mailbox", "mailcap", "marshal", "math",
    "mimetypes", "mmap", "modulefinder", "msilib", "msvcrt", "multiprocessing", "netrc", "nis",
    "nntplib", "ntpath", "numbers", "opcode", "operator", "optparse", "os", "ossaudiodev",
    "parser", "pathlib", "pdb", "pickle", "pickletools", "pipes", "pkgutil", "platform",
    "plistlib", "poplib", "posix", "posixpath", "pprint", "profile", "pstats", "pty", "pwd",
    "py_compile", "pyclbr", "pydoc", "queue", "quopri", "random", "re", "readline", "reprlib",
    "resource", "rlcompleter", "runpy", "sched", "secrets", "select", "selectors", "shelve",
    "shlex", "shutil", "signal", "site", "smtpd", "smtplib", "sndhdr", "socket", "socketserver",
    "spwd", "sqlite3", "sre_compile", "sre_constants", "sre_parse", "ssl", "stat", "statistics",
    "string", "stringprep", "struct", "subprocess", "sunau", "symbol", "symtable", "sys",
    "sysconfig", "syslog", "tabnanny", "tarfile", "telnetlib", "tempfile", "termios", "textwrap",
    "this", "threading", "time", "timeit", "tkinter", "token", "tokenize", "tomllib", "trace",
    "traceback", "tracemalloc", "tty", "turtle", "turtledemo", "types", "typing", "unicodedata",
    "unittest", "urllib", "uu", "uuid", "venv", "warnings", "wave", "weakref", "webbrowser",
    "winreg", "winsound", "wsgiref", "xdrlib", "xml", "xmlrpc", "zipapp", "zipfile", "zipimport",
    "zlib", "zoneinfo",
];

/// Import names whose distribution is named otherwise: `(import, [distributions])`, the
/// first distribution the one to suggest, any of them satisfying the import (PEP 503
/// names; conda package names included where they differ).
#[rustfmt::skip]
pub(super) const DISTRIBUTIONS: &[(&str, &[&str])] = &[
    ("Crypto", &["pycryptodome", "pycrypto", "pycryptodomex"]),
    ("Levenshtein", &["python-levenshtein", "levenshtein"]),
    ("MySQLdb", &["mysqlclient"]),
    ("OpenGL", &["pyopengl"]),
    ("PIL", &["pillow", "pillow-simd", "pil"]),
    ("absl", &["absl-py"]),
    ("attr", &["attrs"]),
    ("bs4", &["beautifulsoup4", "bs4"]),
    ("cv2", &["opencv-python", "opencv-python-headless", "opencv-contrib-python", "opencv-contrib-python-headless", "opencv", "py-opencv"]),
    ("dateutil", &["python-dateutil"]),
    ("docx", &["python-docx"]),
    ("dotenv", &["python-dotenv"]),
    ("faiss", &["faiss-cpu", "faiss-gpu", "faiss"]),
    ("fitz", &["pymupdf"]),
    ("git", &["gitpython"]),
    ("google", &["protobuf", "google-cloud-storage", "google-api-python-client", "google-auth"]),
    ("haiku", &["dm-haiku"]),
    ("hydra", &["hydra-core"]),
    ("igraph", &["python-igraph", "igraph"]),
    ("jwt", &["pyjwt"]),
    ("magic", &["python-magic"]),
    ("mmcv", &["mmcv", "mmcv-full", "mmcv-lite"]),
    ("pptx", &["python-pptx"]),
    ("pytorch_lightning", &["pytorch-lightning", "lightning"]),
    ("ruamel", &["ruamel-yaml"]),
    ("serial", &["pyserial"]),
    ("skimage", &["scikit-image"]),
    ("sklearn", &["scikit-learn", "sklearn"]),
    ("tensorboardX", &["tensorboardx"]),
    ("tensorflow", &["tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tf-nightly", "tensorflow-macos"]),
    ("torch", &["torch", "pytorch", "pytorch-gpu", "pytorch-cpu"]),
    ("tree", &["dm-tree"]),
    ("usb", &["pyusb"]),
    ("wx", &["wxpython"]),
    ("yaml", &["pyyaml"]),
    ("zmq", &["pyzmq"]),
];

/// Modules that come with a distribution of another name and need no entry of their own
/// (`(module, provider)`): installing the provider installs them.
pub(super) const BUNDLED: &[(&str, &str)] = &[
    ("mpl_toolkits", "matplotlib"),
    ("pylab", "matplotlib"),
    ("torchgen", "torch"),
    ("triton", "torch"),
    ("google", "tensorflow"),
    ("tensorboard", "tensorflow"),
    ("keras", "tensorflow"),
];

/// Modules every Python environment has without an entry of its own (pip's and venv's
/// own packages).
const ALWAYS: &[&str] = &["pip", "pkg_resources", "setuptools", "wheel"];

/// Whether `module` is in the standard library or in every environment.
pub(super) fn is_stdlib(module: &str) -> bool {
    STDLIB.binary_search(&module).is_ok() || ALWAYS.contains(&module)
}

/// The distributions that provide `module`, the one to suggest first.
pub(super) fn distributions(module: &str) -> Vec<String> {
    match DISTRIBUTIONS.iter().find(|(m, _)| *m == module) {
        Some((_, dists)) => dists.iter().map(|d| d.to_string()).collect(),
        None => vec![normalize(module)],
    }
}

/// A distribution name per PEP 503: lowercase, runs of `-`, `_` and `.` as one `-`.
pub(super) fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut sep = false;
    for c in name.trim().chars() {
        if matches!(c, '-' | '_' | '.') {
            sep = true;
            continue;
        }
        if sep && !out.is_empty() {
            out.push('-');
        }
        sep = false;
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Distributions every installation of a declared one brings along (its own requirements):
/// (distribution, those that require it). An import of `numpy` is satisfied by a declared
/// `torchvision`.
#[rustfmt::skip]
const ARRIVES_WITH: &[(&str, &[&str])] = &[
    ("numpy", &["torchvision", "tensorflow", "tensorflow-gpu", "scipy", "pandas", "scikit-learn", "scikit-image", "matplotlib", "opencv-python", "opencv-python-headless", "h5py", "transformers", "diffusers", "jax", "numba", "seaborn", "gym", "gymnasium", "timm", "accelerate", "datasets", "torchaudio", "pytorch-lightning", "lightning", "rdkit", "imageio", "tensorboard", "xgboost", "miscnn"]),
    ("pillow", &["torchvision", "matplotlib", "scikit-image", "diffusers", "imageio", "timm"]),
    ("six", &["tensorflow", "tensorflow-gpu", "python-dateutil", "h5py", "tensorboard"]),
    ("filelock", &["torch", "transformers", "huggingface-hub", "diffusers", "datasets"]),
    ("typing-extensions", &["torch", "pydantic", "huggingface-hub"]),
    ("jinja2", &["torch"]),
    ("sympy", &["torch"]),
    ("networkx", &["torch", "scikit-image"]),
    ("safetensors", &["transformers", "diffusers", "accelerate", "timm"]),
    ("huggingface-hub", &["transformers", "diffusers", "accelerate", "datasets", "timm", "tokenizers"]),
    ("tokenizers", &["transformers"]),
    ("packaging", &["transformers", "matplotlib", "accelerate", "huggingface-hub", "scikit-image", "pytorch-lightning", "lightning", "datasets"]),
    ("tqdm", &["transformers", "datasets", "huggingface-hub", "pytorch-lightning", "lightning"]),
    ("requests", &["transformers", "tensorflow", "huggingface-hub", "datasets", "diffusers"]),
    ("pyyaml", &["transformers", "accelerate", "huggingface-hub", "timm", "pytorch-lightning", "lightning", "datasets"]),
    ("regex", &["transformers", "diffusers"]),
    ("scipy", &["scikit-learn", "scikit-image", "seaborn", "xgboost"]),
    ("joblib", &["scikit-learn"]),
    ("threadpoolctl", &["scikit-learn"]),
    ("pandas", &["seaborn", "datasets"]),
    ("matplotlib", &["seaborn"]),
    ("python-dateutil", &["pandas", "matplotlib"]),
    ("pytz", &["pandas"]),
    ("protobuf", &["tensorflow", "tensorflow-gpu", "tensorboard", "onnx"]),
    ("psutil", &["accelerate"]),
    ("cloudpickle", &["gym", "gymnasium"]),
    ("absl-py", &["tensorflow", "tensorflow-gpu", "tensorboard"]),
    ("fsspec", &["torch", "datasets", "huggingface-hub"]),
    ("torch", &["torchvision", "torchaudio", "pytorch-lightning", "lightning", "timm", "accelerate"]),
];

/// Whether `dist` arrives with a declared distribution (see [`ARRIVES_WITH`]).
pub(super) fn arrives_with(dist: &str, declared: &BTreeSet<String>) -> bool {
    ARRIVES_WITH
        .iter()
        .find(|(d, _)| *d == dist)
        .is_some_and(|(_, carriers)| carriers.iter().any(|c| declared.contains(*c)))
}
