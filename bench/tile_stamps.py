"""tile_stamps.py -- clock stamps per tile in a pingpong GEMM kernel of evtc's cache (a measuring tool).

    python3 tile_stamps.py instrument IN.cu OUT.cu

IN.cu is a cached kernel source of cuda_emit_gemm.c's pingpong template with a visitor epilogue and a bf16 /
f16 output (the first it stores gets the stamps).  OUT.cu stamps, for CTA 0's two consumer warpgroups and each
of their first 20 tiles, clock64() minus the clock as the CTA's threads leave its setup barrier (no shared
memory: the ring takes it all), at: the turn wait's start (t0), its end (t1), the first k-block's stage found
full (tf), the turn's pass once the main loop has issued its last k-block (tp), the main loop's last
wgmma_wait<0> (t2: the drain done) and the epilogue's end (t3).  At the kernel's end each warpgroup leader writes its stamps
into CTA 0's own first output tile (rows 20 wg + q, columns 4 s .. 4 s + 4 for stamp s): 28 bits a stamp as
four 7-bit chunks, each stored as the bf16 / f16 bits of 1 + chunk / 128 (a normal number, exact in both
types), so a harness reads them back through the program's output.  No calls in the kernel (a printf made
ptxas serialise every wgmma: WARPGROUP.DEPBAR after each HGMMA).

    python3 tile_stamps.py decode VALUES.txt

reads what tile_stamps_run prints (per output "# NAME", then its first 40 rows x 20 columns, one value a line),
takes the output that holds stamps and prints the timeline, then the steady state's means (tiles 4-29): the
turn wait, the main loop (issue + drain), the epilogue, the period a tile, then the issue and the drain, and
the wait until the first stage (t0 -> tf).  The turn wait (t0 -> t1) reads about 60 cycles whatever the wait:
the clock read after the barrier (SASS BAR.SYNC.DEFER_BLOCKING, CS2R SR_CLOCKLO) runs before the barrier
resolves (bench/RESULTS.md, twenty-seventh session); the first stage's wait, a shared-memory poll that the
barrier does order, holds the turn's wait and the stage's.
"""
import sys


def instrument(src_path, out_path):
    src = open(src_path).read().split('\n')
    out, state = [], 0
    store, skip = None, -1
    for k, line in enumerate(src):
        if k == skip:
            continue
        if state == 0 and line.startswith('extern "C" __global__ void __launch_bounds__(384'):
            out.append('__device__ unsigned long long evtc_stamp[2][20][6];')
            out.append(line)
            state = 1
            continue
        if state == 1 and line == '  __syncthreads();':
            out.append(line)   # every thread leaves this barrier within a few cycles: one base for both warpgroups
            out.append('  const unsigned long long stamp_base = clock64();')
            state = 2
            continue
        if state == 2 and line.startswith('  uint16_t *restrict a') and '= (uint16_t *)args[' in line:
            store = line.split('*restrict ')[1].split(' ')[0]
        if state == 2 and line == '    unsigned s = 0, ph = 0;':
            out.append(line)
            out.append('    unsigned long long st0 = 0, st1 = 0, stf = 0, stp = 0, st2 = 0;')
            state = 3
            continue
        if state == 3 and 'evtc_turn_wait(3 + wg);' in line:
            out += ['      st0 = clock64() - stamp_base;', line, '      st1 = clock64() - stamp_base;']
            state = 4
            continue
        if state == 4 and line.strip().startswith('evtc_mbar_wait(bar0 + 8u * s, ph);'):
            # a clock read and a select each k-block, no branch (a divergent path would serialise the wgmmas)
            out += [line, '        { const unsigned long long sc = clock64() - stamp_base; stf = kb == kb0 ? sc : stf; }']
            continue
        if state == 4 and 'evtc_turn_pass(3 + (wg ^ 1));' in line:
            out += [line, '      stp = clock64() - stamp_base;']
            continue
        if state == 4 and 'evtc_wgmma_wait<0>();' in line:
            out += [line, '      st2 = clock64() - stamp_base;']
            state = 5
            continue
        if state == 5 and line == '#undef EVTC_IN_N' and src[k + 1] == '      }' and src[k + 2] == '    }':
            out += [line, src[k + 1],
                    '      if (blockIdx.x == 0 && (threadIdx.x & 127) == 0 && it / 2 < 20) {',
                    '        unsigned long long *d = evtc_stamp[wg][it / 2];',
                    '        d[0] = st0; d[1] = st1; d[2] = stf; d[3] = stp; d[4] = st2; d[5] = clock64() - stamp_base;',
                    '      }']
            state, skip = 6, k + 1
            continue
        if state == 6 and line == '    }' and out[-1] == '      }':
            out.append(line)
            out += ['    if (blockIdx.x == 0 && (threadIdx.x & 127) == 0 && %s) {' % ('true' if store else 'false'),
                    '      for (int q = 0; q < 20; q++)',
                    '        for (int s4 = 0; s4 < 6; s4++)',
                    '          for (int c = 0; c < 4; c++)',
                    '            %s[(long long)(20 * wg + q) * CC + 4 * s4 + c] = (uint16_t)(STAMP_ONE | ((evtc_stamp[wg][q][s4] >> (7 * c)) & 127u));' % store,
                    '    }']
            state = 7
            continue
        out.append(line)
    if state != 7 or not store:
        sys.exit('tile_stamps.py: %s is not a pingpong GEMM kernel with a 2-byte output (stopped at step %d)' % (src_path, state))
    text = '\n'.join(out)
    one = '0x3F80u' if 'evtc_f2bf(' in text.split('#undef EVTC_FULL_TILE')[0].split('EVTC_FULL_TILE 1')[-1] else '0x3C00u'
    text = text.replace('__device__ unsigned long long evtc_stamp', '#define STAMP_ONE %s\n__device__ unsigned long long evtc_stamp' % one, 1)
    open(out_path, 'w').write(text)


STAMPS, COLS = 6, 24   # stamps a tile (t0, t1, tf, tp, t2, t3), output columns they take (4 chunks each)


def stamps_of(vals, f16):
    """The 40 rows of STAMPS stamps in one output's 40 x COLS values, or None when they are no stamps."""
    rows = []
    for r in range(40):
        stamps = []
        for s4 in range(STAMPS):
            v = 0
            for c in range(4):
                chunk = round((vals[r * COLS + 4 * s4 + c] - 1.0) * (1024 if f16 else 128))
                if not 0 <= chunk < (1024 if f16 else 128):
                    return None
                v |= (chunk & 127) << (7 * c)
            stamps.append(v)
        rows.append(stamps)
    return rows


def decode(path, f16=False):
    blocks, name = {}, None
    for line in open(path):
        if line.startswith('# '):
            name = line[2:].strip()
            blocks[name] = []
        elif line.strip():
            blocks[name].append(float(line))
    found = [(n, stamps_of(v, f16)) for n, v in blocks.items()]
    found = [(n, rows) for n, rows in found if rows]
    if not found:
        sys.exit('no output of %s holds stamps (outputs: %s)' % (path, ', '.join(blocks) or 'none'))
    name, rows = found[0]
    print('stamps in output %s' % name)
    print('%4s %3s %9s %7s %7s %7s %7s %7s %7s' % ('tile', 'wg', 'start', 'wait', 'main', 'epi', 'issue', 'drain',
                                                  'first'))
    tl = []
    for wg in range(2):
        for q in range(20):
            t0, t1, tf, tp, t2, t3 = rows[20 * wg + q]
            if t3 == 0:
                continue
            tl.append((t0, 2 * q + wg, wg, t1 - t0, t2 - t1, t3 - t2, tp - t1, t2 - tp, tf - t0))
    for t0, tile, wg, w, m, e, i, d, f in sorted(tl):
        print('%4d %3d %9d %7d %7d %7d %7d %7d %7d' % (tile, wg, t0, w, m, e, i, d, f))
    # the steady state: tiles 4-29 (the first ones fill the pipeline), period = a tile's share of warpgroup 0's cycle
    steady = [x for x in tl if 4 <= x[1] < 30]
    start = {x[1]: x[0] for x in tl}
    if len(steady) == 26 and 4 in start and 28 in start:
        mean = [sum(x[k] for x in steady) / len(steady) for k in (3, 4, 5, 6, 7, 8)]
        print('MEAN tiles 4-29: wait %.0f main %.0f epi %.0f period/tile %.0f issue %.0f drain %.0f first %.0f'
              % (mean[0], mean[1], mean[2], (start[28] - start[4]) / 24, mean[3], mean[4], mean[5]))


if __name__ == '__main__':
    if len(sys.argv) == 4 and sys.argv[1] == 'instrument':
        instrument(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 3 and sys.argv[1] == 'decode':
        decode(sys.argv[2], len(sys.argv) > 3 and sys.argv[3] == 'f16')
    else:
        sys.exit(__doc__)
