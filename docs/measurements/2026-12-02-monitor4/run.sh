#!/bin/bash
# The monitor's cost, fourth pass, on the GPU machine: the third pass's script, which this pass
# ran unchanged but for the name of its results (monitor4). From the repository root:
#   OUT=dir ROUNDS="copied evicted 3 4" bash docs/measurements/2026-12-02-monitor4/run.sh
NAME=${NAME:-monitor4} exec bash "$(dirname "$0")/../2026-12-02-monitor3/run.sh"
