# lit configuration for tfmc: spec diagnostics, dialect round-trips and verifier errors.
import os
import lit.formats

config.name = "tfmc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".yaml", ".test"]
config.excludes = ["Inputs", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tfmc_binary_dir, "tests", "lit")

path = os.pathsep.join([os.path.join(config.tfmc_binary_dir, "bin"), config.llvm_tools_dir,
                        config.environment.get("PATH", os.environ.get("PATH", ""))])
config.environment["PATH"] = path
# lit runs tests side by side; OpenMP threads that spin-wait for work then starve each other (a
# 2-core machine ran the suite 10x slower). Sleeping waiters cost little when a core is free.
config.environment["OMP_WAIT_POLICY"] = "PASSIVE"
# Side by side, tests keep each other's cores busy: train's notice about busy cores would come and
# go with the schedule. busy_cores.test turns it back on.
config.environment["TFMC_BUSY_NOTICE"] = "0"
# A sanitizer build (scripts/test.sh --sanitize) keeps its settings inside lit's clean environment.
for name in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.substitutions.append(("%models", os.path.join(config.tfmc_source_dir, "models")))
# The tfmc program itself, for tests that copy it or inspect how it is linked.
config.substitutions.append(("%{tfmc_path}", os.path.join(config.tfmc_binary_dir, "bin", "tfmc")))
# The interpreter running lit (standard library only in tests).
import sys
config.substitutions.append(("%python", sys.executable))
# The Multi30k corpus, beside the source tree (../shared), as CI provides it.
config.substitutions.append(("%multi30k", os.path.normpath(os.path.join(config.tfmc_source_dir, "..", "shared", "data", "multi30k"))))

# The Google Benchmark programs exist unless the build turned them off (the sanitizer build does).
if getattr(config, "tfmc_build_bench", False):
    config.available_features.add("bench")

# ASan reserves terabytes of address space for its shadow: tests that limit it run without ASan.
if getattr(config, "tfmc_sanitize", False):
    config.available_features.add("asan")

# The int8 GEMM's VNNI kernel runs where the CPU has AVX512-VNNI (else its sites run in f32).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo if line.startswith("flags")), [])
except OSError:
    flags = []
if all(f in flags for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni")):
    config.available_features.add("avx512vnni")

# Data-parallel tests run under Open MPI's mpirun (root allowed, more ranks than cores allowed:
# CI machines have 2 cores). Without MPI (no plugin built or no mpirun) they are skipped, said once.
import shutil
if getattr(config, "tfmc_have_mpi_plugin", False) and shutil.which("mpirun"):
    config.available_features.add("mpi")
    mpirun = "mpirun --allow-run-as-root --oversubscribe --bind-to none"
    # The sanitizer build: ranks keep ASan and UBSan but not LeakSanitizer. Open MPI's components
    # keep process-lifetime allocations that LSan reports from frames it cannot name (unwinding
    # stops in code without frame pointers), so no suppression can match them; tfmc's own
    # training code is leak-checked by the single-process tests.
    # (-x sets it for the ranks only; ASAN_OPTIONS means nothing to an uninstrumented build.)
    asan = os.environ.get("ASAN_OPTIONS", "")
    mpirun += " -x ASAN_OPTIONS=" + (asan + ":" if asan else "") + "detect_leaks=0"
    config.substitutions.append(("%mpirun", mpirun))
    # Containers often forbid the cross-memory attach vader tries.
    config.environment["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"
else:
    lit_config.note("MPI not found (tfmc's MPI plugin not built or no mpirun): the data-parallel tests are "
                    "skipped; scripts/bootstrap.sh installs openmpi-bin and libopenmpi-dev")
