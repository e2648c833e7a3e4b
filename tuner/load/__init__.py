"""The load generator: workloads, arrivals, the streaming client, metrics and capacity search.

Modules, one concept each: `lengths` (length distributions), `arrivals` (arrival processes),
`profiles` (the seeds' named workloads), `trace` (trace replay), `workload` (requests from a
workload), `prompts` (prompts of exact length), `sse` (the one SSE parser), `stream` (reading and
timing one token stream), `target` (where load goes: HTTP or the simulator), `probes` (/metrics
and GPU sampling), `metrics` (the summary), `earlystop` (hopeless load points), `capacity`
(highest SLA-feasible load), `records_io` (Parquet), `output` (summary files and tables).
Definitions and defaults: docs/load.md.
"""
