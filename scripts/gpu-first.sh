#!/bin/bash
# Runs on the GPU machine from the repository root after scripts/stage-gpu-run.sh (as
# .device/gpu-first.sh): a short run's start-up (docs/PERFORMANCE.md): the time to the first
# line, one small file and 500 files of 20 KiB, for .device/gpufilter beside an older binary
# put in .device/before/gpufilter (by hand), grep 3.8 and rg. Best and median of 15 runs.
set -u
W=/tmp/fl; mkdir -p $W
sh .device/opencl-setup.sh >/dev/null 2>&1
export LD_LIBRARY_PATH=$PWD/.device/lib:/usr/local/nvidia/lib64:${LD_LIBRARY_PATH:-}
nproc
python3 - <<'PY'
import os, subprocess, time, statistics
W='/tmp/fl'
line = b'2026-11-30 12:00:00 host app[123]: some ordinary log line with words\n'
if not os.path.exists(W+'/fl.txt'):
    open(W+'/fl.txt','wb').write(line * ((1<<20)//len(line)) + b'FINDME marker line\n' + line * ((512<<20)//len(line)))
    open(W+'/h.txt','wb').write(b'hello\n')
    os.makedirs(W+'/files', exist_ok=True)
    for i in range(500):
        open(f'{W}/files/f{i}','wb').write(line * (20480//len(line)))
def ttfb(cmd, n=15):
    xs=[]
    for _ in range(n):
        t=time.time(); p=subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        p.stdout.read(1); xs.append(time.time()-t); p.kill(); p.wait()
    return min(xs)*1000, statistics.median(xs)*1000
def whole(cmd, n=15):
    xs=[]
    for _ in range(n):
        t=time.time(); subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); xs.append(time.time()-t)
    return min(xs)*1000, statistics.median(xs)*1000
rg='.device/bin/rg'; grep='.device/grep'
files=[f'{W}/files/f{i}' for i in range(500)]
tools={'after':'.device/gpufilter','before':'.device/before/gpufilter','grep':grep,'rg':rg}
if not os.path.exists(tools['before']): del tools['before']
for name,exe in tools.items():
    fl=[exe,'--line-buffered','-F','-e','FINDME',W+'/fl.txt'] if name!='rg' else [exe,'--line-buffered','--no-config','-F','-e','FINDME',W+'/fl.txt']
    a=ttfb(fl); b=whole([exe,'hello',W+'/h.txt']); c=whole([exe,'-c','-F','-e','zzqq']+files, 7)
    print(f'{name:7s} first-line {a[0]:6.2f}/{a[1]:6.2f} ms  one small file {b[0]:6.2f}/{b[1]:6.2f} ms  500x20K -c {c[0]:6.2f}/{c[1]:6.2f} ms (best/median)', flush=True)
PY
