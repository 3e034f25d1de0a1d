"""ember-devices: the component registers with core, and without it core names the wheel."""
from component_checks import component_tests

globals().update(component_tests('devices', 'ember.cuda', 'device=cuda'))


def _driver_device_count() -> int:
    """The GPUs the CUDA driver reports, asked without ember (0 without bindings or driver)."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return 0
    try:
        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return 0
        err, n = driver.cuDeviceGetCount()
        return int(n) if int(err) == 0 else 0
    except Exception:  # noqa: BLE001 - no libcuda: no GPU
        return 0


def test_device_count_is_what_the_driver_reports():
    import os

    import ember
    import ember.cuda

    fake = os.environ.get("EMBER_CUDA_FAKE") in ("1", "nolaunch")
    want = 1 if fake else _driver_device_count()
    assert ember.cuda.device_count() == want
    assert ember.cuda.is_available() is (want > 0)
    if want == 0:
        return
    # a usable device: a tensor goes there and back with its values
    x = ember.arange(6.0).reshape(2, 3)
    y = x.to("cuda")
    assert y.device.type == "cuda" and y.is_cuda and not y.is_cpu
    assert (y * 2).cpu().tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert 0 <= ember.cuda.current_device() < want


def test_no_gpu_without_cuda_bindings():
    # whatever this machine has: the same interpreter with cuda-bindings hidden sees no GPU
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "for m in ('cuda', 'cuda.bindings', 'cuda.bindings.driver', 'cuda.bindings.runtime'):\n"
            "    sys.modules[m] = None\n"
            "import ember, ember.cuda\n"
            "print(ember.cuda.is_available(), ember.cuda.device_count())\n")
    env = {k: v for k, v in os.environ.items() if k != "EMBER_CUDA_FAKE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "0"]
