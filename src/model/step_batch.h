// StepBatch: one forward step as the scheduler builds it on the host (the
// llama_ubatch / vLLM input-batch of g4). Rows are tokens grouped by
// sequence: each sequence contributes a run of consecutive positions
// continuing what its KvSeq holds (a prefill chunk, or one decode row).
// Output rows are the rows whose logits (and final hidden state) the caller
// wants, in ascending row order.
//
// The model uploads these arrays into its Activations (model/activations.h)
// and the ops read them there (backend/step.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "kv/kv_pool.h"

namespace g4 {

struct StepBatch {
  std::vector<int32_t> token_ids;    // [T]
  std::vector<int32_t> positions;    // [T]
  std::vector<int32_t> row_seq;      // [T]: index into seqs
  std::vector<int32_t> query_start;  // [S + 1]
  std::vector<int32_t> kv_len;       // [S]: tokens the sequence holds after the step
  std::vector<const KvSeq*> seqs;    // [S], borrowed for the step
  std::vector<int32_t> output_rows;  // [R], ascending
  // false: skip the LM head (the step only fills caches, or the caller
  // wants final hidden states alone).
  bool compute_logits = true;

  void Clear();
  int64_t num_rows() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(seqs.size()); }
  int64_t num_outputs() const { return static_cast<int64_t>(output_rows.size()); }

  // Appends seq's next tokens (positions seq.length() ...); the rows of
  // tokens[first_output ...] become output rows (first_output =
  // tokens.size(): none; tokens.size() - 1: the last; 0: all). Returns the
  // index of the first output row added (num_outputs() before the call).
  int64_t Add(const KvSeq& seq, std::span<const int32_t> tokens, int64_t first_output);

  // Checks the structure against a vocabulary (ids in range, runs
  // consecutive, output rows ascending and in range, no sequence twice).
  Status Validate(int vocab_size) const;
};

}  // namespace g4
