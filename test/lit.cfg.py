# lit configuration for the terra FileCheck suite (test/lit).
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "TERRA"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".json", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py",
                   "unit", "runtime"]
config.test_source_root = os.path.join(os.path.dirname(__file__), "lit")
config.test_exec_root = os.path.join(config.terra_obj_root, "test", "lit")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.terra_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(["terra-opt", "terra-translate",
                                    "terra-run-object"],
                                   [config.terra_tools_dir])
# Links graph objects into shared libraries for terra-run-object.
config.substitutions.append(("%cxx", config.terra_cxx))

# GPU tests (test/lit/GPU, docs/gpu.md). `ptxas`: the CUDA toolkit's PTX
# assembler is there to check the generated PTX; `terra-cuda-runtime`: the
# CUDA runtime library was built (TERRA_ENABLE_CUDA).
ptxas = os.path.join(config.terra_cuda_toolkit_dir or "/usr/local/cuda",
                     "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))
if config.terra_enable_cuda:
    config.available_features.add("terra-cuda-runtime")
    config.substitutions.append(("%terra_cuda_runtime_lib",
                                 config.terra_cuda_runtime_lib))
config.substitutions.append(("%terra_runtime_lib", config.terra_runtime_lib))
