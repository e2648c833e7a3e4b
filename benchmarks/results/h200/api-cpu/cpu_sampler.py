#!/usr/bin/env python3
"""DEVICE. Every 0.5 s, CPU ticks (utime+stime) of every thread of every python/vllm process: one JSON line per sample.
usage: cpu_sampler.py OUTFILE SECONDS"""
import json
import os
import sys
import time

out, dur = sys.argv[1], float(sys.argv[2])
hz = os.sysconf("SC_CLK_TCK")
t_end = time.time() + dur
with open(out, "w") as f:
    while time.time() < t_end:
        snap = {}
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                if not any(b"python" in c or b"vllm" in c.lower() for c in cmd[:1]) and b"VLLM" not in open(f"/proc/{pid}/comm", "rb").read():
                    continue
                for tid in os.listdir(f"/proc/{pid}/task"):
                    st = open(f"/proc/{pid}/task/{tid}/stat").read()
                    comm = st[st.index("(") + 1:st.rindex(")")]
                    rest = st[st.rindex(")") + 2:].split()
                    snap[f"{pid}/{tid}/{comm}"] = (int(rest[11]) + int(rest[12])) / hz
            except (OSError, ValueError):
                continue
        f.write(json.dumps({"t": time.time(), "cpu": snap}) + "\n")
        time.sleep(0.5)
