// A one-line progress bar on stderr for long work (synth, quantize, cold
// loading, long prefill, perplexity):
//
//   quantize [==============>         ]  58%  1.21/2.09 GB  3.2 s
//
// Drawn only when stderr is a terminal (so logs and pipes stay clean) and
// the caller enables it (not -q); redrawn at most ten times a second;
// Finish() leaves the final state on its own line.
//
// Threading: one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace g4::cli {

bool StderrIsTerminal();

class Progress {
 public:
  enum class Unit { kBytes, kTokens, kItems };
  // `label` starts the line ("quantize"); `total` may be 0 (unknown).
  Progress(std::string label, uint64_t total, Unit unit, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void Update(uint64_t done);
  // `note` replaces the size text after the percentage ("ppl 12.31").
  void Update(uint64_t done, const std::string& note);
  // Draws the final state and ends the line; later calls do nothing.
  void Finish();
  bool enabled() const { return enabled_; }

 private:
  void Draw();

  std::string label_, note_;
  uint64_t total_, done_ = 0;
  Unit unit_;
  bool enabled_, finished_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace g4::cli
