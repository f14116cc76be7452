// Ops::KvWrite and Ops::KvRecodeBlocks on every backend, byte for byte:
// every slot a step writes holds exactly the host reference encoding of its
// row (EncodeKvRecords) in its sequence's store, and every other byte of
// both stores keeps its sentinel; recoding a block equals decoding its
// records and encoding them again on the host, and touches nothing else.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backend_test_util.h"
#include "paged_kv_test_util.h"

namespace g4::testing {
namespace {

class KvWriteTest : public BackendTest {};

// The expected image of a store: sentinel bytes, with the records of the
// given (sequence, position) slots.
std::vector<uint8_t> ExpectedStore(const PagedKvHarness& h, int store, int64_t bytes,
                                   const std::vector<std::pair<int, int64_t>>& written) {
  std::vector<uint8_t> image(bytes, PagedKvHarness::kSentinel);
  const int64_t rb = h.format(store).record_bytes;
  for (const auto& [seq, pos] : written) {
    if (h.store_of(seq) != store) continue;
    const std::vector<uint8_t> rec = h.Encode(seq);
    std::copy(rec.begin() + pos * rb, rec.begin() + (pos + 1) * rb, image.begin() + h.slot_of(seq, pos) * rb);
  }
  return image;
}

::testing::AssertionResult SameBytes(const std::vector<uint8_t>& want, const std::vector<uint8_t>& got,
                                     int64_t record_bytes) {
  if (want.size() != got.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i])
      return ::testing::AssertionFailure() << "first difference at byte " << i << " (slot " << i / record_bytes
                                           << ", byte " << i % record_bytes << "): " << +got[i] << " vs "
                                           << +want[i];
  return ::testing::AssertionSuccess();
}

TEST_P(KvWriteTest, WritesExactlyItsSlots) {
  uint32_t seed = 10;
  const KvCodecSpec codecs[] = {KvCodecSpec::Plain(), KvCodecSpec::Plain(DType::kBF16),
                                KvCodecSpec::Plain(DType::kF16), KvCodecSpec::Affine(4, 32),
                                KvCodecSpec::Affine(8, 128), KvCodecSpec::Turbo(8, 3), KvCodecSpec::Turbo(2, 5),
                                KvCodecSpec::Turbo(5, 8)};
  for (const KvCodecSpec& spec : codecs) {
    for (int head_dim : {128, 72}) {
      if (!spec.is_plain() && head_dim == 72) continue;
      AttentionShape shape;
      shape.num_heads = 4;
      shape.num_kv_heads = 2;
      shape.head_dim = head_dim;
      // Store 0 plain f32, store 1 the codec: sequences of both in one step.
      const KvRecordFormat f0 = MakeFormat(KvCodecSpec::Plain(), 2, head_dim), f1 = MakeFormat(spec, 2, head_dim);
      PagedKvHarness h(backend(), shape, f0, f1, 8, 40, ++seed);
      const int a = h.AddSequence(50, 1), b = h.AddSequence(9, 0), c = h.AddSequence(30, 1);
      std::vector<std::pair<int, int64_t>> written;
      auto step = [&](const std::vector<KvRun>& runs) {
        h.Step(runs, /*write=*/true, /*attend=*/false);
        for (const KvRun& r : runs)
          for (int64_t p = r.first; p < r.first + r.count; ++p) written.push_back({r.seq, p});
      };
      // A prefill chunk, a short prefill, a chunk starting mid-block; then
      // single decode rows, one of them alone.
      step({{a, 0, 21}, {b, 0, 9}, {c, 0, 5}});
      step({{c, 5, 20}, {a, 21, 1}});
      step({{a, 22, 1}});
      for (int st = 0; st < 2; ++st) {
        const std::vector<uint8_t> got = h.DownloadStore(st);
        EXPECT_TRUE(SameBytes(ExpectedStore(h, st, got.size(), written), got, h.format(st).record_bytes))
            << spec.signature() << " head_dim " << head_dim << " store " << st;
      }
    }
  }
}

TEST_P(KvWriteTest, RecodeBlocksEqualsDecodeThenEncode) {
  uint32_t seed = 50;
  const struct { KvCodecSpec from, to; } kPairs[] = {
      {KvCodecSpec::Plain(), KvCodecSpec::Affine(4, 64)},
      {KvCodecSpec::Plain(), KvCodecSpec::Turbo(8, 3)},
      {KvCodecSpec::Plain(), KvCodecSpec::Turbo(4, 2)},
      {KvCodecSpec::Plain(), KvCodecSpec::Plain(DType::kBF16)},
      {KvCodecSpec::Plain(DType::kF16), KvCodecSpec::Affine(8, 32)},
      {KvCodecSpec::Turbo(5, 4), KvCodecSpec::Plain()},
  };
  for (const auto& pair : kPairs) {
    AttentionShape shape;
    shape.num_kv_heads = 2;
    shape.head_dim = 64;
    const KvRecordFormat from = MakeFormat(pair.from, 2, 64), to = MakeFormat(pair.to, 2, 64);
    const int bs = 8;
    PagedKvHarness h(backend(), shape, from, to, bs, 24, ++seed);
    // Source records: a sequence of 45 tokens (5 full blocks, one of 5).
    const int s = h.AddSequence(45, 0);
    h.WriteOnHost(s);
    std::vector<int32_t> from_blocks, to_blocks, tokens;
    std::vector<int32_t> free_to(23);
    for (int i = 0; i < 23; ++i) free_to[i] = i + 1;
    std::shuffle(free_to.begin(), free_to.end(), std::mt19937(seed));
    for (int64_t e = 0; e * bs < 45; ++e) {
      from_blocks.push_back(static_cast<int32_t>(h.slot_of(s, e * bs) / bs));
      to_blocks.push_back(free_to[e]);
      tokens.push_back(static_cast<int32_t>(std::min<int64_t>(bs, 45 - e * bs)));
    }
    tokens[1] = 3;  // a partial copy of a full block: the rest stays untouched
    tokens[2] = 0;  // nothing to copy
    const std::vector<uint8_t> before_from = h.DownloadStore(0);
    const PagedKvStore fs = h.StoreView(0), ts = h.StoreView(1);
    backend().ops().KvRecodeBlocks(fs, ts, bs, from_blocks, to_blocks, tokens);
    backend().Sync();
    // Host reference: decode the source's records, encode them again.
    const std::vector<uint8_t> src = h.Encode(s);
    const int64_t w = 2 * 64, rf = from.record_bytes, rt = to.record_bytes;
    std::vector<uint8_t> want(h.DownloadStore(1).size(), PagedKvHarness::kSentinel);
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::vector<float> k(bs * w), v(bs * w);
      DecodeKvRecords(from, src.data() + i * bs * rf, tokens[i], k.data(), v.data());
      EncodeKvRecords(to, k.data(), v.data(), tokens[i], want.data() + to_blocks[i] * bs * rt);
    }
    const std::string what = pair.from.signature() + " -> " + pair.to.signature();
    EXPECT_TRUE(SameBytes(want, h.DownloadStore(1), rt)) << what;
    EXPECT_TRUE(SameBytes(before_from, h.DownloadStore(0), rf)) << what << ": the source changed";
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, KvWriteTest, BackendValues(), BackendParamName);

}  // namespace
}  // namespace g4::testing
