"""The fair PyTorch set-up of ../shared/docs/TOOLCHAIN.md as an environment: Debian's torch on the
OpenMP OpenBLAS, with its SkylakeX (AVX-512) kernels where the CPU has AVX-512 (OpenBLAS 0.3.21
picks AVX2 kernels on a Zen 5 by itself). Elsewhere OpenBLAS chooses its kernels: forcing
SkylakeX on a CPU without AVX-512 dies of SIGILL. No torch import here: the drivers use it too.
"""
import os

BLAS_DIR = "/usr/lib/x86_64-linux-gnu/openblas-openmp"


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def fair_blas_env(env=None):
    """A copy of `env` (default os.environ) with the OpenMP OpenBLAS first on the library path and,
    on an AVX-512 CPU, OPENBLAS_CORETYPE=SkylakeX unless already set."""
    new_env = dict(os.environ if env is None else env)
    new_env["LD_LIBRARY_PATH"] = ":".join(p for p in [BLAS_DIR, new_env.get("LD_LIBRARY_PATH")] if p)
    if cpu_has_avx512():
        new_env.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    return new_env
