# SPDX-License-Identifier: BSD-3-Clause
"""The packages of packaging/ against `make install`.

`make deb` (packaging/mkdeb.sh) must ship exactly what `make install DESTDIR=...
prefix=/usr` installs, plus what Debian policy adds (man pages gzipped, copyright,
changelog); depend on the libslurm its binaries are linked with; keep apt from
putting another Slurm release under it (Breaks); activate nothing; and put no
file into Slurm's plugin directory under a name of Slurm's plugin types.  It is
installed into, and removed from, a throwaway root with `dpkg --root`.

packaging/mpi-pstate.spec must parse, carry the Makefile's VERSION, and list in
%files exactly what its own `make install` line installs.

The package is built in a build dir of its own (BUILD/deb), so the prefix=/usr
build never replaces the developer's; a first run compiles the tree twice (deb
and RPM layouts), later runs only repack.
"""
from __future__ import annotations

import fnmatch
import io
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import unittest
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

TOP = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("MPI_PSTATE_BUILD", str(TOP / "build"))).resolve()
SPEC = TOP / "packaging" / "mpi-pstate.spec"
PKG = "mpi-pstate"
JOBS = "-j2"

# Every Slurm plugin type, 20.11 to 25.05 (src/plugins/<type>, the type being
# the name's prefix up to the plugin's own name): slurmctld and slurmd load
# every mpi_*.so of PluginDir as an MPI plugin, and any other prefix is
# Slurm's name space too.  The installed Slurm's own plugin names add to it.
SLURM_PLUGIN_TYPES = {
    "accounting_storage", "acct_gather_energy", "acct_gather_filesystem",
    "acct_gather_interconnect", "acct_gather_profile", "auth", "bb", "burst_buffer",
    "certgen", "certmgr", "cgroup", "checkpoint", "cli_filter", "core_spec", "cred",
    "crypto", "data_parser", "ext_sensors", "gpu", "gres", "hash", "job_container",
    "job_submit", "jobacct_gather", "jobcomp", "launch", "mcs", "mpi", "namespace",
    "node_features", "openapi", "power", "preempt", "prep", "priority", "proctrack",
    "rest_auth", "route", "sched", "select", "serializer", "site_factor",
    "slurmctld", "switch", "task", "tls", "topology",
}
# Debian policy's additions to what `make install` installs.
DEB_DOCS = {f"usr/share/doc/{PKG}/copyright", f"usr/share/doc/{PKG}/changelog.gz"}
MAINTAINER_SCRIPTS = {"preinst", "postinst", "prerm", "postrm", "config", "triggers"}
ACTIVATING = re.compile(r"plugstack|systemctl|invoke-rc\.d|\bservice\b|deb-systemd|scontrol|"
                        r"restart|reload|/etc/slurm", re.I)


def need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise unittest.SkipTest(f"{', '.join(missing)} not installed (make deps installs it)")


def make_env() -> Dict[str, str]:
    """The environment for a make of our own: nothing of a calling make's
    jobserver or command-line variables (tests/run runs under `make check`)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "DESTDIR")}
    env["LC_ALL"] = "C"
    return env


def run(cmd: List[str], timeout: float = 300, ok: bool = True,
        **kw: object) -> "subprocess.CompletedProcess[str]":
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=kw.pop("env", make_env()), **kw)  # type: ignore[call-overload]
    if ok and r.returncode != 0:
        raise AssertionError(f"{shlex.join(cmd)} exited {r.returncode}:\n{r.stdout[-3000:]}"
                             f"\n{r.stderr[-3000:]}")
    return r


def makefile_version() -> str:
    m = re.search(r"^VERSION\s*:?=\s*(\S+)", (TOP / "Makefile").read_text(), re.M)
    assert m, "no VERSION in the Makefile"
    return m.group(1)


def slurm_release() -> Optional[str]:
    """Major.minor of the Slurm headers the compiler sees, '22.05'."""
    if shutil.which("gcc") is None:
        return None
    r = subprocess.run(["gcc", "-E", "-P", "-x", "c", "-"], capture_output=True, text=True,
                       input="#include <slurm/slurm_version.h>\nSLURM_VERSION_NUMBER\n")
    lines = r.stdout.split()
    if r.returncode != 0 or not lines or not lines[-1].startswith("0x"):
        return None
    n = int(lines[-1], 16)
    return f"{n >> 16 & 255}.{n >> 8 & 255:02d}"


def tree(root: Path) -> Tuple[Set[str], Set[str]]:
    """(files and symlinks, directories) under root, relative, '/'-separated."""
    files: Set[str] = set()
    dirs: Set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        base = Path(dirpath)
        for d in dirnames:
            p = base / d
            (files if p.is_symlink() else dirs).add(p.relative_to(root).as_posix())
        for f in filenames:
            files.add((base / f).relative_to(root).as_posix())
    return files, dirs


def is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def needed(path: Path) -> List[str]:
    out = run(["readelf", "-d", "-W", str(path)]).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def control_fields(text: str) -> Dict[str, str]:
    fields: Dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def relations(field: str) -> List[List[Tuple[str, Optional[str], Optional[str]]]]:
    """'a (>= 1), b | c' -> [[('a', '>=', '1')], [('b', None, None), ('c', None, None)]]"""
    out = []
    for group in filter(None, (g.strip() for g in field.split(","))):
        alts = []
        for alt in group.split("|"):
            m = re.fullmatch(r"\s*([a-z0-9][a-z0-9+.-]+)(?::\S+)?\s*(?:\(\s*([<>=]+)\s*([^)\s]+)\s*\))?\s*",
                             alt)
            assert m, f"cannot parse relation {alt!r} in {field!r}"
            alts.append((m.group(1), m.group(2), m.group(3)))
        out.append(alts)
    return out


def member_name(m: tarfile.TarInfo) -> str:
    """'./usr/bin/x' -> 'usr/bin/x' (dpkg-deb's archives name members from './')."""
    name = m.name[2:] if m.name.startswith("./") else m.name
    return name.rstrip("/")


def version_satisfies(version: str, op: str, bound: str) -> bool:
    deb_op = {">=": "ge", "<<": "lt", "<=": "le", ">>": "gt", "=": "eq"}[op]
    return subprocess.run(["dpkg", "--compare-versions", version, deb_op, bound]).returncode == 0


class Deb:
    """The package built once for the module, and the reference install."""
    path: Path
    files: Dict[str, tarfile.TarInfo]
    control: Dict[str, str]
    control_members: Dict[str, bytes]
    unpacked: Path
    ref: Path
    _tmp: Optional[tempfile.TemporaryDirectory] = None  # type: ignore[type-arg]

    @classmethod
    def get(cls) -> "Deb":
        need("make", "gcc", "dpkg-deb", "dpkg-shlibdeps", "dpkg-gencontrol", "dpkg-checkbuilddeps",
             "dpkg-architecture", "readelf", "strip")
        if cls._tmp is None:
            holder = tempfile.TemporaryDirectory(prefix="mpi-pstate-pkgtest.")
            tmp = Path(holder.name)
            out = run(["make", "-C", str(TOP), JOBS, f"B={BUILD}", "deb"])
            debs = sorted(BUILD.glob(f"{PKG}_*.deb"))
            assert len(debs) == 1, f"make deb left {debs} in {BUILD}\n{out.stdout[-2000:]}"
            cls.path = debs[0]
            # The reference: plain `make install prefix=/usr`, from make deb's build dir.
            cls.ref = tmp / "ref"
            run(["make", "-C", str(TOP), JOBS, f"B={BUILD / 'deb' / 'build'}", "prefix=/usr",
                 f"DESTDIR={cls.ref}", "install"])
            fsys = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(cls.path)],
                                  capture_output=True, check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(fsys)) as t:
                cls.files = {member_name(m): m for m in t.getmembers()
                             if m.name not in (".", "./")}
            ctrl = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(cls.path)],
                                  capture_output=True, check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(ctrl)) as t:
                cls.control_members = {}
                for m in t.getmembers():
                    f = t.extractfile(m) if m.isfile() else None
                    if f is not None:
                        cls.control_members[member_name(m)] = f.read()
            cls.control = control_fields(cls.control_members["control"].decode())
            cls.unpacked = tmp / "unpacked"
            run(["dpkg-deb", "-x", str(cls.path), str(cls.unpacked)])
            cls._tmp = holder  # only once everything above succeeded
        return cls()


def tearDownModule() -> None:
    if Deb._tmp is not None:
        Deb._tmp.cleanup()
        Deb._tmp = None


class DebPackage(unittest.TestCase):
    deb: Deb

    @classmethod
    def setUpClass(cls) -> None:
        cls.deb = Deb.get()

    def deb_regular_files(self) -> Set[str]:
        return {n for n, m in self.deb.files.items() if not m.isdir()}

    def test_files_are_make_install_plus_debian_docs(self) -> None:
        ref_files, _ = tree(self.deb.ref)
        self.assertTrue(ref_files, "make install installed nothing")
        expected = {f + ".gz" if f.startswith("usr/share/man/") else f for f in ref_files} | DEB_DOCS
        got = self.deb_regular_files()
        self.assertEqual(sorted(expected - got), [], "installed by make install, missing from the deb")
        self.assertEqual(sorted(got - expected), [], "in the deb, not installed by make install")
        for f in ref_files:
            src = self.deb.ref / f
            dst = self.deb.unpacked / (f + ".gz" if f.startswith("usr/share/man/") else f)
            with self.subTest(file=f):
                member = self.deb.files[f + ".gz" if f.startswith("usr/share/man/") else f]
                self.assertEqual((member.uid, member.gid), (0, 0))
                if is_elf(src):
                    self.assertTrue(is_elf(dst))
                    self.assertEqual(needed(src), needed(dst), "strip changed the libraries needed")
                    want = 0o644 if f.endswith(".so") else 0o755
                    self.assertEqual(member.mode & 0o7777, want)
                elif f.startswith("usr/share/man/"):
                    r = subprocess.run(["gzip", "-dc", str(dst)], capture_output=True, check=True)
                    self.assertEqual(r.stdout, src.read_bytes())
                else:
                    self.assertEqual(dst.read_bytes(), src.read_bytes())
                    want = 0o755 if os.access(src, os.X_OK) else 0o644
                    self.assertEqual(member.mode & 0o7777, want)
        for name, m in self.deb.files.items():
            if m.isdir():
                self.assertEqual(m.mode & 0o7777, 0o755, name)

    def test_layout_prefix_usr_and_debian_plugin_dir(self) -> None:
        triplet = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
        files = self.deb_regular_files()
        for f in (f"usr/lib/{triplet}/slurm-wlm/spank_mpi_pstate.so", "usr/sbin/mpi-pstate-agent",
                  "usr/lib/mpi-pstate/libmpi-pstate.so", "usr/bin/mpi-pstate",
                  "usr/sbin/mpi-pstate-epilog", "usr/sbin/mpi-pstate-epilog-slurmctld",
                  "usr/share/mpi-pstate/plugstack.conf.example", "usr/share/man/man8/mpi_pstate.8.gz"):
            self.assertIn(f, files)
        self.assertEqual([f for f in files if not f.startswith("usr/")], [])
        # Every preload backend this machine can build (the Build-Depends has both MPIs).
        for abi in ("ompi", "mpich"):
            self.assertIn(f"usr/lib/mpi-pstate/libmpi-pstate-{abi}.so", files)

    def test_version_from_makefile_and_slurm(self) -> None:
        release = slurm_release()
        self.assertIsNotNone(release, "no <slurm/slurm_version.h>, yet make deb built")
        self.assertEqual(self.deb.control["Version"], f"{makefile_version()}+slurm{release}")
        self.assertEqual(self.deb.control["Package"], PKG)
        self.assertEqual(self.deb.path.name, f"{PKG}_{self.deb.control['Version']}_"
                                             f"{self.deb.control['Architecture']}.deb")
        r = run(["dpkg-deb", "-f", str(self.deb.path), "Version"])
        self.assertEqual(r.stdout.strip(), self.deb.control["Version"])

    def test_depends_names_linked_libslurm_and_python3(self) -> None:
        depends = run(["dpkg-deb", "-f", str(self.deb.path), "Depends"]).stdout.strip()
        names = {alt[0] for group in relations(depends) for alt in group}
        sonames = set()
        for f in sorted(self.deb_regular_files()):
            p = self.deb.unpacked / f
            if not p.is_symlink() and is_elf(p):
                sonames.update(n for n in needed(p) if n.startswith("libslurm"))
        self.assertTrue(sonames, "no binary of the package links libslurm")
        for soname in sorted(sonames):
            with self.subTest(soname=soname):
                # The package that holds the library the binary was linked against.
                owners = run(["dpkg-query", "-S", f"*/{soname}"], ok=False).stdout.splitlines()
                pkgs = {o.split(":")[0] for o in owners if o.split(": ", 1)[-1].endswith("/" + soname)}
                self.assertTrue(pkgs, f"no installed package holds {soname}")
                self.assertTrue(pkgs & names, f"Depends {depends!r} names none of {pkgs} ({soname})")
                # Debian's name for it: libslurm38 (12), libslurm42t64 (13, 64-bit time_t).
                m = re.fullmatch(r"libslurm\.so\.(\d+)", soname)
                if m:
                    self.assertTrue(any(re.fullmatch(rf"libslurm{m.group(1)}(t64)?", n) for n in names),
                                    f"Depends {depends!r} names no libslurm{m.group(1)}")
        self.assertIn("python3", names)

    def test_breaks_every_other_slurm_release(self) -> None:
        breaks = self.deb.control.get("Breaks", "")
        rels = [alt for group in relations(breaks) for alt in group]
        self.assertTrue(rels, "no Breaks: an apt upgrade of Slurm would leave the plugin behind")
        triplet = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
        owner = run(["dpkg-query", "-S", f"/usr/lib/{triplet}/slurm-wlm/libslurmfull.so"]).stdout
        slurm_pkg = owner.split(":")[0]
        installed = run(["dpkg-query", "-W", "-f", "${Version}", slurm_pkg]).stdout.strip()
        self.assertEqual({name for name, _, _ in rels}, {slurm_pkg})

        def broken(version: str) -> bool:
            return any(op is not None and bound is not None and version_satisfies(version, op, bound)
                       for _, op, bound in rels)

        release = slurm_release()
        assert release is not None
        major, minor = (int(x) for x in release.split("."))
        epoch = installed.split(":")[0] + ":" if ":" in installed else ""
        self.assertFalse(broken(installed), f"Breaks {breaks!r} the installed {slurm_pkg} {installed}")
        for ok in (f"{release}.0-1", f"{release}.99-9+deb99u9", f"{release}.1~rc1-1"):
            self.assertFalse(broken(epoch + ok), ok)
        for bad in (f"{major}.{minor + 1:02d}.0-1", f"{major + 1}.02.1-1", f"{major + 3}.11.5-1",
                    f"{major - 1}.11.8-1", f"{major}.{minor - 1:02d}.9-1" if minor > 0 else "1.0-1"):
            self.assertTrue(broken(epoch + bad), f"Breaks {breaks!r} lets {slurm_pkg} {bad} in")

    def test_activates_nothing(self) -> None:
        members = set(self.deb.control_members)
        self.assertLessEqual(members, {"control", "md5sums"} | MAINTAINER_SCRIPTS,
                             f"unexpected control members {members}")
        for script in sorted(members & MAINTAINER_SCRIPTS):
            text = self.deb.control_members[script].decode(errors="replace")
            self.assertIsNone(ACTIVATING.search(text), f"{script} touches Slurm:\n{text}")
        self.assertNotIn("conffiles", members, "a conffile would be configuration the package owns")
        self.assertEqual([f for f in self.deb.files if f.startswith("etc")], [])
        example = (self.deb.unpacked / "usr/share/mpi-pstate/plugstack.conf.example").read_text()
        active = [ln for ln in example.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        self.assertEqual(active, [], "the plugstack example must be all comments")

    def test_md5sums_cover_every_file(self) -> None:
        sums = {}
        for line in self.deb.control_members["md5sums"].decode().splitlines():
            digest, _, name = line.partition("  ")
            sums[name] = digest
        files = {n for n, m in self.deb.files.items() if m.isfile()}
        self.assertEqual(set(sums), files)

    def test_no_slurm_plugin_type_prefix_in_slurm_dirs(self) -> None:
        types = set(SLURM_PLUGIN_TYPES)
        # The installed Slurm's own plugins: every prefix up to an underscore.
        triplet = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
        plugindir = f"/usr/lib/{triplet}/slurm-wlm"
        owners = run(["dpkg-query", "-S", plugindir], ok=False).stdout.splitlines()
        pkgs = [p.strip().split(":")[0] for p in owners[0].split(": ")[0].split(",")] if owners else []
        for pkg in pkgs:
            for path in run(["dpkg-query", "-L", pkg], ok=False).stdout.splitlines():
                name = os.path.basename(path)
                if os.path.dirname(path) == plugindir and re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+\.so", name):
                    parts = name[:-3].split("_")
                    types.update("_".join(parts[:i]) for i in range(1, len(parts)))
        # "spank" is no plugin type: SPANK plugins are loaded only through
        # plugstack.conf, by path, and Slurm's own spank_pbs.so uses that prefix
        # as pyxis's spank_pyxis.so does.
        types.discard("spank")
        self.assertIn("mpi", types)
        slurm_names = {os.path.basename(p) for pkg in pkgs
                       for p in run(["dpkg-query", "-L", pkg], ok=False).stdout.splitlines()}
        in_slurm = [f for f in self.deb_regular_files() if re.search(r"(^|/)slurm[^/]*/", f)]
        self.assertTrue(in_slurm, "the package puts nothing into a Slurm directory")
        for f in in_slurm:
            name = os.path.basename(f)
            with self.subTest(file=f):
                self.assertTrue(name.endswith(".so") and name.startswith("spank_"), name)
                clash = sorted(t for t in types if name.startswith(t + "_"))
                self.assertEqual(clash, [], f"{name} is in Slurm's plugin name space")
                self.assertNotIn(name, slurm_names, "a file of that name belongs to Slurm")

    def test_lintian_only_expected_tags(self) -> None:
        need("lintian")
        r = run([str(TOP / "packaging" / "lint.sh"), str(BUILD)], ok=False, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_install_and_remove_in_throwaway_root(self) -> None:
        need("dpkg")
        # Not root: fakeroot lets dpkg believe it is (the files land owned by the caller).
        prefix: List[str] = []
        if os.geteuid() != 0:
            if shutil.which("fakeroot") is None:
                self.skipTest("not root and no fakeroot: dpkg --root cannot install")
            prefix = ["fakeroot"]
        with tempfile.TemporaryDirectory(prefix="mpi-pstate-dpkgroot.") as tmp:
            root = Path(tmp) / "root"
            admin = root / "var/lib/dpkg"
            for d in ("info", "updates", "triggers"):
                (admin / d).mkdir(parents=True)
            (admin / "status").touch()
            dpkg = prefix + ["dpkg", f"--root={root}", "--log=/dev/null"] + (["--force-not-root"] if prefix else [])
            slurm = self._slurm_package()

            # Another Slurm release present: refused, with the conflict named.
            fake = self._fake_package(Path(tmp), slurm, "99.11.1-1")
            run(dpkg + ["--force-depends", "-i", str(fake)])
            r = run(dpkg + ["--force-depends", "-i", str(self.deb.path)], ok=False)
            self.assertNotEqual(r.returncode, 0, "installed beside another Slurm release")
            self.assertIn(f"breaks {slurm}", r.stdout + r.stderr)
            self.assertNotIn("ok installed", run(dpkg + ["-s", PKG], ok=False).stdout)

            # The Slurm it was built for: installs (the libraries are not in this root).
            installed = run(["dpkg-query", "-W", "-f", "${Version}", slurm]).stdout.strip()
            run(dpkg + ["--force-depends", "-i", str(self._fake_package(Path(tmp), slurm, installed))])
            r = run(dpkg + ["--force-depends", "-i", str(self.deb.path)])
            self.assertIn("Status: install ok installed", run(dpkg + ["-s", PKG]).stdout)
            listed = {p.lstrip("/") for p in run(dpkg + ["-L", PKG]).stdout.splitlines()}
            self.assertLessEqual(self.deb_regular_files(), listed)
            files, _ = tree(root)
            outside = sorted(f for f in files if not f.startswith(("usr/", "var/lib/dpkg/")))
            self.assertEqual(outside, [], "dpkg -i wrote outside /usr")

            # Upgrading Slurm to another release under it: refused while it is installed.
            r = run(dpkg + ["--force-depends", "-i", str(fake)], ok=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertRegex(r.stdout + r.stderr, rf"{PKG} \([^)]*\) breaks {re.escape(slurm)}")

            run(dpkg + ["--purge", PKG])
            files, _ = tree(root)
            left = sorted(f for f in files if not f.startswith("var/lib/dpkg/"))
            self.assertEqual(left, [], "dpkg --purge left files behind")

    @staticmethod
    def _slurm_package() -> str:
        triplet = run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
        out = run(["dpkg-query", "-S", f"/usr/lib/{triplet}/slurm-wlm/libslurmfull.so"]).stdout
        return out.split(":")[0]

    @staticmethod
    def _fake_package(tmp: Path, name: str, version: str) -> Path:
        """An empty package NAME=VERSION, to stand for Slurm in the throwaway root."""
        d = tmp / f"fake-{name}-{version}"
        (d / "DEBIAN").mkdir(parents=True)
        (d / "DEBIAN").chmod(0o755)
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        (d / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: {version}\nArchitecture: {arch}\n"
            "Maintainer: test <test@example.invalid>\nDescription: stands for Slurm\n")
        out = tmp / f"{name}_{version.replace(':', '%3a')}_{arch}.deb"
        run(["dpkg-deb", "--root-owner-group", "--build", str(d), str(out)])
        return out


class RpmSpec(unittest.TestCase):
    expanded: str

    @classmethod
    def setUpClass(cls) -> None:
        need("rpmspec")
        cls.expanded = run(["rpmspec", "-P", str(SPEC)]).stdout

    def section(self, name: str) -> List[str]:
        lines: List[str] = []
        inside = False
        for line in self.expanded.splitlines():
            if re.match(r"%(prep|build|install|check|clean|files|changelog|description|package|"
                        r"pre|post|preun|postun|pretrans|posttrans)\b", line):
                inside = line.split()[0] == f"%{name}"
                continue
            if inside:
                lines.append(line)
        return lines

    def test_version_is_the_makefiles(self) -> None:
        r = run(["rpmspec", "-q", "--srpm", "--qf", "%{VERSION} %{RELEASE}\n", str(SPEC)])
        version, release = r.stdout.split()
        self.assertEqual(version, makefile_version())
        want = slurm_release()
        if want is not None:
            self.assertTrue(release.startswith(f"1.slurm{want}"), release)

    def test_conflicts_with_other_slurm_releases(self) -> None:
        want = slurm_release()
        if want is None:
            self.skipTest("no <slurm/slurm_version.h>: the spec cannot name a Slurm release")
        r = run(["rpmspec", "-q", "--qf", "[%{CONFLICTS} %{CONFLICTFLAGS:depflags} %{CONFLICTVERSION}\n]",
                 str(SPEC)])
        major, minor = (int(x) for x in want.split("."))
        self.assertEqual(sorted(r.stdout.splitlines()),
                         sorted([f"slurm < {want}", f"slurm >= {major}.{minor + 1:02d}~"]))

    def test_files_are_exactly_make_install(self) -> None:
        install = [ln for ln in self.section("install") if re.search(r"\bmake\b.*\binstall\b", ln)]
        self.assertEqual(len(install), 1, f"one make install line expected in %install: {install}")
        words = shlex.split(install[0])
        variables = [w for w in words if re.fullmatch(r"[A-Za-z_]+=.*", w)
                     and not w.startswith(("DESTDIR=", "INSTALL=", "CFLAGS=", "LDFLAGS="))]
        self.assertIn("prefix=/usr", variables)
        with tempfile.TemporaryDirectory(prefix="mpi-pstate-rpmtest.") as tmp:
            dest = Path(tmp) / "root"
            run(["make", "-C", str(TOP), JOBS, f"B={BUILD / 'pkgtest-rpm'}", f"DESTDIR={dest}",
                 *variables, "install"])
            files, dirs = tree(dest)
        entries: List[Tuple[str, bool]] = []
        for line in self.section("files"):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith(("%license ", "%doc ")):  # from the source tree, not make install
                continue
            is_dir = line.startswith("%dir ")
            path = line[len("%dir "):].strip() if is_dir else line
            self.assertTrue(path.startswith("/"), f"unhandled %files line {line!r}")
            entries.append((path.lstrip("/"), is_dir))
        self.assertTrue(entries, "empty %files")
        covered: Set[str] = set()
        for pattern, is_dir in entries:
            with self.subTest(entry=pattern):
                pool = dirs if is_dir else files | dirs
                hits = {p for p in pool if fnmatch.fnmatchcase(p, pattern)}
                self.assertTrue(hits, f"%files entry /{pattern} matches nothing make install installs")
                if is_dir:
                    continue
                for h in hits:
                    covered.add(h)
                    if h in dirs:  # a bare directory entry takes everything under it
                        covered.update(f for f in files if f.startswith(h + "/"))
        self.assertEqual(sorted(files - covered), [], "installed by make install, missing from %files")
        # Our own directories are owned by the package; the system's are not.
        ours = {d for d in dirs if re.search(r"(^|/)mpi[-_]pstate(/|$)", d)}
        self.assertEqual(sorted(ours - {p for p, is_dir in entries if is_dir}), [],
                         "directories of ours without %dir")


# What EL8 and EL9 (with EPEL and CRB/PowerTools) provide, by name: a binary
# RPM's Requires and the source RPM's BuildRequires must be among these.
EL_REQUIRES = [r"/bin/sh", r"/usr/bin/python3", r"python3 >= 3\.6", r"rtld\(GNU_HASH\)",
               r"rpmlib\(.*\)( <= [0-9.-]+)?", r"ld-linux-(x86-64|aarch64)\.so\.[12]\(.*\)(\(64bit\))?",
               r"lib(c|m|dl|pthread)\.so\.6\(.*\)(\(64bit\))?", r"libhwloc\.so\.15\(\)(\(64bit\))?",
               r"libslurm\.so\.[0-9]+\(\)(\(64bit\))?"]
EL_BUILD_REQUIRES = {"gcc", "make", "pkgconfig", "python3 >= 3.6", "slurm-devel", "slurm-devel-ohpc",
                     "hwloc-devel", "check-devel", "openmpi-devel", "mpich-devel"}


class RpmPackages(unittest.TestCase):
    """`make rpm-lint`: rpmbuild -ba builds the source and binary RPMs
    (%build with the distribution's flags, %install, %check's unit suites),
    rpmlint finds no error in the spec or any RPM, and what they require is
    named as EL8/EL9 name it."""
    rpms: List[Path]
    srpm: Path
    lint: str

    @classmethod
    def setUpClass(cls) -> None:
        need("rpmbuild", "rpmspec", "rpmlint", "rpmsign", "gpg")
        out = run(["make", "-C", str(TOP), JOBS, f"B={BUILD}", "rpm-lint"], timeout=900)
        cls.lint = out.stdout
        cls.rpms = sorted(BUILD.glob("rpm/RPMS/*/*.rpm"))
        srpms = sorted(BUILD.glob("rpm/SRPMS/*.src.rpm"))
        assert len(srpms) == 1, srpms
        cls.srpm = srpms[0]

    def test_binary_and_source_rpms_are_built(self) -> None:
        self.assertTrue([p for p in self.rpms if not p.name.endswith(".src.rpm")])
        want = slurm_release()
        for p in self.rpms + [self.srpm]:
            self.assertTrue(p.name.startswith(f"{PKG}-{makefile_version()}-1.slurm"), p.name)
            if want is not None:
                self.assertIn(f".slurm{want}", p.name)

    def test_rpmlint_reports_no_error(self) -> None:
        self.assertIn("make rpm-lint:", self.lint)
        self.assertNotRegex(self.lint, r"(?m)^\S+: E: ")
        self.assertRegex(self.lint, r"0 errors")

    def test_requires_are_names_el_provides(self) -> None:
        for p in self.rpms:
            got = run(["rpm", "-qpR", str(p)]).stdout.splitlines()
            self.assertIn("python3 >= 3.6", got)
            self.assertTrue(any(r.startswith("libslurm.so.") for r in got), got)
            odd = [r for r in got if not any(re.fullmatch(pat, r) for pat in EL_REQUIRES)]
            self.assertEqual(odd, [], f"{p.name} requires what EL does not provide by that name")

    def test_build_requires_are_el_names(self) -> None:
        got = run(["rpm", "-qpR", str(self.srpm)]).stdout.splitlines()
        odd = [r for r in got if r not in EL_BUILD_REQUIRES and not r.startswith("rpmlib(")]
        self.assertEqual(odd, [])
        self.assertIn("slurm-devel", got)
        ohpc = run(["rpmspec", "-q", "--srpm", "--with", "ohpc", "--requires", str(SPEC)]).stdout
        self.assertIn("slurm-devel-ohpc", ohpc.split())

    def test_the_distributions_flags_reach_the_build(self) -> None:
        text = run(["rpmspec", "-P", "--define", "optflags -O2 -g -DMPST_OPT",
                    "--define", "build_ldflags -Wl,--mpst-ld", str(SPEC)]).stdout
        makes = [ln for ln in text.splitlines() if re.match(r"make\b", ln)]
        self.assertEqual(len(makes), 3, makes)  # %build, %install, %check
        for line in makes:
            self.assertIn('CFLAGS="-O2 -g -DMPST_OPT"', line)
            self.assertIn('LDFLAGS="-Wl,--mpst-ld"', line)
        self.assertRegex(makes[0], r"^make -j[0-9]+ ")


if __name__ == "__main__":
    unittest.main()
