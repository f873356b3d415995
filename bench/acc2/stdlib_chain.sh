set -x
cd /work/main/.wt/acc2
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD/src OMP_NUM_THREADS=1
PY="/work/main/.venv/bin/python -m oscarkv.cli.main"
date
nice -n 3 $PY eval --data stdlib-docstrings --rotations runs/smol/cal/rotations.safetensors --plus-rotations runs/smol/cal/rotations-plus.safetensors --methods bf16,oscar,oscar-plus,kivi,hadamard,int4 --context 4096 --json runs/smol/stdlib.json
date
nice -n 3 $PY eval --data stdlib-docstrings --plus-rotations runs/smol/cal/rotations-perhead.safetensors --methods bf16,oscar-plus --context 4096 --json runs/smol/stdlib_perhead.json
date
