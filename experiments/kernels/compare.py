#!/usr/bin/env python3
"""Row-by-row comparison of `ats bench kernels` GEMV tables: base (bench-base-{1,2}.txt) against the
table (bench-table-{1,2}.txt), best of the two rounds of each. Usage: compare.py DIR > table.md"""
import re
import sys

ROW = re.compile(r'^(Q4_0|Q4_K|Q8_0|Q6_K|MXFP4|F16|BF16|F32)\s+(\S+ \S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+'
                 r'([\d.]+)%\s+([\d.]+)\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)%\s+(\S+)\s+(\S+)')


def parse(path):
    text = open(path).read()
    rows = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows[(m[1], m[2])] = dict(mb=float(m[3]), med=float(m[4]), single=float(m[5]), graph=float(m[8]), kern=m[12])
    return rows, float(re.search(r'HBM read (\d+) GB/s', text)[1])


d = sys.argv[1]
B = [parse(f'{d}/bench-base-{r}.txt') for r in (1, 2)]
T = [parse(f'{d}/bench-table-{r}.txt') for r in (1, 2)]
probe = sum(p for _, p in T) / 2
print(f'HBM read probe (4 GiB): base {B[0][1]:.0f} / {B[1][1]:.0f} GB/s, table {T[0][1]:.0f} / {T[1][1]:.0f} GB/s')
print()
print('| type | shape | MB | kernel: base → table | median µs base (r1 / r2) | table (r1 / r2) | table / base | '
      'graph µs base → table | graph table / base | table % of probe (median / graph) |')
print('|---|---|---|---|---|---|---|---|---|---|')
worst = (0, None)
for k in B[0][0]:
    b, t = [x[0][k] for x in B], [x[0][k] for x in T]
    bm, tm = min(x['med'] for x in b), min(x['med'] for x in t)
    bg, tg = min(x['graph'] for x in b), min(x['graph'] for x in t)
    r, rg = tm / bm, tg / bg
    if r > worst[0]:
        worst = (r, k)
    pm = 100 * t[0]['mb'] * 1e6 / (tm * 1e-6) / (probe * 1e9)
    pg = 100 * t[0]['mb'] * 1e6 / (tg * 1e-6) / (probe * 1e9)
    flag = ' (> 1.03)' if r > 1.03 else ''
    print(f"| {k[0]} | {k[1]} | {b[0]['mb']:.1f} | {b[0]['kern']} → {t[0]['kern']} | {b[0]['med']:.2f} / {b[1]['med']:.2f} | "
          f"{t[0]['med']:.2f} / {t[1]['med']:.2f} | {r:.3f}{flag} | {bg:.2f} → {tg:.2f} | {rg:.3f} | {pm:.1f}% / {pg:.1f}% |")
print()
print(f'worst median ratio {worst[0]:.3f} ({worst[1][0]} {worst[1][1]})')
