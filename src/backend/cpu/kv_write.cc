// cpu::KvWrite and cpu::KvRecodeBlocks (contracts: backend/ops.h): the
// host reference codecs (EncodeKvRecords / DecodeKvRecords) applied record
// by record in place, so the CPU backend's records are byte-identical to the
// reference by construction. Rows (blocks) are independent and write
// disjoint slots, so they are spread over the OpenMP team in any order.
#include <vector>

#include "backend/cpu/isa.h"
#include "backend/cpu/kv_kernels.h"
#include "backend/cpu/parallel.h"
#include "core/check.h"

G4_CPU_BEGIN
namespace {

// Encoding a row costs a few hundred ns to a few us; below this many rows
// a team costs more than it saves.
constexpr int64_t kMinParallelRows = 4;

}  // namespace

void KvWrite(const StepRows& rows, const PagedKv& kv, const TensorView& k, const TensorView& v) {
  if (rows.num_rows == 0) return;
  G4_CHECK_MSG(kv.block_size > 0, "[cpu] KvWrite: block size");
  for (int st = 0; st < 2; ++st) {
    const PagedKvStore& s = kv.store[st];
    if (s.records) G4_CHECK_MSG(s.format.record_bytes > 0, "[cpu] KvWrite: store without a record format");
  }
  const int64_t width = (kv.store[0].records ? kv.store[0] : kv.store[1]).format.width();
  G4_CHECK_MSG(k.dtype == DType::kF32 && v.dtype == DType::kF32 && k.cols == width && v.cols == width &&
                   k.rows >= rows.num_rows && v.rows >= rows.num_rows,
               "[cpu] KvWrite: k/v must be F32 [rows, num_kv_heads * head_dim]");
  const KvStepTables& t = kv.tables;
  ParallelFor(rows.num_rows, kMinParallelRows / 2, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t seq = rows.row_seq[r];
      G4_CHECK_MSG(seq >= 0 && seq < rows.num_seqs, "[cpu] KvWrite: row sequence out of range");
      const int32_t pos = rows.positions[r];
      G4_CHECK_MSG(pos >= 0 && pos < rows.kv_len[seq], "[cpu] KvWrite: row position past kv_len");
      const int st = t.seq_store ? t.seq_store[seq] : 0;
      G4_CHECK_MSG(st == 0 || st == 1, "[cpu] KvWrite: store must be 0 or 1");
      const PagedKvStore& store = kv.store[st];
      G4_CHECK_MSG(store.records != nullptr && store.format.width() == width,
                   "[cpu] KvWrite: store geometry");
      const int64_t entry = pos / kv.block_size;
      G4_CHECK_MSG(entry < t.table_stride, "[cpu] KvWrite: position past the block table");
      const int32_t block = t.block_table[seq * t.table_stride + entry];
      G4_CHECK_MSG(block >= 0 && block < store.num_blocks, "[cpu] KvWrite: slot in a missing block");
      uint8_t* rec = store.records + (block * static_cast<int64_t>(kv.block_size) + pos % kv.block_size) *
                                         store.format.record_bytes;
      EncodeKvRecords(store.format, static_cast<const float*>(k.at(r, 0)),
                      static_cast<const float*>(v.at(r, 0)), 1, rec);
    }
  });
}

void KvRecodeBlocks(const PagedKvStore& from, const PagedKvStore& to, int block_size,
                    std::span<const int32_t> from_blocks, std::span<const int32_t> to_blocks,
                    std::span<const int32_t> tokens) {
  G4_CHECK_MSG(from_blocks.size() == to_blocks.size() && tokens.size() == to_blocks.size(),
               "[cpu] KvRecodeBlocks: block lists differ in length");
  G4_CHECK_MSG(block_size > 0 && from.format.record_bytes > 0 && to.format.record_bytes > 0,
               "[cpu] KvRecodeBlocks: block size or formats");
  G4_CHECK_MSG(from.format.width() == to.format.width(),
               "[cpu] KvRecodeBlocks: stores of different geometry");
  G4_CHECK_MSG(from.records != to.records, "[cpu] KvRecodeBlocks: recoding a store into itself");
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t width = from.format.width();
  ParallelFor(n, 1, [&](int64_t i0, int64_t i1) {
    std::vector<float> kf(static_cast<size_t>(block_size) * width),
        vf(static_cast<size_t>(block_size) * width);
    for (int64_t i = i0; i < i1; ++i) {
      const int32_t fb = from_blocks[i], tb = to_blocks[i], count = tokens[i];
      G4_CHECK_MSG(fb >= 0 && fb < from.num_blocks && tb >= 0 && tb < to.num_blocks,
                   "[cpu] KvRecodeBlocks: block id out of range");
      G4_CHECK_MSG(count >= 0 && count <= block_size, "[cpu] KvRecodeBlocks: token count");
      DecodeKvRecords(from.format,
                      from.records + fb * static_cast<int64_t>(block_size) * from.format.record_bytes, count,
                      kf.data(), vf.data());
      EncodeKvRecords(to.format, kf.data(), vf.data(), count,
                      to.records + tb * static_cast<int64_t>(block_size) * to.format.record_bytes);
    }
  });
}

G4_CPU_END
