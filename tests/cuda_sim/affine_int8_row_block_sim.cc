// The block-shared one-row MatMul (src/backend/cuda/affine_int8_row_block.cu)
// compiled as C++ against the SIMT emulator's
// headers (include/), whose shadows of cuda_runtime.h, pdl.cuh and
// dynamic_shared.cuh come first on the include path.
#include "backend/cuda/affine_int8_row_block.cu"
