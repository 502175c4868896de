# SPDX-License-Identifier: Apache-2.0
"""pip install ./python (or pip wheel ./python): the shoal package, its C extension linked
with libshoal's static libraries from a build of this tree (make; SHOAL_BUILD picks the
build directory, build/release by default; SHOAL_SRC the tree, where this directory is
built from a copy). docs/python.md."""
import os
import re

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("SHOAL_SRC", os.path.dirname(HERE)))
BUILD = os.path.abspath(os.environ.get("SHOAL_BUILD", os.path.join(ROOT, "build", "release")))
# the Makefile's ALL_LIBS, in its order, and its LIBS
MODULES = ["admin", "fuse", "client", "meta", "data", "store", "cluster", "net", "env", "base"]
SYSLIBS = ["uring", "isal", "lz4", "zstd", "ssl", "crypto", "raft", "lmdb", "jansson", "microhttpd",
           "fuse3", "pthread", "m"]

archives = [os.path.join(BUILD, "lib", "libsh_%s.a" % m) for m in MODULES]
missing = [a for a in archives if not os.path.exists(a)]
if missing:
    raise SystemExit("shoal: build libshoal first (make; SHOAL_BUILD=%s has no %s)" %
                     (BUILD, os.path.basename(missing[0])))

with open(os.path.join(ROOT, "include", "shoal", "sh_version.h")) as f:
    VERSION = re.search(r'SH_VERSION_STRING "([^"]+)"', f.read()).group(1)

setup(
    name="shoal",
    version=VERSION,
    description="Shoal parallel file system: files, PyTorch datasets and checkpoints, fsspec",
    license="Apache-2.0",
    packages=["shoal"],
    ext_modules=[Extension(
        "shoal._shoal",
        sources=["shoal/_shoal.c", "shoal/batch.c", "shoal/snap.c"],
        include_dirs=[os.path.join(ROOT, "include")],
        extra_compile_args=["-std=gnu11", "-fvisibility=hidden"],
        extra_objects=archives,
        depends=archives + [os.path.join(ROOT, "include", "shoal", "client.h"),
                            os.path.join(HERE, "shoal", "_shoal.h")],
        libraries=SYSLIBS,
        extra_link_args=["-Wl,--exclude-libs,ALL"],
    )],
    entry_points={"fsspec.specs": ["shoal = shoal.fsspec:ShoalFileSystem"]},
    python_requires=">=3.9",
)
