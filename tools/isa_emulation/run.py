#!/usr/bin/env python3
"""Runs kernel calls under the Bochs CPU emulator with the AVX-512 paths forced on, and checks
their outputs against the reference implementations.

The calls are prepared natively by libemu_cases.so (emulated_cases.cc); this script copies every
readable page of the process into the emulator's memory at the same virtual addresses, forces the
built-in package's ISA level to AVX-512 in that copy, runs `run(args, ctx)` for each core, copies
the outputs back and lets the native side compare them with the references. It also lists which
`*avx512*` functions the emulated code entered, to show the forced path really ran.

Usage: see README.md beside this file.
"""
import ctypes
import os
import re
import subprocess
import sys

import bochscpu
import bochscpu.cpu
import bochscpu.memory

PAGE = bochscpu.memory.page_size()
RW, CODE = 1, 0
STACK_PAGES = 512  # 2 MiB: kernels keep per-call scratch on the stack


def regions():
    for line in open("/proc/self/maps"):
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        perms, offset, path = parts[1], int(parts[2], 16), parts[5] if len(parts) > 5 else ""
        if "r" not in perms or path.startswith("[vvar") or path == "[vsyscall]" or hi - lo > (1 << 30):
            continue
        if path.startswith("/"):
            # Pages of a file mapping past the end of the file fault (SIGBUS) when read.
            try:
                end_of_file = lo + os.path.getsize(path) - offset
            except OSError:
                continue
            hi = min(hi, (end_of_file + PAGE - 1) // PAGE * PAGE)
        if hi > lo:
            yield lo, hi, perms, path


def fs_base():
    libc = ctypes.CDLL(None, use_errno=True)
    base = ctypes.c_ulong()
    assert libc.syscall(158, 0x1003, ctypes.byref(base)) == 0  # arch_prctl(ARCH_GET_FS)
    return base.value


def symbol_ranges(lib_path, load_base):
    """(start, end, name) of the package's functions, for naming the code the emulator ran."""
    out = subprocess.run(["nm", "-C", "-S", "--defined-only", lib_path], capture_output=True, text=True).stdout
    syms = []
    for line in out.splitlines():
        m = re.match(r"([0-9a-f]+) ([0-9a-f]+) [tTwW] (.*)", line)
        if m:
            start = load_base + int(m.group(1), 16)
            syms.append((start, start + int(m.group(2), 16), m.group(3)))
    return syms


def load_base_of(lib_path):
    real = os.path.realpath(lib_path)
    for lo, _, _, path in regions():
        if path == real:
            return lo
    raise RuntimeError(f"{lib_path} is not mapped")


class Emulator:
    def __init__(self):
        self.next_gpa = 0x100_0000
        self.pt = bochscpu.memory.PageMapLevel4Table()
        self.pages = {}  # va -> hva

    def map_page(self, va, flags):
        hva = bochscpu.memory.allocate_host_page()
        gpa = self.next_gpa
        self.next_gpa += PAGE
        bochscpu.memory.page_insert(gpa, hva)
        self.pt.insert(va, gpa, flags)
        self.pages[va] = hva
        return hva

    def snapshot_process(self):
        for lo, hi, perms, _ in regions():
            for va in range(lo, hi, PAGE):
                hva = self.map_page(va, CODE if "x" in perms else RW)
                ctypes.memmove(hva, va, PAGE)

    def add_private(self, va, size):
        for p in range(va, va + size, PAGE):
            ctypes.memset(self.map_page(p, RW), 0, PAGE)

    def commit(self, pml4=0x10_0000):
        for hva, gpa in self.pt.commit(pml4):
            bochscpu.memory.page_insert(gpa, hva)
        self.pml4 = pml4

    def poke(self, va, data):
        ctypes.memmove(self.pages[va & ~(PAGE - 1)] + (va & (PAGE - 1)), data, len(data))

    def read(self, va, size):
        return bytes(bochscpu.memory.virt_read(self.pml4, va, size))

    def call(self, fn, arg0, arg1, stack_top, return_to, fsbase, on_rip, state_out=None):
        sess = bochscpu.Session()
        sess.missing_page_handler = lambda gpa: (_ for _ in ()).throw(RuntimeError(f"missing page {gpa:#x}"))
        s = bochscpu.State()
        bochscpu.cpu.set_long_mode(s)
        s.cr3 = self.pml4
        s.cr4 = s.cr4 | (1 << 9) | (1 << 10) | (1 << 18)  # OSFXSR, OSXMMEXCPT, OSXSAVE
        s.xcr0 = 0xE7  # x87, SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
        s.mxcsr = 0x1F80
        rsp = stack_top - 72  # at entry rsp + 8 is 16-byte aligned (SysV ABI)
        self.poke(rsp, return_to.to_bytes(8, "little"))
        s.rsp, s.rip, s.rdi, s.rsi = rsp, fn, arg0, arg1
        cs = bochscpu.Segment()
        cs.present, cs.selector, cs.base, cs.limit, cs.attr = True, 0x33, 0, 0xFFFFFFFF, 0x22FB
        ds = bochscpu.Segment()
        ds.present, ds.selector, ds.base, ds.limit, ds.attr = True, 0x2B, 0, 0xFFFFFFFF, 0xCF3
        fs = bochscpu.Segment()
        fs.present, fs.selector, fs.base, fs.limit, fs.attr = True, 0x2B, fsbase, 0xFFFFFFFF, 0xCF3
        s.cs, s.ds, s.ss, s.es, s.gs, s.fs = cs, ds, ds, ds, ds, fs
        sess.cpu.state = s
        result = {}

        def exception(sess, cpu_id, vector, error):
            result["vector"], result["rip"] = vector, sess.cpu.rip
            sess.stop()

        def before(sess, cpu_id, _):
            on_rip(sess.cpu.rip)

        hook = bochscpu.Hook()
        hook.exception = exception
        hook.before_execution = before
        sess.run([hook])
        st = sess.cpu.state
        if state_out is not None:
            state_out["state"] = st
        return result, st.rax & 0xFFFFFFFF


def emulated_cpu_features():
    """CPUID leaf 7 as the emulated CPU reports it: which AVX-512 extensions ran for real."""
    emu = Emulator()
    code_va, stack, trap = 0x7E00_2000_0000, 0x7E00_3000_0000, 0x7E00_4000_0000
    for va in (code_va, trap):
        emu.add_private(va, PAGE)
    emu.add_private(stack, 4 * PAGE)
    # mov eax, 7; mov ecx, 1; cpuid; mov esi, eax; mov eax, 7; xor ecx, ecx; cpuid; ret
    code = bytes.fromhex("b807000000" "b901000000" "0fa2" "89c6" "b807000000" "31c9" "0fa2" "c3")
    emu.poke(code_va, code)
    emu.poke(trap, b"\xf4")
    emu.commit()
    sess_state = {}
    emu.call(code_va, 0, 0, stack + 4 * PAGE, trap, 0, lambda rip: None, state_out=sess_state)
    st = sess_state["state"]
    ebx, ecx, eax1 = st.rbx, st.rcx, st.rsi
    names = {"avx512f": ebx >> 16, "avx512bw": ebx >> 30, "avx512vl": ebx >> 31, "avx512_vnni": ecx >> 11,
             "avx512_bf16": eax1 >> 5, "avx_vnni": eax1 >> 4}
    for hva in emu.pages.values():
        bochscpu.memory.release_host_page(hva)
    return {k: bool(v & 1) for k, v in names.items()}


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    cases_lib = os.path.join(build, "tools", "isa_emulation", "libemu_cases.so")
    builtin = os.path.join(build, "lib", "libsk_kernels_builtin.so")
    lib = ctypes.CDLL(os.path.abspath(cases_lib))
    lib.emu_case_name.restype = ctypes.c_char_p
    lib.emu_case_kernel.restype = ctypes.c_char_p
    for f in ("emu_run_fn", "emu_args", "emu_ctx", "emu_output", "emu_message"):
        getattr(lib, f).restype = ctypes.c_void_p
    lib.emu_output_bytes.restype = ctypes.c_uint64

    assert lib.emu_build(0, 1) == 0  # loads the package
    base = load_base_of(builtin)
    syms = symbol_ranges(builtin, base)
    out = subprocess.run(["nm", "-C", builtin], capture_output=True, text=True).stdout
    m = re.search(r"^([0-9a-f]+) d sk::kernels::\(anonymous namespace\)::g_forced_level$", out, re.M)
    assert m, "g_forced_level not found in the package's symbols"
    forced_level_va = base + int(m.group(1), 16)
    avx512_funcs = [s for s in syms if "avx512" in s[2].lower()]

    features = emulated_cpu_features()
    print("emulated CPU: " + ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in features.items()))
    if not (features["avx512f"] and features["avx512bw"] and features["avx512vl"]):
        print("the emulator does not offer AVX-512 F/BW/VL: nothing to check")
        return 1
    cores = 2
    failures = 0
    for i in range(lib.emu_num_cases()):
        name = lib.emu_case_name(i).decode()
        assert lib.emu_build(i, cores) == 0, name
        emu = Emulator()
        emu.snapshot_process()
        stack, trap = 0x7E00_0000_0000, 0x7E00_1000_0000
        emu.add_private(stack, STACK_PAGES * PAGE)
        emu.add_private(trap, PAGE)
        emu.poke(trap, b"\xf4")  # hlt: faults at CPL 3, which ends the call
        emu.poke(forced_level_va, (2).to_bytes(4, "little"))  # std::atomic<int> = kIsaAvx512 (cpu_isa.h)
        emu.commit()
        entered = set()
        rips = set()
        for core in range(cores):
            result, rc = emu.call(lib.emu_run_fn(i), lib.emu_args(i), lib.emu_ctx(i, core), stack + STACK_PAGES * PAGE,
                                  trap, fs_base(), rips.add)
            if result.get("rip") not in (trap, trap + 1):
                rip = result.get("rip", 0)
                where = [f"{sym} +{rip - start:#x} (package offset {rip - base:#x})" for start, end, sym in syms
                         if start <= rip < end]
                print(f"FAIL {name}: core {core} stopped by exception {result.get('vector')} at "
                      f"{where[0] if where else hex(rip)} instead of returning")
                failures += 1
                break
            if rc != 0:
                # The kernel wrote its message into the emulator's copy of the buffer.
                text = emu.read(lib.emu_message(i, core), 256).split(b"\0")[0].decode(errors="replace")
                print(f"FAIL {name}: core {core} returned {rc}: {text}")
                failures += 1
                break
        else:
            for o in range(lib.emu_num_outputs(i)):
                ptr, size = lib.emu_output(i, o), lib.emu_output_bytes(i, o)
                ctypes.memmove(ptr, emu.read(ptr, size), size)
            for start, end, sym in avx512_funcs:
                if any(start <= r < end for r in rips):
                    entered.add(re.sub(r"\(.*", "", sym.replace("(anonymous namespace)::", "")))
            msg = ctypes.create_string_buffer(256)
            bad = lib.emu_check(i, msg, 256)
            expect_avx512 = lib.emu_case_has_avx512_path(i) != 0
            status = "ok  " if bad == 0 and (entered or not expect_avx512) else "FAIL"
            failures += status != "ok  "
            detail = msg.value.decode() if bad else f"{len(rips)} distinct instructions"
            print(f"{status} {name} ({lib.emu_case_kernel(i).decode()}, {cores} cores): {detail}; "
                  f"AVX-512 functions entered: {', '.join(sorted(entered)) or 'none'}"
                  f"{'' if expect_avx512 else ' (none expected: no AVX-512 code on this path)'}")
        for hva in emu.pages.values():
            bochscpu.memory.release_host_page(hva)
    print(f"{failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
