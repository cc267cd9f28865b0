#!/bin/bash
# The monitor's cost, eighth pass, on the GPU machine: the third pass's script, run unchanged but
# for the name of its results (monitor8): the cheaper redraw (this folder's README) against
# base 49ae613. From the repository root:
#   OUT=dir ROUNDS="copied evicted 3 4 5" bash docs/measurements/2026-12-04-monitor8/run.sh
NAME=${NAME:-monitor8} exec bash "$(dirname "$0")/../2026-12-02-monitor3/run.sh"
