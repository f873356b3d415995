#!/bin/bash
# Fiftieth session, whichever card comes (carry [".whl", ".kcache"]):
#   BUDGET=<s> OSCARKV_COMMIT=<git rev-parse --short HEAD> bash bench/calls/run_gpu_s50any.sh
# an H200 runs run_gpu_s50h.sh (its README columns and variant rules are old), any other card run_gpu_s50.sh.
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash bench/calls/run_gpu_s50h.sh
else
  exec bash bench/calls/run_gpu_s50.sh
fi
