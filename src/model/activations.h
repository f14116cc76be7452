// Activations: every buffer a forward step uses, in backend memory,
// allocated once for the largest step (gemma.cpp's Activations). A step
// takes views of its size; nothing is allocated while stepping, and for a
// fixed step shape the same addresses are used every time (what a CUDA graph
// replay needs).
//
// Ownership: owns its DeviceBuffers; the backend must outlive it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/tensor.h"
#include "core/status.h"
#include "io/config.h"

namespace g4 {

struct ActivationLimits {
  int64_t max_rows = 512;      // tokens in one step
  int64_t max_seqs = 64;       // sequences in one step
  int64_t max_outputs = 512;   // rows that want logits in one step
  int64_t max_table_width = 0; // block-table entries per sequence (0: from max_position_embeddings)
};

class Activations {
 public:
  // Sizes every buffer for `limits` and the model's geometry. `block_size`
  // is the KV pool's (it bounds block-table widths).
  static StatusOr<Activations> Create(const Gemma4Config& config, Backend& backend, const ActivationLimits& limits,
                                      int block_size);
  // The device bytes Create allocates for these limits (the engine sizes
  // its default KV pool around them).
  static size_t Bytes(const Gemma4Config& config, const ActivationLimits& limits, int block_size);
  Activations() = default;
  Activations(Activations&&) = default;
  Activations& operator=(Activations&&) = default;

  const ActivationLimits& limits() const { return limits_; }
  MemorySpace space() const { return space_; }

  // Float buffers, [max_rows, width] unless noted; a step uses the first rows.
  TensorView x, a, o;          // residual stream, normed input, block output [T, H]
  TensorView q, attn;          // [T, num_heads * max head_dim]
  TensorView k, v;             // [T, max kv heads * max head_dim]
  TensorView g, u;             // MLP [T, max mlp width]
  TensorView d, d2;            // FFN outputs [T, H]
  TensorView ple;              // per-layer inputs [T, layers * P] (PLE models)
  TensorView ple_tok;          // PLE token embedding scratch [T, layers * P]
  TensorView router;           // router logits [T, E] (MoE)
  TensorView expert_ids;       // I32 [T, k] (MoE)
  TensorView expert_weights;   // [T, k] (MoE)
  TensorView moe_workspace;    // U8 (MoE)
  TensorView hidden_out;       // final-normed hidden states [max_outputs, H]
  TensorView logits;           // [max_outputs, V]

  // Step arrays (int32 unless noted), filled from the StepBatch.
  int32_t* token_ids = nullptr;    // [max_rows]
  int32_t* positions = nullptr;    // [max_rows]
  int32_t* row_seq = nullptr;      // [max_rows]
  int32_t* query_start = nullptr;  // [max_seqs + 1]
  int32_t* kv_len = nullptr;       // [max_seqs]
  int32_t* output_rows = nullptr;  // [max_outputs]
  int32_t* block_table[2] = {nullptr, nullptr};  // per KvGroup [max_seqs, max_table_width]
  uint8_t* seq_store[2] = {nullptr, nullptr};    // per KvGroup [max_seqs]

  // A contiguous [rows, cols] view over the start of `buffer` (a step's
  // view of a capacity buffer; rows * cols must fit).
  static TensorView Flat(const TensorView& buffer, int64_t rows, int64_t cols);

  // Host staging for the step's block tables, [2 groups][max_seqs x width]
  // and [2][max_seqs] (reused every step; valid until the next step).
  std::vector<int32_t>& host_table() { return host_table_; }
  std::vector<uint8_t>& host_store() { return host_store_; }

 private:
  static ActivationLimits Resolved(const Gemma4Config& config, const ActivationLimits& limits, int block_size);
  std::pair<size_t, size_t> Layout(const Gemma4Config& config, char* fbase, char* ibase);

  ActivationLimits limits_;
  MemorySpace space_ = MemorySpace::kHost;
  DeviceBuffer floats_, ints_;
  std::vector<int32_t> host_table_;
  std::vector<uint8_t> host_store_;
};

}  // namespace g4
