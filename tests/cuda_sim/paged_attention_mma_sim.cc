// The tensor-core attention kernels (src/backend/cuda/paged_attention_mma.cu)
// compiled as C++ against the SIMT emulator's headers (include/), whose
// shadows of cuda_runtime.h, cuda_bf16.h, pdl.cuh, cp_async.cuh and
// mma_sync.cuh come first on the include path.
#include "backend/cuda/paged_attention_mma.cu"
