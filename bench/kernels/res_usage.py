#!/usr/bin/env python3
"""Per-kernel resource usage of nvcc object files without cuobjdump (which this
toolkit lacks): registers (EIATTR_REGCOUNT), stack frame and stack sizes
(EIATTR_FRAME_SIZE / MIN / MAX_STACK_SIZE: a non-zero frame means local memory,
spills included), static shared memory (.nv.shared.<fn>) and SASS bytes
(.text.<fn>), read from the sm_90a cubin in the object's .nv_fatbin section.

  res_usage.py OBJ...                       one line per kernel
  res_usage.py --compare BEFORE AFTER [S]   before -> after per kernel (S: a
      template-argument tail the after names add, e.g. ', false>(')
"""
import struct, sys, subprocess, os, tempfile

def cubins(obj):
    with tempfile.TemporaryDirectory() as t:
        out = os.path.join(t, 'fb')
        subprocess.run(['objcopy', '-O', 'binary', '--only-section=.nv_fatbin', obj, out], check=True)
        d = open(out, 'rb').read()
    res, i = [], 0
    while True:
        i = d.find(b'\x7fELF', i)
        if i < 0: break
        res.append(d[i:]); i += 4
    return res

def parse(elf):
    shoff, = struct.unpack_from('<Q', elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', elf, 0x3a)
    secs = []
    for k in range(shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from('<IIQQQQIIQQ', elf, shoff + k * shentsize)
        secs.append(dict(name=name, type=typ, off=off, size=size, info=info, link=link, entsize=entsize))
    strtab = secs[shstrndx]
    def sname(n):
        s = elf[strtab['off'] + n:]; return s[:s.index(b'\0')].decode()
    for s in secs: s['n'] = sname(s['name'])
    symtab = next(s for s in secs if s['type'] == 2)
    symstr = secs[symtab['link']]
    syms = []
    for k in range(symtab['size'] // 24):
        nm, info, other, shndx, val, sz = struct.unpack_from('<IBBHQQ', elf, symtab['off'] + 24 * k)
        s = elf[symstr['off'] + nm:]; syms.append(s[:s.index(b'\0')].decode())
    funcs = {}
    for s in secs:
        if s['n'].startswith('.text.'):
            f = s['n'][6:]
            funcs.setdefault(f, {})
            funcs[f].update(SASS=s['size'])
    for s in secs:
        if s['n'].startswith('.nv.shared.') and s['n'][11:] in funcs:
            funcs[s['n'][11:]]['SHARED'] = s['size']
        if s['n'].startswith('.nv.constant0.') and s['n'][14:] in funcs:
            funcs[s['n'][14:]]['CONST0'] = s['size']
    codes = {0x2f: 'REG', 0x11: 'FRAME', 0x12: 'MINSTACK', 0x23: 'MAXSTACK'}
    for s in secs:
        if s['n'] != '.nv.info': continue
        p, end = s['off'], s['off'] + s['size']
        while p < end:
            fmt, attr = elf[p], elf[p + 1]
            if fmt == 4:
                ln, = struct.unpack_from('<H', elf, p + 2)
                if attr in codes and ln == 8:
                    sym, val = struct.unpack_from('<II', elf, p + 4)
                    if syms[sym] in funcs: funcs[syms[sym]][codes[attr]] = val
                p += 4 + ln
            elif fmt == 3: p += 4
            elif fmt == 2: p += 3
            else: p += 2
    return funcs

def usage(obj):
    r = {}
    for c in cubins(obj): r.update(parse(c))
    return r

import re

def norm(name):
    # anonymous-namespace hashes and the internal namespace move differ between builds
    d = subprocess.run(['c++filt'], input=name, capture_output=True, text=True).stdout.strip()
    d = re.sub(r'\(anonymous namespace\)::', '', d)
    d = re.sub(r'gemma::kernels::wgmma_fp8::', 'gemma::kernels::', d)
    return d
def load(obj):
    return {norm(k): v for k, v in usage(obj).items()}
def compare(before_obj, after_obj, extra=None):
    before, after = load(before_obj), load(after_obj)
    keys = ('REG', 'FRAME', 'SHARED', 'SASS')
    rows, diff = [], 0
    for k in sorted(after):
        kb = k
        if extra and k not in before:
            kb = k.replace(extra, '>(')
        b = before.get(kb) or before.get(k)
        a = after[k]
        short = re.sub(r'gemma::kernels::(attention::)?', '', k).split('(')[0]
        if b is None:
            rows.append((short, None, a)); continue
        same = all(b.get(x, 0) == a.get(x, 0) for x in keys)
        diff += not same
        rows.append((short, b, a))
    for short, b, a in rows:
        f = lambda u: '/'.join(str(u.get(x, 0)) for x in keys) if u else 'new'
        print(f"{short:70s} {f(b):>24s} -> {f(a):>24s}{'' if b and all(b.get(x,0)==a.get(x,0) for x in keys) else '  *'}")
    print('kernels:', len(after), 'differing:', diff, '(REG/FRAME/SHARED/SASS bytes)')


if __name__ == '__main__':
    if len(sys.argv) > 2 and sys.argv[1] == '--compare':
        compare(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    else:
        for obj in sys.argv[1:]:
            for f, u in sorted(usage(obj).items()):
                print(os.path.basename(obj), f, ' '.join(f'{k}={u.get(k, 0)}' for k in ('REG', 'FRAME', 'MINSTACK', 'MAXSTACK', 'SHARED', 'SASS')))
