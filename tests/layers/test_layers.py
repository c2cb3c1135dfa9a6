# SPDX-License-Identifier: Apache-2.0
"""tools/check-layers against the tree as built, and against each kind of
use it must refuse, planted in a copy (make check-calls runs this after the
check itself).  CASCADE_BUILD: the build directory whose objects it reads."""
import glob
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("CASCADE_BUILD", "build"))
CHECK = os.path.join(ROOT, "tools", "check-layers")


def make_var(name):
    """LAYERS or PROGRAMS, as the Makefile has it."""
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        m = re.search(r"^%s := (.*)$" % name, f.read(), re.M)
    assert m, name
    return m.group(1).split()


LAYERS = make_var("LAYERS")
PROGRAMS = make_var("PROGRAMS")


def objects():
    objs = []
    for folder in LAYERS + PROGRAMS:
        objs += sorted(glob.glob(os.path.join(BUILD, "obj", folder, "*.o")))
    if not objs:
        pytest.skip("nothing built in %s (make all)" % BUILD)
    return objs


def check(objs, src=None, include=None):
    args = [CHECK]
    if src:
        args += ["--src", src]
    if include:
        args += ["--include", include]
    args += [" ".join(LAYERS), " ".join(PROGRAMS)] + objs
    return subprocess.run(args, capture_output=True, text=True, cwd=ROOT)


def defined(obj):
    """The functions an object defines."""
    out = subprocess.run(["nm", "-P", "--defined-only", obj], check=True,
                         capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.split()[1] == "T"]


def planted(tmp_path, folder, calls):
    """An object in FOLDER's place that calls the function CALLS."""
    c = tmp_path / "planted.c"
    c.write_text("extern void %s(void);\nvoid planted_use(void);\n"
                 "void planted_use(void) { %s(); }\n" % (calls, calls))
    o = tmp_path / "obj" / folder / "planted.o"
    o.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-c", "-o", str(o), str(c)], check=True)
    return str(o)


def copy_tree(tmp_path):
    src, include = tmp_path / "src", tmp_path / "include"
    shutil.copytree(os.path.join(ROOT, "src"), src)
    shutil.copytree(os.path.join(ROOT, "include"), include)
    return src, include


def test_the_tree_as_built_keeps_to_its_layers():
    r = check(objects())
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_lower_layer_including_a_higher_ones_header_fails(tmp_path):
    """time/ is below routing/: cron.c may not include router.h."""
    src, include = copy_tree(tmp_path)
    cron = src / "time" / "cron.c"
    cron.write_text('#include "router.h"\n' + cron.read_text())
    r = check([], str(src), str(include))
    assert r.returncode == 1
    assert re.search(r'time/cron\.c \(time\) includes "router\.h" '
                     r'\(routing\)', r.stdout), r.stdout


def test_a_public_header_including_a_higher_layers_fails(tmp_path):
    src, include = copy_tree(tmp_path)
    h = include / "duration.h"
    h.write_text(h.read_text() + '\n#include "config.h"\n')
    r = check([], str(src), str(include))
    assert r.returncode == 1
    assert 'duration.h (time) includes "config.h" (config)' in r.stdout


def test_a_lower_layer_calling_a_higher_one_fails(tmp_path):
    objs = objects()
    verdict = os.path.join(BUILD, "obj", "routing", "verdict.o")
    fn = defined(verdict)[0]
    r = check(objs + [planted(tmp_path, "wire", fn)])
    assert r.returncode == 1
    assert "planted.o (wire) calls %s of %s (routing)" % (fn, verdict) \
        in r.stdout, r.stdout
    assert "1 use against the layers" in r.stdout


def test_a_program_using_another_fails(tmp_path):
    objs = objects()
    console = set()
    for o in glob.glob(os.path.join(BUILD, "obj", "cascade-console", "*.o")):
        console.update(defined(o))
    ctl = set()
    for o in glob.glob(os.path.join(BUILD, "obj", "cascade-ctl", "*.o")):
        ctl.update(defined(o))
    fn = sorted(console - ctl - {"main"})[0]
    r = check(objs + [planted(tmp_path, "cascade-ctl", fn)])
    assert r.returncode == 1
    assert re.search(r"planted\.o \(cascade-ctl\) calls %s of \S+ "
                     r"\(cascade-console\): cascade-console is a program"
                     % re.escape(fn), r.stdout), r.stdout


def test_the_library_using_a_program_fails(tmp_path):
    objs = objects()
    fn = defined(os.path.join(BUILD, "obj", "cascade", "daemon_fail.o"))[0]
    r = check(objs + [planted(tmp_path, "broker", fn)])
    assert r.returncode == 1
    assert "planted.o (broker) calls %s" % fn in r.stdout
    assert "cascade is a program" in r.stdout


def test_a_program_including_another_programs_header_fails(tmp_path):
    src, include = copy_tree(tmp_path)
    main = src / "cascade-publish" / "main.c"
    main.write_text('#include "../cascade-ctl/ctl.h"\n' + main.read_text())
    r = check([], str(src), str(include))
    assert r.returncode == 1
    assert 'cascade-publish/main.c (cascade-publish) includes ' \
        '"../cascade-ctl/ctl.h" (cascade-ctl)' in r.stdout, r.stdout


def test_a_folder_outside_the_layers_fails(tmp_path):
    src, include = copy_tree(tmp_path)
    (src / "misc").mkdir()
    (src / "misc" / "helper.c").write_text("int helper(void);\n")
    r = check([], str(src), str(include))
    assert r.returncode == 1
    assert "misc: a folder in neither LAYERS nor PROGRAMS" in r.stdout
