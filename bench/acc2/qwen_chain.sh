set -x
cd /work/main/.wt/acc2
export HF_HUB_OFFLINE=1 PYTHONPATH=$PWD/src OMP_NUM_THREADS=2
PY="/work/main/.venv/bin/python"
D=runs/qwen4096/cal
date
nice -n 5 $PY /tmp/acc2/qwen_cal.py qwen2.5-coder-1.5b 4096 $D || exit 1
date
nice -n 5 $PY -m oscarkv.cli.main run --model qwen2.5-coder-1.5b --context 4096 --reuse-rotations $D --no-peers --no-pure --methods oscar-plus,kivi --out-dir runs/qwen4096
date
nice -n 5 $PY -m oscarkv.cli.main run --model qwen2.5-coder-1.5b --context 4096 --reuse-rotations $D --no-peers --no-pure --methods oscar,hadamard,int4 --out-dir runs/qwen4096
date
nice -n 5 $PY -m oscarkv.cli.main eval --model qwen2.5-coder-1.5b --rotations $D/rotations-perhead.safetensors --methods bf16,oscar+center --context 4096 --data pydoc-eval --json runs/qwen4096/perhead.json
date
