// KvScheme: which cache each layer gets, parsed from the --kv SPEC text.
//
//   SPEC   := PART | TYPED ("," TYPED)*
//   TYPED  := ("full" | "sliding") "=" PART
//   PART   := CODEC ["@" N]              N: stay plain until N tokens, then convert
//   CODEC  := "plain" | "affine:" BITS [":" GROUP] | "turbo" [":k" KB "v" VB]
//
// BITS 4|8 (GROUP 32|64|128, default 64); KB 2|4|5|8, VB 2|3|4|5|8 (default
// k8v3). A bare PART applies to both layer types, except turbo, which (as in
// the reference system) applies to full-attention layers only while sliding
// layers stay plain rings. Sliding layers always hold exactly their window in
// a ring unless sliding_ring is false (tests: unbounded reference caches).
// KV-shared layers get no cache whatever the scheme.
#pragma once

#include <string>

#include "core/status.h"
#include "kv/caches.h"

namespace g4 {

struct KvScheme {
  LayerKvSpec full;
  LayerKvSpec sliding;
  bool sliding_ring = true;

  // "full=kv:turbo:k8v3,sliding=kv:plain" (+ ",sliding=unbounded" when not rings).
  std::string signature() const;
  static StatusOr<KvScheme> Parse(const std::string& spec);
  bool operator==(const KvScheme&) const = default;
};

}  // namespace g4
