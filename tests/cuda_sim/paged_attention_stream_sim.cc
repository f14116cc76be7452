// src/backend/cuda/paged_attention_stream.cu compiled as C++ against the SIMT emulator's
// headers (include/), for paged_attention_sim_test.cc.
#include "backend/cuda/paged_attention_stream.cu"
