#include "model/step_batch.h"

#include <algorithm>
#include <string>
#include <unordered_set>

namespace g4 {

void StepBatch::Clear() {
  token_ids.clear();
  positions.clear();
  row_seq.clear();
  query_start.assign(1, 0);
  kv_len.clear();
  seqs.clear();
  output_rows.clear();
  compute_logits = true;
}

int64_t StepBatch::Add(const KvSeq& seq, std::span<const int32_t> tokens, int64_t first_output) {
  if (query_start.empty()) query_start.push_back(0);
  const int64_t outputs_before = num_outputs();
  const int32_t s = static_cast<int32_t>(seqs.size());
  const int64_t start = seq.length();
  const int64_t row0 = num_rows();
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n; ++i) {
    token_ids.push_back(tokens[i]);
    positions.push_back(static_cast<int32_t>(start + i));
    row_seq.push_back(s);
  }
  seqs.push_back(&seq);
  kv_len.push_back(static_cast<int32_t>(start + n));
  query_start.push_back(static_cast<int32_t>(row0 + n));
  for (int64_t i = std::max<int64_t>(first_output, 0); i < n; ++i) output_rows.push_back(static_cast<int32_t>(row0 + i));
  return outputs_before;
}

Status StepBatch::Validate(int vocab_size) const {
  const int64_t T = num_rows(), S = num_seqs();
  if (T == 0) return InvalidArgument("[step] no rows");
  if (static_cast<int64_t>(positions.size()) != T || static_cast<int64_t>(row_seq.size()) != T ||
      static_cast<int64_t>(query_start.size()) != S + 1 || static_cast<int64_t>(kv_len.size()) != S)
    return InvalidArgument("[step] array sizes disagree");
  if (query_start[0] != 0 || query_start[S] != T) return InvalidArgument("[step] query_start does not cover the rows");
  std::unordered_set<const KvSeq*> seen;
  for (int64_t s = 0; s < S; ++s) {
    if (!seqs[s] || !seqs[s]->valid()) return InvalidArgument("[step] sequence " + std::to_string(s) + " is invalid");
    if (!seen.insert(seqs[s]).second)
      return InvalidArgument("[step] a sequence appears twice in one step");
    const int64_t begin = query_start[s], end = query_start[s + 1];
    if (end <= begin) return InvalidArgument("[step] sequence " + std::to_string(s) + " has no rows");
    if (kv_len[s] != seqs[s]->length() + (end - begin))
      return InvalidArgument("[step] sequence " + std::to_string(s) + ": kv_len does not continue its KV");
    for (int64_t r = begin; r < end; ++r) {
      if (row_seq[r] != s) return InvalidArgument("[step] rows are not grouped by sequence");
      if (positions[r] != seqs[s]->length() + (r - begin))
        return InvalidArgument("[step] row " + std::to_string(r) + " is not at its sequence's next position");
    }
  }
  for (int64_t r = 0; r < T; ++r)
    if (token_ids[r] < 0 || token_ids[r] >= vocab_size)
      return InvalidArgument("[model] token id " + std::to_string(token_ids[r]) + " at row " + std::to_string(r) +
                             " is outside the vocabulary (size " + std::to_string(vocab_size) + ")");
  for (size_t i = 0; i < output_rows.size(); ++i) {
    if (output_rows[i] < 0 || output_rows[i] >= T) return InvalidArgument("[step] output row out of range");
    if (i > 0 && output_rows[i] <= output_rows[i - 1]) return InvalidArgument("[step] output rows not ascending");
  }
  return Status::Ok();
}

}  // namespace g4
