// KvScheme: which cache each layer gets, parsed from the --kv SPEC text.
//
//   SPEC   := PART | TYPED ("," TYPED)*
//   TYPED  := ("full" | "sliding") "=" PART
//   PART   := CODEC ["@" N]              N: stay plain until N tokens, then convert
//   CODEC  := "plain" [":f32" | ":bf16" | ":f16"] | "affine:" BITS [":" GROUP]
//           | "turbo" [":k" KB "v" VB]
//
// BITS 4|8 (GROUP 32|64|128, default 64); KB 2|4|5|8, VB 2|3|4|5|8 (default
// k8v3). A bare PART applies to both layer types, except turbo, which (as in
// mlx-bun's TurboQuant) applies to full-attention layers only while sliding
// layers stay plain rings. Sliding layers always hold exactly their window in
// their pool blocks unless sliding_ring is false (tests: keep every block).
// Plain storage is f32 unless named (bf16 and f16 halve it); the plain phase
// of a delayed spec (N tokens before converting) is f32, so plain@N is plain
// (nothing to convert) while plain:bf16@N converts f32 -> bf16 at N.
// KV-shared layers get no cache whatever the scheme.
#pragma once

#include <string>

#include "backend/kv_record.h"
#include "core/status.h"

namespace g4 {

struct LayerKvSpec {
  KvCodecSpec codec;
  // Delayed precision: -1 = encode with `codec` from the first token; N >= 0 =
  // stay plain until the sequence holds N tokens, then convert once, before
  // its next step (never inside its first prefill chunk).
  int64_t delay = -1;
  // "kv:plain", "kv:affine:4:64", "kv:turbo:k8v3@512"
  std::string signature() const;
  bool delayed() const { return delay >= 0; }
  bool operator==(const LayerKvSpec&) const = default;
};

struct KvScheme {
  LayerKvSpec full;
  LayerKvSpec sliding;
  bool sliding_ring = true;

  // "full=kv:turbo:k8v3,sliding=kv:plain" ("sliding=unbounded+kv:plain" when
  // sliding layers keep every block).
  std::string signature() const;
  static StatusOr<KvScheme> Parse(const std::string& spec);
  bool operator==(const KvScheme&) const = default;
};

}  // namespace g4
