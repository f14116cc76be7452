// Helpers for the KV pool tests: synthetic Gemma 4 configs (the tiny-e
// fixture's config.json with its geometry overridden), deterministic K/V per
// (content, layer, position), and one step of KvWrite through a backend.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/kv_record.h"
#include "backend/step.h"
#include "io/config.h"
#include "kv/kv_pool.h"
#include "test_util.h"

namespace g4::testing {

struct SynthConfig {
  // Layer types, "s" or "f"; Gemma forces the last layer full.
  std::vector<std::string> types = {"s", "s", "f", "s", "s", "f", "s", "f"};
  int num_kv_shared = 2;   // the last layers read their donors' K/V
  int sliding_window = 8;
  int head_dim = 32;         // sliding layers
  int global_head_dim = 64;  // full layers
  int num_kv_heads = 2;
};

inline Gemma4Config MakeConfig(const SynthConfig& s = {}) {
  std::ifstream f(TestDataPath("models/tiny-e/config.json"));
  nlohmann::json j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(f), {}));
  std::vector<std::string> types;
  for (const std::string& t : s.types) types.push_back(t == "f" ? "full_attention" : "sliding_attention");
  j["layer_types"] = types;
  j["num_hidden_layers"] = types.size();
  j["num_kv_shared_layers"] = s.num_kv_shared;
  j["sliding_window"] = s.sliding_window;
  j["head_dim"] = s.head_dim;
  j["global_head_dim"] = s.global_head_dim;
  j["num_key_value_heads"] = s.num_kv_heads;
  j.erase("per_layer_config");
  auto c = ParseGemma4Config(j.dump());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Gemma4Config{};
}

inline KvScheme MustParseScheme(const std::string& spec) {
  auto s = KvScheme::Parse(spec);
  EXPECT_TRUE(s.ok()) << spec << ": " << s.status().ToString();
  return s.ok() ? *s : KvScheme{};
}

// A pool over `config` with the scheme `spec`; a failure fails the test
// (and gives null).
inline std::unique_ptr<KvPool> MakePool(const Gemma4Config& config, const std::string& spec, Backend& backend,
                                        const KvPoolOptions& options) {
  auto pool = KvPool::Create(config, MustParseScheme(spec), backend, options);
  EXPECT_TRUE(pool.ok()) << spec << ": " << pool.status().ToString();
  return pool.ok() ? std::move(pool).value() : nullptr;
}

// Capacity for every store of every group.
inline KvPoolOptions Capacity(int64_t blocks, int block_size = 16) {
  KvPoolOptions o;
  o.block_size = block_size;
  for (auto& g : o.capacity_blocks) g[0] = g[1] = blocks;
  return o;
}

// K or V of token `pos` of content `content` in `layer`: [width] floats in
// [-2, 2), the same whoever writes it (shared prefixes agree).
inline std::vector<float> TokenKv(uint32_t content, int layer, int64_t pos, int64_t width, bool value) {
  const uint32_t seed = static_cast<uint32_t>(content * 1000003u + layer * 7919u + pos * 31u + (value ? 17u : 0u));
  return RandomFloats(static_cast<size_t>(width), seed, -2.0f, 2.0f);
}

// Rows [from, to) of one layer's K and V for `content`.
inline void ContentRows(uint32_t content, int layer, int64_t from, int64_t to, int64_t width, std::vector<float>* k,
                        std::vector<float>* v) {
  k->clear();
  v->clear();
  for (int64_t p = from; p < to; ++p) {
    const auto kr = TokenKv(content, layer, p, width, false), vr = TokenKv(content, layer, p, width, true);
    k->insert(k->end(), kr.begin(), kr.end());
    v->insert(v->end(), vr.begin(), vr.end());
  }
}

// One step: appends n[i] tokens of content[i] to seqs[i] (PrepareAppend,
// tables, Ops::KvWrite for every layer that owns K/V, Commit). The step's
// arrays are host memory, which the CPU backend reads directly.
inline Status WriteStep(KvPool& pool, const std::vector<KvSeq*>& seqs, const std::vector<int64_t>& n,
                        const std::vector<uint32_t>& content) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    Status s = pool.PrepareAppend(*seqs[i], n[i]);
    if (!s.ok()) return s;
  }
  const Gemma4Config& config = pool.config();
  std::vector<int32_t> positions, row_seq, query_start = {0}, kv_len;
  int64_t max_rows = 0, max_kv = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int64_t at = pool.length(*seqs[i]);
    for (int64_t t = 0; t < n[i]; ++t) {
      positions.push_back(static_cast<int32_t>(at + t));
      row_seq.push_back(static_cast<int32_t>(i));
    }
    query_start.push_back(static_cast<int32_t>(positions.size()));
    kv_len.push_back(static_cast<int32_t>(at + n[i]));
    max_rows = std::max(max_rows, n[i]);
    max_kv = std::max<int64_t>(max_kv, at + n[i]);
  }
  StepRows rows;
  rows.num_rows = static_cast<int64_t>(positions.size());
  rows.num_seqs = static_cast<int64_t>(seqs.size());
  rows.positions = positions.data();
  rows.row_seq = row_seq.data();
  rows.query_start = query_start.data();
  rows.kv_len = kv_len.data();
  rows.max_query_rows = max_rows;
  rows.max_kv_len = max_kv;
  std::vector<const KvSeq*> cseqs(seqs.begin(), seqs.end());
  std::vector<int32_t> tables[kNumKvGroups];
  std::vector<uint8_t> stores[kNumKvGroups];
  KvStepTables step_tables[kNumKvGroups];
  for (int g = 0; g < kNumKvGroups; ++g) {
    const int64_t width = std::max<int64_t>(1, pool.TableWidth(cseqs, static_cast<KvGroup>(g)));
    tables[g].resize(seqs.size() * width);
    stores[g].resize(seqs.size());
    pool.FillTables(cseqs, static_cast<KvGroup>(g), tables[g].data(), width, stores[g].data());
    step_tables[g] = KvStepTables{tables[g].data(), width, stores[g].data()};
  }
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    const LayerGeometry& geo = config.layers[l];
    if (geo.kv_shared) continue;
    const int64_t width = static_cast<int64_t>(geo.num_kv_heads) * geo.head_dim;
    std::vector<float> k, v, kr, vr;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const int64_t at = pool.length(*seqs[i]);
      ContentRows(content[i], l, at, at + n[i], width, &kr, &vr);
      k.insert(k.end(), kr.begin(), kr.end());
      v.insert(v.end(), vr.begin(), vr.end());
    }
    const PagedKv kv = pool.LayerKv(l, step_tables[static_cast<int>(pool.group_of_layer(l))]);
    const MemorySpace space = pool.backend().space();
    pool.backend().ops().KvWrite(rows, kv, TensorView::F32(k.data(), rows.num_rows, width, space),
                                 TensorView::F32(v.data(), rows.num_rows, width, space));
  }
  pool.backend().Sync();
  for (size_t i = 0; i < seqs.size(); ++i) pool.Commit(*seqs[i], n[i]);
  return Status::Ok();
}

// Bookkeeping only: makes room for n tokens and commits them unwritten.
inline Status Append(KvPool& pool, KvSeq& seq, int64_t n) {
  Status s = pool.PrepareAppend(seq, n);
  if (s.ok()) pool.Commit(seq, n);
  return s;
}

// A scheduler's step of at most `want` tokens: a due precision change first,
// then a chunk cut at the next boundary. Returns the tokens appended.
inline StatusOr<int64_t> SchedulerStep(KvPool& pool, KvSeq& seq, int64_t want) {
  Status s = pool.Maintain(seq);
  if (!s.ok()) return s;
  const int64_t n = std::min(want, pool.max_append_tokens(seq));
  if (n <= 0) return Internal("max_append_tokens is 0 after Maintain");
  s = Append(pool, seq, n);
  if (!s.ok()) return s;
  return n;
}

// The block ids in seq's table for group g (FillTables), -1 for released.
inline std::vector<int32_t> Table(const KvPool& pool, const KvSeq& seq, KvGroup g, uint8_t* store = nullptr) {
  const KvSeq* one[] = {&seq};
  const int64_t width = pool.TableWidth(one, g);
  std::vector<int32_t> t(static_cast<size_t>(width));
  uint8_t st = 0;
  pool.FillTables(one, g, t.data(), width, &st);
  if (store) *store = st;
  return t;
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The records `content` should have in layer l, tokens [from, to), in format f.
inline std::vector<uint8_t> ExpectedRecords(const KvRecordFormat& f, uint32_t content, int layer, int64_t from,
                                            int64_t to) {
  std::vector<float> k, v;
  ContentRows(content, layer, from, to, f.width(), &k, &v);
  std::vector<uint8_t> out(static_cast<size_t>((to - from) * f.record_bytes));
  EncodeKvRecords(f, k.data(), v.data(), to - from, out.data());
  return out;
}

}  // namespace g4::testing
