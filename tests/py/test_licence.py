# SPDX-License-Identifier: BSD-3-Clause
"""The licence a site's legal review reads: LICENSE is BSD-3-Clause, every
source file says so in an SPDX line near its top, the RPM spec and the
Debian copyright file agree, and SECURITY.md says how to report a flaw
privately.  A new file without the SPDX line fails here."""
import os
import re
import subprocess
import unittest
from pathlib import Path
from typing import List

TOP = Path(__file__).resolve().parents[2]
SPDX = "SPDX-License-Identifier: BSD-3-Clause"
# Source files: code, build files, scripts, man pages, configuration
# templates.  Data the tests read (tests/data), documents and formats that
# have no comment syntax (Markdown, JSON, Debian control files) are not.
SOURCE_SUFFIXES = {".c", ".h", ".def", ".lds", ".map", ".py", ".sh", ".mk", ".f90", ".F90",
                   ".in", ".spec", ".yml", ".1", ".7", ".8"}
SOURCE_NAMES = {"Makefile", ".gitignore", ".clang-format", "lintian-expected"}
NOT_SOURCE = ("tests/data/", "packaging/debian/control", "packaging/debian/copyright")
BSD3_CLAUSES = ("Redistributions of source code must retain the above copyright notice",
                "Redistributions in binary form must reproduce the above copyright notice",
                "Neither the name of the copyright holder nor the names of its")


def tracked() -> List[str]:
    """The checkout's files: git's list when it is a clone, else a walk."""
    try:
        out = subprocess.run(["git", "-C", str(TOP), "ls-files"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, universal_newlines=True, check=True)
        files = out.stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(str(TOP)):
            dirs[:] = [x for x in dirs if x != ".git" and not x.startswith("build")]
            files += [os.path.relpath(os.path.join(d, n), str(TOP)) for n in names]
    return sorted(f for f in files if f)


def is_source(rel: str) -> bool:
    if rel.startswith(NOT_SOURCE):
        return False
    p = TOP / rel
    if p.name in SOURCE_NAMES or p.suffix in SOURCE_SUFFIXES:
        return True
    try:
        with open(str(p), "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


class Licence(unittest.TestCase):
    def test_licence_file_is_bsd3(self) -> None:
        text = (TOP / "LICENSE").read_text()
        self.assertTrue(text.startswith("BSD 3-Clause License"))
        for clause in BSD3_CLAUSES:
            self.assertIn(clause, re.sub(r"\s+", " ", text))

    def test_every_source_file_has_the_spdx_line(self) -> None:
        sources = [f for f in tracked() if is_source(f)]
        self.assertGreater(len(sources), 200)
        missing = []
        for rel in sources:
            with open(str(TOP / rel), errors="replace") as f:
                head = [next(f, "") for _ in range(5)]
            if not any(SPDX in line for line in head):
                missing.append(rel)
        self.assertEqual(missing, [], "no '%s' in the first 5 lines" % SPDX)

    def test_the_check_would_see_a_file_without_it(self) -> None:
        self.assertTrue(is_source("agent/new_module.c"))
        self.assertTrue(is_source("epilog/mpi_pstate/new.py"))
        self.assertTrue(is_source("tests/cluster/lab"))  # a script, by its #! line
        self.assertFalse(is_source("tests/data/topo/8s.xml"))
        self.assertFalse(is_source("docs/admin.md"))

    def test_packages_say_bsd3(self) -> None:
        spec = (TOP / "packaging" / "mpi-pstate.spec").read_text()
        self.assertRegex(spec, r"(?m)^License:\s+BSD-3-Clause\s*$")
        self.assertRegex(spec, r"(?m)^%license LICENSE\s*$")
        copyright_ = (TOP / "packaging" / "debian" / "copyright").read_text()
        self.assertTrue(copyright_.startswith(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"))
        self.assertRegex(copyright_, r"(?m)^Files: \*\nCopyright: .+\nLicense: BSD-3-Clause$")
        stand_alone = copyright_.split("\nLicense: BSD-3-Clause\n", 2)
        self.assertEqual(len(stand_alone), 3, "a stand-alone License paragraph with the text")
        for clause in BSD3_CLAUSES:
            self.assertIn(clause, re.sub(r"\s+", " ", stand_alone[2]))

    def test_security_policy_and_readme(self) -> None:
        sec = (TOP / "SECURITY.md").read_text()
        for what in ("privately", "In scope", "Supported releases", "docs/security.md"):
            self.assertIn(what, sec)
        head = "\n".join((TOP / "README.md").read_text().splitlines()[:15])
        self.assertIn("BSD-3-Clause", head)
        self.assertIn("SECURITY.md", head)


if __name__ == "__main__":
    unittest.main()
