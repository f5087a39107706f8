# ratios.py FILE: per-round ratios of go test -bench output (rdmanet rows over their UDP baselines), medians and ranges, as docs/benchmarks.md quotes them.
import re,sys,statistics as st
runs={}
for line in open(sys.argv[1]):
    if not line.startswith('Benchmark'): continue
    f=line.split(); name=re.sub(r'-\d+$','',f[0])
    m={}
    for i in range(2,len(f)-1):
        try: v=float(f[i])
        except: continue
        m[f[i+1]]=v
    runs.setdefault(name,[]).append(m)
def med(name,metric): 
    v=[r[metric] for r in runs.get(name,[]) if metric in r]; return st.median(v) if v else None
def ratio(a,b,metric):
    A=[r[metric] for r in runs[a]]; B=[r[metric] for r in runs[b]]
    rs=[x/y for x,y in zip(A,B)]
    return st.median(rs),min(rs),max(rs)
sizes=['64B','1KiB','MTU4096']
print('PingPong p50 ns (median) and ratio to udp-connected [range]')
for s in sizes:
    row=[]
    for v in ['rdmanet','rdmanet-member','rdmanet-spin100us','udp-connected','udp']:
        n=f'BenchmarkPingPong/{v}/{s}'
        if n in runs: row.append(f"{v}={med(n,'p50-ns'):.0f}/{med(n,'p99-ns'):.0f}")
    rr=[]
    for v in ['rdmanet','rdmanet-member','rdmanet-spin100us']:
        r=ratio(f'BenchmarkPingPong/{v}/{s}',f'BenchmarkPingPong/udp-connected/{s}','p50-ns'); rr.append(f'{v} {r[0]:.2f}x [{r[1]:.2f}-{r[2]:.2f}]')
    print(s,' '.join(row),'|',' ; '.join(rr))
for s in sizes:
    a=f'BenchmarkPingPongUnicast/rdmanet/{s}'; b=f'BenchmarkPingPongUnicast/udp/{s}'
    if a in runs and b in runs:
        r=ratio(a,b,'p50-ns'); print('unicast',s,f"{med(a,'p50-ns'):.0f} vs {med(b,'p50-ns'):.0f}", f'{r[0]:.2f}x [{r[1]:.2f}-{r[2]:.2f}]')
print('Throughput msgs/s median (drop%) and ratio')
for s in sizes:
    row=[]
    for v in ['rdmanet','rdmanet-member','rdmanet-lend','rdmanet-spin50us','udp-connected','udp','rdmanet-batch','rdmanet-batch-gro','ipv4-batch']:
        n=f'BenchmarkThroughput/{v}/{s}'
        if n not in runs: continue  # rows older runs do not have
        row.append(f"{v}={med(n,'msgs/s')/1000:.0f}k({med(n,'drop%'):.1f}%)")
    rr=[]
    for a,b in [('rdmanet','udp-connected'),('rdmanet-member','udp-connected'),('rdmanet','udp'),('rdmanet-batch','ipv4-batch'),('rdmanet-batch-gro','ipv4-batch')]:
        if f'BenchmarkThroughput/{a}/{s}' not in runs: continue
        r=ratio(f'BenchmarkThroughput/{a}/{s}',f'BenchmarkThroughput/{b}/{s}','msgs/s'); rr.append(f'{a}/{b} {r[0]:.2f}x [{r[1]:.2f}-{r[2]:.2f}]')
    print(s,' '.join(row)); print('   ',' ; '.join(rr))
print('WriteTo ns/op')
for k in sorted(runs):
    if 'WriteTo' in k: print(k, f"{med(k,'ns/op'):.0f}")
