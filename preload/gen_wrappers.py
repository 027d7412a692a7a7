#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Generates the preload library's wrappers from preload/mpi_functions.def.

Outputs (all into --out, normally $(B)/gen/preload):
  mpi_pstate_fn.h   X-macro table of the wrapped functions (id, name, kind)
  front_syms.h      every exported symbol of the front library, in slot order
  front.S           the front library: one `jmp *slot(%rip)` trampoline per
                    symbol and one lazy resolver stub per symbol, for x86-64
                    and (the same list, `adrp; ldr; br x16`) for aarch64
  wrappers.c        the ABI backend: C, Fortran and mpi_f08 entry points, each
                    calling the next definition of its own symbol (a PMPI tool
                    later in the search order, else the MPI: PMPI_X for C),
                    and the table the front fills its slots from; compiled
                    once per MPI with that MPI's mpi.h

  gen_wrappers.py [--def FILE] --out DIR           write the files (only those that changed)
  gen_wrappers.py [--def FILE] --out DIR --check   exit 1 if any file is missing or differs
  gen_wrappers.py [--def FILE] --list              print the symbol table (sym, function, binding)

Stdlib only, deterministic: the output depends on the .def file alone.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from string import Template
from typing import Dict, List, Optional, Tuple

from wrapper_table import (  # noqa: E402  (beside this script)
    BANNER,
    DefError,
    Func,
    Sym,
    parse_def,
    symbols,
    syms_hash,
)

# ---------------------------------------------------------------------------
# mpi_pstate_fn.h

FN_H = Template("""\
/* $banner */
#ifndef MPI_PSTATE_GEN_FN_H
#define MPI_PSTATE_GEN_FN_H

/* MPI_PSTATE_FUNCTIONS(X): X(id, name, kind, blocking, app) per wrapped
 * function; id is the index into the slot's fn[] table, app is 0 for the
 * life cycle calls (init, finalize, abort) that frame the application. */
#define MPI_PSTATE_FUNCTIONS(X) \\
$rows

#define MPI_PSTATE_NFUNCS $nfuncs

enum mpi_pstate_fn_id {
$enum
};

#endif
""")


def gen_fn_h(funcs: List[Func]) -> str:
    rows = " \\\n".join(
        f'        X({f.fid}, "{f.name}", "{f.kind}", {int(f.blocking)}, {int(f.family == "call")})'
        for f in funcs)
    enum = "\n".join(f"        MPI_PSTATE_FN_{f.name[4:].upper()} = {f.fid}," for f in funcs)
    return FN_H.substitute(banner=BANNER, rows=rows, nfuncs=len(funcs), enum=enum)


# ---------------------------------------------------------------------------
# front_syms.h

SYMS_H = Template("""\
/* $banner */
#ifndef MPI_PSTATE_GEN_FRONT_SYMS_H
#define MPI_PSTATE_GEN_FRONT_SYMS_H

#define MPI_PSTATE_NSYMS $nsyms
/* FNV-1a of the symbol list: the front refuses a backend built from another list. */
#define MPI_PSTATE_SYMS_HASH UINT64_C(0x$hash)

/* Exported symbols of the front library, in slot order. */
#define MPI_PSTATE_SYM_NAMES \\
$names

/* Per symbol, in slot order: the MPI's own profiling entry point a C
 * wrapper falls back to (PMPI_X) when the next definition of MPI_X is the
 * MPI library's; NULL for Fortran and mpi_f08 symbols, which always call
 * the MPI's binding of their own name. */
#define MPI_PSTATE_SYM_PMPI \\
$pmpi

#endif
""")


def gen_syms_h(syms: List[Sym]) -> str:
    names = " \\\n".join(f'        "{s.name}",' for s in syms)
    pmpi = " \\\n".join(f'        "P{s.name}",' if s.binding == "c" else "        NULL,"
                          for s in syms)
    return SYMS_H.substitute(banner=BANNER, nsyms=len(syms), hash=f"{syms_hash(syms):016x}",
                             names=names, pmpi=pmpi)


# ---------------------------------------------------------------------------
# front.S

FRONT_HEAD = Template("""\
/* $banner
 *
 * The ABI-neutral front library: each exported MPI symbol is one indirect
 * jump through its slot.  A slot first points to the symbol's resolver stub
 * (symbol index in a scratch register, then the common resolver
 * mpi_pstate_front_lazy), which fills the whole table once and jumps on;
 * afterwards the cost of a call is this one jump.  One block per
 * architecture, each generated from the same symbol list. */
""")

# x86-64: the index travels in %r11 (call-clobbered, no argument register).
X86_HEAD = """\
#if defined(__x86_64__)
#include <cet.h>

        .text
"""

TRAMPOLINE = Template("""\
        .p2align 4
        .globl $name
        .type $name, @function
$name:
        _CET_ENDBR
        jmp *mpi_pstate_front_slots+$offset(%rip)
        .size $name, .-$name
""")

STUB = Template("""\
        .p2align 3
.Lstub_$index:
        _CET_ENDBR
        movl $$$index, %r11d
        jmp mpi_pstate_front_lazy
""")

X86_LAZY = """\

/* Common resolver: keeps every argument register (integer, vector and %al
 * for varargs) and the stack exactly as the caller left them, asks
 * mpi_pstate_front_resolve(index) for the target and jumps there. */
        .p2align 4
        .type mpi_pstate_front_lazy, @function
mpi_pstate_front_lazy:
        pushq %rbp
        movq %rsp, %rbp
        pushq %rdi
        pushq %rsi
        pushq %rdx
        pushq %rcx
        pushq %r8
        pushq %r9
        pushq %rax
        pushq %r10
        subq $128, %rsp
        andq $-16, %rsp
        movdqa %xmm0, 0(%rsp)
        movdqa %xmm1, 16(%rsp)
        movdqa %xmm2, 32(%rsp)
        movdqa %xmm3, 48(%rsp)
        movdqa %xmm4, 64(%rsp)
        movdqa %xmm5, 80(%rsp)
        movdqa %xmm6, 96(%rsp)
        movdqa %xmm7, 112(%rsp)
        movl %r11d, %edi
        call mpi_pstate_front_resolve
        movq %rax, %r11
        movdqa 0(%rsp), %xmm0
        movdqa 16(%rsp), %xmm1
        movdqa 32(%rsp), %xmm2
        movdqa 48(%rsp), %xmm3
        movdqa 64(%rsp), %xmm4
        movdqa 80(%rsp), %xmm5
        movdqa 96(%rsp), %xmm6
        movdqa 112(%rsp), %xmm7
        leaq -64(%rbp), %rsp
        popq %r10
        popq %rax
        popq %r9
        popq %r8
        popq %rcx
        popq %rdx
        popq %rsi
        popq %rdi
        popq %rbp
        jmp *%r11
        .size mpi_pstate_front_lazy, .-mpi_pstate_front_lazy
"""

# aarch64: x16/x17 are the intra-procedure-call scratch registers (what a
# PLT entry or a linker veneer may clobber), so a trampoline may use them
# and no argument register is touched.  `hint 34` is `bti c`, a no-op on
# cores without BTI; a `br x16`/`br x17` may land on it (the PLT reaches
# the trampoline with `br x17`, the trampoline reaches the stub with br x16).
A64_HEAD = """\
#elif defined(__aarch64__)

        .text
"""

A64_TRAMPOLINE = Template("""\
        .p2align 4
        .globl $name
        .type $name, %function
$name:
        hint 34
        adrp x16, mpi_pstate_front_slots+$offset
        ldr x16, [x16, #:lo12:mpi_pstate_front_slots+$offset]
        br x16
        .size $name, .-$name
""")

A64_STUB = Template("""\
        .p2align 3
.Lstub_$index:
        hint 34
        mov w17, #$index
        b mpi_pstate_front_lazy
""")

A64_LAZY = """\

/* Common resolver: keeps the argument registers x0-x7, the indirect-result
 * register x8, v0-v7 (whole q registers) and the stack exactly as the
 * caller left them, asks mpi_pstate_front_resolve(index) for the target and
 * jumps there.  Reached only by a direct branch from a stub. */
        .p2align 4
        .type mpi_pstate_front_lazy, %function
mpi_pstate_front_lazy:
        stp x29, x30, [sp, #-224]!
        mov x29, sp
        stp x0, x1, [sp, #16]
        stp x2, x3, [sp, #32]
        stp x4, x5, [sp, #48]
        stp x6, x7, [sp, #64]
        str x8, [sp, #80]
        stp q0, q1, [sp, #96]
        stp q2, q3, [sp, #128]
        stp q4, q5, [sp, #160]
        stp q6, q7, [sp, #192]
        mov w0, w17
        bl mpi_pstate_front_resolve
        mov x16, x0
        ldp q0, q1, [sp, #96]
        ldp q2, q3, [sp, #128]
        ldp q4, q5, [sp, #160]
        ldp q6, q7, [sp, #192]
        ldp x0, x1, [sp, #16]
        ldp x2, x3, [sp, #32]
        ldp x4, x5, [sp, #48]
        ldp x6, x7, [sp, #64]
        ldr x8, [sp, #80]
        ldp x29, x30, [sp], #224
        br x16
        .size mpi_pstate_front_lazy, .-mpi_pstate_front_lazy

/* Built with -mbranch-protection: tell the linker that this object has BTI
 * landing pads and signs no return address it would need to (the lazy
 * resolver saves x30 only around its own call), so the library keeps the
 * BTI/PAC marking the C objects give it. */
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define MPI_PSTATE_FRONT_BTI 1
#else
#define MPI_PSTATE_FRONT_BTI 0
#endif
#if defined(__ARM_FEATURE_PAC_DEFAULT)
#define MPI_PSTATE_FRONT_PAC 2
#else
#define MPI_PSTATE_FRONT_PAC 0
#endif
#if MPI_PSTATE_FRONT_BTI || MPI_PSTATE_FRONT_PAC
        .pushsection .note.gnu.property, "a"
        .p2align 3
        .word 4
        .word 16
        .word 5
        .asciz "GNU"
        .word 0xc0000000
        .word 4
        .word MPI_PSTATE_FRONT_BTI + MPI_PSTATE_FRONT_PAC
        .word 0
        .popsection
#endif
"""

# The slot table and the stub table, the same on every architecture but for
# the assembler's type prefix ('@' on x86, '%' on aarch64).
FRONT_DATA = Template("""\

        .section .data.rel,"aw"
        .p2align 6
        .globl mpi_pstate_front_slots
        .hidden mpi_pstate_front_slots
        .type mpi_pstate_front_slots, ${t}object
mpi_pstate_front_slots:
$slots
        .size mpi_pstate_front_slots, $size

        .section .data.rel.ro,"aw"
        .p2align 3
        .globl mpi_pstate_front_stubs
        .hidden mpi_pstate_front_stubs
        .type mpi_pstate_front_stubs, ${t}object
mpi_pstate_front_stubs:
$slots
        .size mpi_pstate_front_stubs, $size

        .section .note.GNU-stack,"",${t}progbits
""")

FRONT_TAIL = """\
#else
#error "front.S: no trampolines for this architecture (gen_wrappers.py knows x86-64 and aarch64)"
#endif
"""


def gen_front_s(syms: List[Sym]) -> str:
    slots = "\n".join(f"        .quad .Lstub_{s.index}" for s in syms)
    data = {"slots": slots, "size": 8 * len(syms)}
    out = [FRONT_HEAD.substitute(banner=BANNER), X86_HEAD]
    out += [TRAMPOLINE.substitute(name=s.name, offset=8 * s.index) for s in syms]
    out.append("\n/* resolver stubs, one per symbol */\n")
    out += [STUB.substitute(index=s.index) for s in syms]
    out += [X86_LAZY, FRONT_DATA.substitute(data, t="@"), A64_HEAD]
    out += [A64_TRAMPOLINE.substitute(name=s.name, offset=8 * s.index) for s in syms]
    out.append("\n/* resolver stubs, one per symbol */\n")
    out += [A64_STUB.substitute(index=s.index) for s in syms]
    out += [A64_LAZY, FRONT_DATA.substitute(data, t="%"), FRONT_TAIL]
    return "".join(out)


# ---------------------------------------------------------------------------
# wrappers.c

WRAP_HEAD = Template("""\
/* $banner
 *
 * The ABI backend: compiled once per MPI family against that MPI's mpi.h,
 * so every prototype below is checked by the compiler.  Every entry point
 * calls the next definition of its own symbol, which the front resolved
 * once (mpi_pstate_rt.next[symbol index]): a PMPI tool later in the search
 * order (mpiP, Score-P, a site's own), else the MPI itself (PMPI_X for C,
 * the MPI's Fortran binding for Fortran and mpi_f08).  Calling PMPI_X
 * directly would make every tool after us blind.  The thread-local depth
 * counter makes a call that re-enters through another binding or through a
 * tool (MPICH's mpi_x_ calls MPI_X; a tool's wrapper calls MPI_Comm_rank)
 * count once, in the outermost entry, and still go on down the chain. */
#include <mpi.h>
#include <stdint.h>

#include "hooks.h"
#include "mpi_pstate_fn.h"
#include "front_syms.h"

#define MP_SINCE(maj, min) (MPI_VERSION > (maj) || (MPI_VERSION == (maj) && MPI_SUBVERSION >= (min)))

/* The PMPI references left (type sizes) are weak, so one backend loads
 * into any library of its ABI family. */
#pragma weak PMPI_Type_size
#pragma weak PMPI_Type_f2c

static inline uint64_t mp_count_bytes(MPI_Count count, MPI_Datatype type)
{
        int size = 0;

        if (count <= 0 || PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0)
                return 0;
        return (uint64_t)count * (uint64_t)size;
}

static inline uint64_t mp_type_bytes(int count, MPI_Datatype type)
{
        return mp_count_bytes(count, type);
}

static inline uint64_t mp_ftype_bytes(const void *count, const void *type)
{
        return mp_type_bytes((int)*(const MPI_Fint *)count, PMPI_Type_f2c(*(const MPI_Fint *)type));
}

/* Large-count functions (MPI_X_c) take an MPI_Count, in Fortran an
 * INTEGER(KIND=MPI_COUNT_KIND), which is the same type. */
static inline uint64_t mp_fcount_bytes(const void *count, const void *type)
{
        return mp_count_bytes(*(const MPI_Count *)count, PMPI_Type_f2c(*(const MPI_Fint *)type));
}
""")

C_CALL = Template("""\
#if MP_SINCE($maj, $min)
typedef $ret (*mp_c_$name)($formals);
MP_WRAPPER $ret $name($formals)
{
        struct mpi_pstate_tls *tls = &mpi_pstate_tls;
        $ret rc;

        if (tls->depth++ || !mpi_pstate_rt.active) {
                mp_check_init();
                rc = ((mp_c_$name)mp_next($sym))($args);
                tls->depth--;
                return rc;
        }
        uint64_t t0 = mp_now();
$begin
        rc = ((mp_c_$name)mp_next($sym))($args);
        uint64_t t1 = mp_now();
$end
        tls->depth--;
        mp_record($fid, t1 - t0, $has_bytes, $bytes, $blocking);
        return rc;
}
#endif
""")

# MPI_Init* and MPI_Finalize differ only in the hook pair they call.
C_LIFECYCLE = """\
#if MP_SINCE($maj, $min)
typedef $ret (*mp_c_$name)($formals);
$ret $name($formals)
{
        mp_c_$name real = (mp_c_$name)mpi_pstate_rt.next[$sym];
        struct mpi_pstate_tls *tls = &mpi_pstate_tls;
        $ret rc;

        if (tls->depth++) {
                rc = real($args);
                tls->depth--;
                return rc;
        }
        uint64_t t0 = mpi_pstate_hook_@PHASE@_begin();
        rc = real($args);
        mpi_pstate_hook_@PHASE@_end($fid, t0);
        tls->depth--;
        return rc;
}
#endif
"""
C_INIT = Template(C_LIFECYCLE.replace("@PHASE@", "init"))
C_FINALIZE = Template(C_LIFECYCLE.replace("@PHASE@", "finalize"))

C_ABORT = Template("""\
#if MP_SINCE($maj, $min)
typedef $ret (*mp_c_$name)($formals);
$ret $name($formals)
{
        mp_c_$name real = (mp_c_$name)mpi_pstate_rt.next[$sym];
        struct mpi_pstate_tls *tls = &mpi_pstate_tls;
        $ret rc;

        if (tls->depth++ == 0)
                mpi_pstate_hook_abort($fid);
        rc = real($args);
        tls->depth--;
        return rc;
}
#endif
""")

F_CALL = Template("""\
/* Fortran / mpi_f08 bindings of $name: $fargs arguments, all by reference */
typedef void (*mp_f_$name)($fformals_types);
MP_WRAPPER static void f_$name(unsigned sym, $fformals)
{
        struct mpi_pstate_tls *tls = &mpi_pstate_tls;

        if (tls->depth++ || !mpi_pstate_rt.active) {
                mp_check_init();
                ((mp_f_$name)mp_next(sym))($fargs_list);
                tls->depth--;
                return;
        }
        uint64_t t0 = mp_now();
$begin
        ((mp_f_$name)mp_next(sym))($fargs_list);
        uint64_t t1 = mp_now();
$end
        tls->depth--;
        mp_record($fid, t1 - t0, $has_bytes, $bytes, $blocking);
}
""")

F_LIFECYCLE = """\
typedef void (*mp_f_$name)($fformals_types);
static void f_$name(unsigned sym, $fformals)
{
        mp_f_$name real = (mp_f_$name)mpi_pstate_rt.next[sym];
        struct mpi_pstate_tls *tls = &mpi_pstate_tls;

        if (tls->depth++) {
                real($fargs_list);
                tls->depth--;
                return;
        }
        uint64_t t0 = mpi_pstate_hook_@PHASE@_begin();
        real($fargs_list);
        mpi_pstate_hook_@PHASE@_end($fid, t0);
        tls->depth--;
}
"""
F_INIT = Template(F_LIFECYCLE.replace("@PHASE@", "init"))
F_FINALIZE = Template(F_LIFECYCLE.replace("@PHASE@", "finalize"))

F_ABORT = Template("""\
typedef void (*mp_f_$name)($fformals_types);
static void f_$name(unsigned sym, $fformals)
{
        mp_f_$name real = (mp_f_$name)mpi_pstate_rt.next[sym];
        struct mpi_pstate_tls *tls = &mpi_pstate_tls;

        if (tls->depth++ == 0)
                mpi_pstate_hook_abort($fid);
        real($fargs_list);
        tls->depth--;
}
""")

F_ENTRY = Template("""\
MP_WRAPPER static void e_$index($fformals)
{
        f_$name($index, $fargs_list);
}
""")

WRAP_TAIL = Template("""\

/* Slot order of the front (front_syms.h); NULL: not wrapped by this build,
 * the front jumps straight to the MPI. */
static void *const wrappers[MPI_PSTATE_NSYMS] = {
$table
};

__attribute__((visibility("default"))) const struct mpi_pstate_backend mpi_pstate_backend_table = {
        .version = MPI_PSTATE_BACKEND_VERSION,
        .nsyms = MPI_PSTATE_NSYMS,
        .syms_hash = MPI_PSTATE_SYMS_HASH,
        .abi = MPI_PSTATE_BACKEND_ABI,
        .abi_name = MPI_PSTATE_BACKEND_ABI_NAME,
        .attach = mpi_pstate_hook_attach,
        .wrappers = wrappers,
};
""")


def count_is_large(f: Func, count: str) -> bool:
    return next(p.ctype for p in f.params if p.name == count) == "MPI_Count"


def c_bytes(f: Func) -> str:
    parts = []
    for t in f.terms:
        helper = "mp_count_bytes" if count_is_large(f, t.count) else "mp_type_bytes"
        e = f"{helper}({t.count}, {t.dtype})"
        if t.guard:
            e = f"({t.guard} != MPI_IN_PLACE ? {e} : 0)"
        parts.append(e)
    return " + ".join(parts) if parts else "0"


def f_bytes(f: Func) -> Tuple[int, str]:
    pos = {p.name: i for i, p in enumerate(f.params)}
    parts = [f"{'mp_fcount_bytes' if count_is_large(f, t.count) else 'mp_ftype_bytes'}"
             f"(a{pos[t.count]}, a{pos[t.dtype]})" for t in f.terms if not t.guard]
    return (1 if parts else 0), (" + ".join(parts) if parts else "0")


def wait_code(f: Func) -> Tuple[str, str]:
    if not f.blocking:
        return "", ""
    return (f"        if (tls->main)\n                mp_wait_begin({f.fid}, t0);",
            "        if (tls->main)\n                mp_wait_end(t0, t1);")


def gen_wrappers_c(funcs: List[Func], syms: List[Sym]) -> str:
    out = [WRAP_HEAD.substitute(banner=BANNER)]
    c_index = {s.func.name: s.index for s in syms if s.binding == "c"}
    c_tmpl = {"call": C_CALL, "init": C_INIT, "finalize": C_FINALIZE, "abort": C_ABORT}
    f_tmpl = {"call": F_CALL, "init": F_INIT, "finalize": F_FINALIZE, "abort": F_ABORT}
    for f in funcs:
        out.append(f"\n/* ---- {f.name} (id {f.fid}, {f.kind}) */\n")
        formals = ", ".join(f"{p.ctype} {p.name}".replace("* ", "*") for p in f.params) or "void"
        args = ", ".join(p.name for p in f.params)
        begin, end = wait_code(f)
        out.append(c_tmpl[f.family].substitute(
            maj=f.since[0], min=f.since[1], ret=f.ret, name=f.name, formals=formals, args=args,
            sym=c_index[f.name],
            fid=f"MPI_PSTATE_FN_{f.name[4:].upper()}", begin=begin, end=end,
            has_bytes=1 if f.terms else 0, bytes=c_bytes(f), blocking=int(f.blocking)))
        if not f.fortran:
            continue
        fformals = ", ".join(f"void *a{i}" for i in range(f.fargs))
        ftypes = ", ".join("void *" for _ in range(f.fargs))
        fargs_list = ", ".join(f"a{i}" for i in range(f.fargs))
        has_fb, fb = f_bytes(f)
        out.append(f_tmpl[f.family].substitute(
            name=f.name, fargs=f.fargs, fformals=fformals, fformals_types=ftypes,
            fargs_list=fargs_list, fid=f"MPI_PSTATE_FN_{f.name[4:].upper()}", begin=begin,
            end=end, has_bytes=has_fb, bytes=fb, blocking=int(f.blocking)))
        for s in syms:
            if s.func is f and s.binding != "c":
                out.append(F_ENTRY.substitute(index=s.index, name=f.name, fformals=fformals,
                                              fargs_list=fargs_list))
    rows = []
    for s in syms:
        if s.binding == "c":
            f = s.func
            rows.append(f"#if MP_SINCE({f.since[0]}, {f.since[1]})\n"
                        f"        (void *){s.name}, /* {s.index} */\n#else\n"
                        f"        NULL, /* {s.index} {s.name} */\n#endif")
        else:
            rows.append(f"        (void *)e_{s.index}, /* {s.index} {s.name} */")
    out.append(WRAP_TAIL.substitute(table="\n".join(rows)))
    return "".join(out)


# ---------------------------------------------------------------------------

def generate(def_path: str) -> Dict[str, str]:
    funcs = parse_def(def_path)
    syms = symbols(funcs)
    return {
        "mpi_pstate_fn.h": gen_fn_h(funcs),
        "front_syms.h": gen_syms_h(syms),
        "front.S": gen_front_s(syms),
        "wrappers.c": gen_wrappers_c(funcs, syms),
    }


def main(argv: Optional[List[str]] = None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--def", dest="def_path", default=os.path.join(here, "mpi_functions.def"))
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--check", action="store_true",
                    help="validate the list and compare with the files in --out; write nothing")
    ap.add_argument("--list", action="store_true", help="print the symbol table")
    a = ap.parse_args(argv)
    try:
        files = generate(a.def_path)
    except (DefError, OSError) as e:
        print(f"gen_wrappers: {e}", file=sys.stderr)
        return 2
    if a.list:
        for s in symbols(parse_def(a.def_path)):
            print(f"{s.index}\t{s.name}\t{s.func.name}\t{s.binding}")
        return 0
    if not a.out:
        if a.check:
            return 0  # the list parses: nothing to compare with
        ap.error("--out is required")
    stale = []
    for name, text in sorted(files.items()):
        path = os.path.join(a.out, name)
        try:
            with open(path, encoding="ascii") as f:
                same = f.read() == text
        except FileNotFoundError:
            same = False
        if same:
            continue
        if a.check:
            stale.append(name)
            continue
        os.makedirs(a.out, exist_ok=True)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="ascii") as f:
            f.write(text)
        os.replace(tmp, path)
    if stale:
        print(f"gen_wrappers: out of date in {a.out}: {', '.join(stale)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
