#!/bin/bash
# The monitor's cost, sixth pass, on the GPU machine: the third pass's script, run unchanged but
# for the name of its results (monitor6). From the repository root:
#   OUT=dir ROUNDS="copied evicted 3 4" bash docs/measurements/2026-12-03-monitor6/run.sh
NAME=${NAME:-monitor6} exec bash "$(dirname "$0")/../2026-12-02-monitor3/run.sh"
