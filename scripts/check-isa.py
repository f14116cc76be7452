#!/usr/bin/env python3
"""Checks that a g4 binary runs on any x86-64-v2 CPU: no function outside
the CPU backend's AVX2 / AVX-512 kernel variants (namespaces
g4::cpu::avx2 and g4::cpu::avx512, src/backend/cpu/isa.h) contains an
instruction an x86-64-v2 CPU lacks (any VEX / EVEX-encoded instruction:
AVX, AVX2, FMA, F16C, AVX-512; BMI1/2, LZCNT, MOVBE).

    scripts/check-isa.py build/g4 [more binaries]

Prints the offending functions (at most 20 per binary) and exits 1 if
there are any. Needs objdump (binutils).
"""
import re
import subprocess
import sys

# Mnemonics x86-64-v2 lacks. VEX/EVEX instructions all start with 'v' (and
# every 'v' instruction x86-64-v2 has is none: verr/verw are not emitted by
# compilers), plus the scalar BMI / LZCNT / MOVBE ones.
V3_SCALAR = {"andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi", "mulx", "pdep", "pext", "rorx", "sarx", "shlx",
             "shrx", "lzcnt", "tzcnt", "movbe", "kmovw", "kmovb", "kmovd", "kmovq"}
ALLOWED_NAMESPACES = ("g4::cpu::avx2::", "g4::cpu::avx512::")


def check(path):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", path], check=True, capture_output=True,
                         text=True).stdout
    bad = {}
    func = None
    header = re.compile(r"^[0-9a-f]+ <(.*)>:$")
    for line in out.splitlines():
        m = header.match(line)
        if m:
            func = m.group(1)
            continue
        if func is None or "\t" not in line:
            continue
        parts = line.split("\t")
        if len(parts) < 2:
            continue
        mnemonic = parts[1].split()[0] if parts[1].split() else ""
        if mnemonic.startswith("v") and mnemonic not in ("verr", "verw") or mnemonic in V3_SCALAR:
            # Lambdas, templates and OpenMP outlined bodies of a variant carry
            # its namespace somewhere in their demangled name.
            if any(ns in func for ns in ALLOWED_NAMESPACES):
                continue
            bad.setdefault(func, mnemonic)
    return bad


def main():
    failed = False
    for path in sys.argv[1:]:
        bad = check(path)
        if bad:
            failed = True
            print(f"{path}: {len(bad)} functions outside the AVX2/AVX-512 kernel variants use instructions "
                  f"an x86-64-v2 CPU lacks:")
            for func, mnemonic in list(bad.items())[:20]:
                print(f"  {mnemonic:12s} {func}")
        else:
            print(f"{path}: ok (x86-64-v2 outside the kernel variants)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
