# Lane-level emulation of DecodeKeyRowsKernel's fragment plumbing
# (kernels/attention/decode_key_rows.cuh) on the CPU: the PTX register layouts
# of ldmatrix, ldmatrix.trans, movmatrix.trans, mma.m16n8k16 and
# cvt e4m3x2 -> f16x2, the byte permutes and both shared-memory swizzles, one
# block, one split, against a float64 attention reference. A check of the
# index math while writing the kernel, not a substitute for its GPU test.
#   /usr/bin/python3 scripts/dev/emulate_decode_key_rows.py SEED D GROUP KEYS WINDOW [bf16|e4m3] [SPLIT]
import numpy as np, math, sys
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)

def e4m3(b):
    s = -1.0 if b & 0x80 else 1.0
    e = (b >> 3) & 0xF; m = b & 7
    return s * (m / 8.0) * 2.0**-6 if e == 0 else s * (1 + m / 8.0) * 2.0**(e - 7)
E4 = np.array([e4m3(b) for b in range(256)])

D, WARPS, STAGES = int(sys.argv[2]) if len(sys.argv) > 2 else 512, 4, 2
GROUP = int(sys.argv[3]) if len(sys.argv) > 3 else 8
SPLIT = int(sys.argv[7]) if len(sys.argv) > 7 else 1
GROUPS = WARPS // SPLIT
BN = 16 * GROUPS; CH = D // 16 // SPLIT  # keys per tile; a warp's 16-dim steps
nkeys = int(sys.argv[4]) if len(sys.argv) > 4 else 45
window = int(sys.argv[5]) if len(sys.argv) > 5 else 0
F8 = (sys.argv[6] if len(sys.argv) > 6 else 'e4m3') == 'e4m3'
pos = nkeys - 1
scale_log2 = 1.0 * math.log2(math.e)

def codes(n):  # e4m3 bytes with exponent <= 8 (|v| < 4), no NaN
    b = rng.integers(0, 256, n)
    e = (b >> 3) & 0xF
    b = np.where(e > 8, b & 0x87 | (rng.integers(0, 9, n) << 3), b)
    return b.astype(np.uint8)
K = codes(nkeys * D).reshape(nkeys, D); V = codes(nkeys * D).reshape(nkeys, D)
Q = np.round(rng.normal(0, 0.5, (8, D)) * 64) / 64  # f16-exact
Q[GROUP:] = 0

def raw_offset(r, col):
    kch = D // 16; sw = min(kch, 8) - 1
    return r * D + ((((col >> 4) ^ (r & sw)) << 4) | (col & 15))
def tile_offset(r, chunk):  # bf16 stages: element offset of 8-element chunk `chunk` of row r
    kch = D // 8; sw = min(kch, 8) - 1
    return r * D + ((chunk ^ (r & sw)) << 3)
def q_off(h, d):
    return h * D + ((((d >> 3) ^ h) & (D // 8 - 1)) << 3) + (d & 7)

# smem Q as f16 values (we keep float), swizzled
q_s = np.zeros(8 * D)
for h in range(8):
    for d in range(D): q_s[q_off(h, d)] = Q[h, d]

def lane_gt(l): return l >> 2, l & 3
def ldmatrix_x4(stage, addrs, trans):
    # addrs[l]: byte offset of the row lane l points at (matrix l//8, row l%8)
    out = np.zeros((32, 4), dtype=np.uint32)
    for j in range(4):
        rows = [stage[addrs[8 * j + i]: addrs[8 * j + i] + 16] for i in range(8)]
        for l in range(32):
            g, t = lane_gt(l)
            if not trans:
                by = rows[g][4 * t: 4 * t + 4]
            else:
                by = np.concatenate([rows[2 * t][2 * g: 2 * g + 2], rows[2 * t + 1][2 * g: 2 * g + 2]])
            out[l, j] = int(by[0]) | int(by[1]) << 8 | int(by[2]) << 16 | int(by[3]) << 24
    return out
def ldmatrix_x4_elems(stage, addrs, trans):  # bf16: element arrays, rows of 8
    out = [[None] * 4 for _ in range(32)]
    for j in range(4):
        rows = [stage[addrs[8 * j + i]: addrs[8 * j + i] + 8] for i in range(8)]
        for l in range(32):
            g, t = lane_gt(l)
            out[l][j] = (rows[g][2*t], rows[g][2*t+1]) if not trans else (rows[2*t][g], rows[2*t+1][g])
    return out
def bf16(x):
    b = np.float32(x).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return float(np.uint32(b).view(np.float32))
def cvt(pair): return (E4[pair & 0xFF], E4[(pair >> 8) & 0xFF])  # (lo, hi) as floats
def byte_perm(v, sel):
    bs = [(v >> (8 * i)) & 0xFF for i in range(4)] + [0, 0, 0, 0]
    return sum(bs[(sel >> (4 * i)) & 0xF] << (8 * i) for i in range(4))
def mma(c, a, b):  # a: [32][4] pairs (lo,hi); b: [32][2] pairs; c: [32][4]
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for l in range(32):
        g, t = lane_gt(l)
        A[g, 2*t:2*t+2] = a[l][0]; A[g+8, 2*t:2*t+2] = a[l][1]
        A[g, 2*t+8:2*t+10] = a[l][2]; A[g+8, 2*t+8:2*t+10] = a[l][3]
        B[2*t:2*t+2, g] = b[l][0]; B[2*t+8:2*t+10, g] = b[l][1]
    Cm = A @ B
    for l in range(32):
        g, t = lane_gt(l)
        c[l] += [Cm[g, 2*t], Cm[g, 2*t+1], Cm[g+8, 2*t], Cm[g+8, 2*t+1]]
def movmatrix_t(frag):  # frag[l] = (lo, hi): row g, cols 2t, 2t+1
    M = np.zeros((8, 8))
    for l in range(32):
        g, t = lane_gt(l); M[g, 2*t], M[g, 2*t+1] = frag[l]
    T = M.T
    return [(T[l >> 2, 2*(l & 3)], T[l >> 2, 2*(l & 3)+1]) for l in range(32)]
f16 = lambda x: float(np.float16(x))

# one block, one split covering all keys: tiles from 0
num_tiles = (nkeys + BN - 1) // BN
valid_lo = max(0, pos - window + 1) if window else 0
# Per warp group: the softmax state (identical in both warps of a pair), and
# per warp its output steps.
state = []
for grp in range(GROUPS):
    state.append(dict(o=[np.zeros((CH, 32, 4)) for _ in range(SPLIT)], m=np.full((32, 2), -np.inf), l=np.zeros((32, 2))))
for tile in range(num_tiles):
    u0 = tile * BN
    ks = np.zeros(BN * D, dtype=np.uint8); vs = np.zeros(BN * D, dtype=np.uint8)
    kf = np.zeros(BN * D); vf = np.zeros(BN * D)
    for r in range(BN):
        u = u0 + r
        if valid_lo <= u < nkeys:
            for c in range(D // 16):
                ks[raw_offset(r, 16 * c): raw_offset(r, 16 * c) + 16] = K[u, 16 * c: 16 * c + 16]
                vs[raw_offset(r, 16 * c): raw_offset(r, 16 * c) + 16] = V[u, 16 * c: 16 * c + 16]
            for c in range(D // 8):
                kf[tile_offset(r, c): tile_offset(r, c) + 8] = E4[K[u, 8 * c: 8 * c + 8]]
                vf[tile_offset(r, c): tile_offset(r, c) + 8] = E4[V[u, 8 * c: 8 * c + 8]]
    for grp in range(GROUPS):
        st = state[grp]
        row = lambda l: 16 * grp + (l & 7) + ((l >> 3) & 1) * 8
        s = np.zeros((32, 4))
        for part in range(SPLIT):  # each warp's partial S^T, summed as through shared memory
            dim0 = part * (D // SPLIT)
            sp_ = np.zeros((32, 4))
            if F8:
              for ch in range(0, CH, 2):
                addrs = [raw_offset(row(l), dim0 + 16 * (ch + (l >> 4))) for l in range(32)]
                r = ldmatrix_x4(ks, addrs, False)
                for h in range(2):
                    a = []; b = []
                    for l in range(32):
                        g, t = lane_gt(l)
                        lo, hi = int(r[l, 2*h]), int(r[l, 2*h+1])
                        a.append([cvt(lo), cvt(hi), cvt(lo >> 16), cvt(hi >> 16)])
                        base = q_off(g, dim0 + 16 * (ch + h) + 4 * t)
                        b.append([(q_s[base], q_s[base+1]), (q_s[base+2], q_s[base+3])])
                    mma(sp_, a, b)
            else:
              for sp in range(CH):
                addrs = [tile_offset(row(l), dim0 // 8 + 2 * sp + (l >> 4)) for l in range(32)]
                r = ldmatrix_x4_elems(kf, addrs, False)
                a = [[r[l][0], r[l][1], r[l][2], r[l][3]] for l in range(32)]
                b = []
                for l in range(32):
                    g, t = lane_gt(l)
                    d = dim0 + 16 * sp + 2 * t
                    b0 = q_off(g, d); b1 = q_off(g, d + 8)
                    b.append([(q_s[b0], q_s[b0 + 1]), (q_s[b1], q_s[b1 + 1])])
                mma(sp_, a, b)
            s += sp_
        x = np.zeros((32, 4))
        for l in range(32):
            g, t = lane_gt(l)
            for e in range(4):
                v = s[l, e] * scale_log2
                u = u0 + 16 * grp + g + 8 * (e >> 1)
                if u < 0 or u > pos or (window and pos - u >= window) or u >= nkeys: v = -np.inf
                x[l, e] = v
        alpha = np.zeros((32, 2)); mnew = np.zeros((32, 2))
        for h in range(2):
            for l in range(32):
                t = l & 3
                m = max(x[l2, h] if x[l2, h] > x[l2, h+2] else x[l2, h+2] for l2 in range(32) if (l2 & 3) == t)
                mnew[l, h] = max(st['m'][l, h], m)
                alpha[l, h] = 1.0 if mnew[l, h] == -np.inf else 2.0 ** (st['m'][l, h] - mnew[l, h])
        st['m'] = mnew.copy()
        pr = np.zeros((32, 4))
        for l in range(32):
            for e in range(4):
                pr[l, e] = 0.0 if mnew[l, e & 1] == -np.inf else 2.0 ** (x[l, e] - mnew[l, e & 1])
        st['l'][:, 0] = st['l'][:, 0] * alpha[:, 0] + pr[:, 0] + pr[:, 2]
        st['l'][:, 1] = st['l'][:, 1] * alpha[:, 1] + pr[:, 1] + pr[:, 3]
        rnd = f16 if F8 else bf16
        pb0 = movmatrix_t([(rnd(pr[l, 0]), rnd(pr[l, 1])) for l in range(32)])
        pb1 = movmatrix_t([(rnd(pr[l, 2]), rnd(pr[l, 3])) for l in range(32)])
        for part in range(SPLIT):
            dim0 = part * (D // SPLIT)
            o = st['o'][part]
            for i in range(CH):
                o[i][:, 0] *= alpha[:, 0]; o[i][:, 2] *= alpha[:, 0]
                o[i][:, 1] *= alpha[:, 1]; o[i][:, 3] *= alpha[:, 1]
            if F8:
              for ch in range(0, CH, 2):
                addrs = [raw_offset(row(l), dim0 + 16 * (ch + (l >> 4))) for l in range(32)]
                r = ldmatrix_x4(vs, addrs, True)
                for h in range(2):
                    a = []; b = []
                    for l in range(32):
                        lo, hi = int(r[l, 2*h]), int(r[l, 2*h+1])
                        a.append([cvt(byte_perm(lo, 0x4420)), cvt(byte_perm(lo, 0x4431)),
                                  cvt(byte_perm(hi, 0x4420)), cvt(byte_perm(hi, 0x4431))])
                        b.append([pb0[l], pb1[l]])
                    mma(o[ch + h], a, b)
            else:
              for stp in range(CH):
                addrs = [tile_offset(row(l), dim0 // 8 + 2 * stp + (l >> 4)) for l in range(32)]
                r = ldmatrix_x4_elems(vf, addrs, True)
                a = [[r[l][0], r[l][2], r[l][1], r[l][3]] for l in range(32)]
                b = [[pb0[l], pb1[l]] for l in range(32)]
                mma(o[stp], a, b)
# lane sums over g
for st in state:
    for h in range(2):
        tot = np.zeros(32)
        for l in range(32): tot[l] = sum(st['l'][l2, h] for l2 in range(32) if (l2 & 3) == (l & 3))
        st['l'][:, h] = tot
# merge
mo = np.zeros((GROUPS, 8, D)); mm = np.zeros((GROUPS, 8)); ml = np.zeros((GROUPS, 8))
for grp, st in enumerate(state):
    for part in range(SPLIT):
        dim0 = part * (D // SPLIT)
        for i in range(CH):
            for l in range(32):
                g, t = lane_gt(l)
                o = st['o'][part][i]
                if F8:
                    dim = dim0 + 16 * i + 2 * g
                    mo[grp, 2*t, dim:dim+2] = o[l, 0], o[l, 2]
                    mo[grp, 2*t+1, dim:dim+2] = o[l, 1], o[l, 3]
                else:
                    dim = dim0 + 16 * i + g
                    mo[grp, 2*t, dim], mo[grp, 2*t+1, dim] = o[l, 0], o[l, 1]
                    mo[grp, 2*t, dim + 8], mo[grp, 2*t+1, dim + 8] = o[l, 2], o[l, 3]
    for l in range(4):
        t = l & 3
        mm[grp, 2*t], mm[grp, 2*t+1] = st['m'][l]; ml[grp, 2*t], ml[grp, 2*t+1] = st['l'][l]
out = np.zeros((GROUP, D))
for h in range(GROUP):
    m_all = mm[:, h].max()
    sc = np.array([0.0 if mm[w, h] == -np.inf else 2.0 ** (mm[w, h] - m_all) for w in range(GROUPS)])
    acc = (sc[:, None] * mo[:, h, :]).sum(0); ssum = (sc * ml[:, h]).sum()
    out[h] = acc / ssum if ssum > 0 else 0
# reference
Kf = E4[K]; Vf = E4[V]
ref = np.zeros((GROUP, D))
keys = [u for u in range(nkeys) if u <= pos and (not window or pos - u < window)]
for h in range(GROUP):
    sc = np.array([Q[h] @ Kf[u] for u in keys])
    p = np.exp(sc - sc.max()); p /= p.sum()
    ref[h] = p @ Vf[keys]
err = np.abs(out - ref).max() / max(1e-9, np.abs(ref).max())
print(f"{'e4m3' if F8 else 'bf16'} split={SPLIT} D={D} group={GROUP} keys={nkeys} window={window}: max rel err {err:.2e}")
sys.exit(0 if err < 1e-2 else 1)
