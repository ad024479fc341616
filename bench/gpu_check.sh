#!/usr/bin/env bash
# GPU check (NVIDIA): learner updates/s at batch 512 with the full 160 x 120 network (fp32, bf16
# autocast, with and without torch.compile) and batched inference latency for k = 1, 8, 32.
# Installs a CUDA build of torch into .venv-gpu (plain `pip install torch`), then runs bench/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || { echo "gpu_check: no NVIDIA GPU here"; exit 1; }
python3 -m venv .venv-gpu
.venv-gpu/bin/pip install -q torch -e .
timeout 280 .venv-gpu/bin/python bench/gpu_check.py "$@"
