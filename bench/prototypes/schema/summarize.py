#!/usr/bin/env python3
"""Markdown tables from explain.mjs outputs: summarize.py label=file.json ..."""
import json, sys
runs = [(a.split('=', 1)[0], json.load(open(a.split('=', 1)[1]))) for a in sys.argv[1:]]
cols = [('walBytesWithCommit', 'WAL B'), ('walBytesNoFpi', 'WAL B w/o FPI'), ('walRecords', 'WAL records'),
        ('btreeInserts', 'index tuples'), ('sharedHit', 'buffers hit'), ('dirtied', 'dirtied')]
print('| schema | statement | ' + ' | '.join(c[1] for c in cols) + ' | exec ms / batch (median) |')
print('|---|---|' + '---:|' * (len(cols) + 1))
for label, d in runs:
    tot = {k: 0.0 for k, _ in cols}
    for st in ['submit', 'claim', 'heartbeat', 'complete']:
        p = d[st]['perJob']
        for k, _ in cols: tot[k] += p[k]
        print(f'| {label} | {st} | ' + ' | '.join(f'{p[k]:.1f}' if k.startswith('wal') and 'Records' not in k else f'{p[k]:.2f}' for k, _ in cols) + f' | {d[st]["medianExecMsPerBatch"]:.1f} |')
    nox = d.get('no xid', {}).get('bytes', 0) / max(1, d['claimed'])
    print(f'| {label} | **total** | ' + ' | '.join(f'**{tot[k]:.0f}**' if k.startswith('wal') and 'Records' not in k else f'**{tot[k]:.2f}**' for k, _ in cols) + f' | (+{nox:.0f} B/job WAL without xid) |')
