// The affine MatMul on the int8 tensor cores (src/backend/cuda/affine_int8_mma.cu)
// compiled as C++ against the SIMT emulator's headers (include/), whose
// shadows of cuda_runtime.h, pdl.cuh, cp_async.cuh, mma_sync.cuh and
// dynamic_shared.cuh come first on the include path.
#include "backend/cuda/affine_int8_mma.cu"
