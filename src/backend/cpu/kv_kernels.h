// Host kernels of the paged-KV ops (backend/ops.h): writing a step's K/V
// into its sequences' blocks in any record format, attention over those
// blocks, and re-encoding blocks between stores. CpuOps (cpu_ops.cc)
// forwards Ops::KvWrite, Ops::PagedAttention and Ops::KvRecodeBlocks here.
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/isa.h"
#include "backend/ops.h"

G4_CPU_BEGIN

void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v);
void PagedAttention(const PagedAttentionArgs& args);
void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                    std::span<const int32_t> from_blocks, std::span<const int32_t> to_blocks,
                    std::span<const int32_t> tokens);

G4_CPU_END
