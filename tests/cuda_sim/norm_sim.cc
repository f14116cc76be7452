// RmsNorm and AddNorm (src/backend/cuda/norm.cu) compiled as C++ against
// the SIMT emulator's headers (include/), whose shadows of cuda_runtime.h,
// pdl.cuh and prefetch.cuh come first on the include path.
#include "backend/cuda/norm.cu"
