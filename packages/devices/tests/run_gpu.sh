#!/usr/bin/env bash
# The CUDA backend's GPU suite, on a machine with an NVIDIA GPU (the lent device machine):
#   bash packages/devices/tests/run_gpu.sh [smoke|tests|bench|all|profile|ember|cudagraphs|autotune]
# (profile: cProfile + host fallbacks of the MLP/CNN/GPT steps; ember: the workloads on ember
# alone, no torch anchor; autotune: linear blocks eager / compiled / max-autotune templates)
# nvmath-python (cuBLAS bindings) is not in the device image: carry it as a wheel in .whl/.
set -u
cd "$(dirname "$0")/../../.."
what=${1:-all}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:${PYTHONPATH:-}
fi
export PYTHONPATH=packages/core/src:packages/autograd/src:packages/devices/src:packages/core/tests:${PYTHONPATH:-}
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp}
rc=0
# ember._C (core's native hit paths, the cuda launch plans included): built from source here
# (EMBER_NATIVE=0 at run time turns it off); without it ember takes the Python path
if [[ $what != smoke ]]; then
  python3 tools/build_native.py > "$out/build_native.log" 2>&1 \
    || echo "ember._C: build failed (see build_native.log): the Python path only"
fi
if [[ $what == smoke || $what == all ]]; then
  timeout 240 python3 packages/devices/tests/gpu_smoke.py 2>&1 | tee "$out/smoke.log" || rc=1
fi
if [[ $what == tests || $what == all ]]; then
  timeout 330 python3 -m pytest -q --timeout 120 -n 8 -p no:cacheprovider \
    packages/devices/tests 2>&1 | tail -150 | tee "$out/tests.log" || rc=1
  # ember.compile(mode="reduce-overhead") (CUDA graphs of compiled graphs) needs ember-compiler
  PYTHONPATH=packages/compiler/src:$PYTHONPATH timeout 450 python3 -m pytest -q --timeout 120 \
    -p no:cacheprovider packages/compiler/tests/test_cudagraphs.py \
    packages/compiler/tests/test_inductor_cuda.py packages/compiler/tests/test_triton_op.py \
    packages/compiler/tests/test_flex_attention_cuda.py \
    packages/compiler/tests/test_fuse_attention_cuda.py \
    packages/compiler/tests/test_inductor_cuda_gemm.py \
    packages/compiler/tests/test_inductor_cuda_dynamic.py \
    packages/compiler/tests/test_inductor_cuda_random.py \
    packages/compiler/tests/test_inductor_cuda_gpt.py \
    packages/compiler/tests/test_inductor_cuda_loss.py \
    packages/compiler/tests/test_inductor_cuda_dedup.py \
    packages/compiler/tests/test_compile_device_index.py \
    packages/compiler/tests/test_inductor_index64.py \
    packages/compiler/tests/test_inductor_cuda_layouts.py \
    packages/compiler/tests/test_inductor_cuda_reductions.py \
    packages/compiler/tests/test_cudagraphs_optim.py 2>&1 | tail -60 \
    | tee "$out/tests_compiler.log" || rc=1
fi
if [[ $what == bench || $what == all ]]; then
  timeout 400 python3 benchmarks/compare.py --device cuda --big \
    --only "${BENCH_ONLY:-op_overhead,elementwise,matmul,mlp_train}" 2>&1 | tee "$out/bench.log" || rc=1
fi
if [[ $what == profile ]]; then
  timeout ${PROFILE_TIMEOUT:-150} python3 packages/devices/tests/gpu_profile.py \
    "${PROFILE_ONLY:-mlp,cnn,gpt}" 30 > "$out/profile.log" 2>&1 || rc=1
  grep -E "^== |^host fallbacks|^  [a-z_]" "$out/profile.log"
fi
if [[ $what == cudagraphs ]]; then  # MLP/CNN train steps: eager vs mode="reduce-overhead"
  PYTHONPATH=packages/compiler/src:$PYTHONPATH timeout 300 python3 \
    packages/devices/tests/gpu_cudagraph_bench.py 2>&1 | tee "$out/cudagraphs.log" || rc=1
fi
if [[ $what == autotune ]]; then  # gelu(linear(x)) + r: extern GEMM + epilogue vs templates
  PYTHONPATH=packages/compiler/src:$PYTHONPATH timeout 400 python3 \
    packages/devices/tests/gpu_inductor_gemm_bench.py 2>&1 | tee "$out/autotune.log" || rc=1
fi
if [[ $what == ember ]]; then
  timeout ${BENCH_TIMEOUT:-300} python3 benchmarks/workloads.py --impl ember --device cuda --big \
    --only "${BENCH_ONLY:-op_overhead,elementwise,matmul,mlp_train}" 2>&1 | tee "$out/ember.log" || rc=1
fi
exit $rc
