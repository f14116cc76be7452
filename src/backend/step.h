// The rows of one forward step as the ops see them: device arrays uploaded
// by the model from the host step (model/step_batch.h). A step holds the
// tokens of S sequences, T rows in all, grouped by sequence: sequence s owns
// rows [query_start[s], query_start[s + 1]), at consecutive positions ending
// at kv_len[s] - 1 (a prefill chunk, or one decode row). No padding.
#pragma once

#include <cstdint>

namespace g4 {

struct StepRows {
  int64_t num_rows = 0;  // T
  int64_t num_seqs = 0;  // S
  const int32_t* positions = nullptr;    // [T]
  const int32_t* row_seq = nullptr;      // [T]: the row's sequence, in [0, S)
  const int32_t* query_start = nullptr;  // [S + 1]
  const int32_t* kv_len = nullptr;       // [S]: tokens the sequence holds after this step
  // Host-known bounds (launch shapes): the longest run of rows of one
  // sequence and the largest kv_len in the step. Upper bounds: the model
  // rounds max_kv_len up to a power of two, so steps within a bucket launch
  // the same shapes (Backend::Replay).
  int64_t max_query_rows = 0;
  int64_t max_kv_len = 0;
};

// One layer group's block tables for the step's sequences.
struct KvStepTables {
  const int32_t* block_table = nullptr;  // [S, table_stride] block ids, -1 = none
  int64_t table_stride = 0;
  const uint8_t* seq_store = nullptr;    // [S]: 0 or 1 (PagedKv::store); null = all 0
};

}  // namespace g4
