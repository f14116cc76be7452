#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace g4::cli {
namespace {

constexpr int kBarWidth = 28;

std::string Amount(uint64_t n, Progress::Unit unit) {
  char buf[32];
  switch (unit) {
    case Progress::Unit::kBytes:
      if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2f GB", n / 1e9);
      else std::snprintf(buf, sizeof buf, "%.1f MB", n / 1e6);
      break;
    case Progress::Unit::kTokens:
      std::snprintf(buf, sizeof buf, "%llu tokens", static_cast<unsigned long long>(n));
      break;
    case Progress::Unit::kItems:
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
      break;
  }
  return buf;
}

}  // namespace

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string label, uint64_t total, Unit unit, bool enabled)
    : label_(std::move(label)), total_(total), unit_(unit), enabled_(enabled && StderrIsTerminal()),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { Finish(); }

void Progress::Update(uint64_t done) { Update(done, note_); }

void Progress::Update(uint64_t done, const std::string& note) {
  done_ = done;
  note_ = note;
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  Draw();
}

void Progress::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  Draw();
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

void Progress::Draw() {
  drawn_ = true;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = "\r\033[K" + label_ + " [";
  if (total_ > 0) {
    const double f = std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
    const int filled = static_cast<int>(f * kBarWidth);
    for (int i = 0; i < kBarWidth; ++i) line += i < filled ? '=' : (i == filled ? '>' : ' ');
    char pct[16];
    std::snprintf(pct, sizeof pct, "] %3d%%  ", static_cast<int>(f * 100));
    line += pct;
    line += note_.empty() ? Amount(done_, unit_) + "/" + Amount(total_, unit_) : note_;
  } else {
    line += "...] " + (note_.empty() ? Amount(done_, unit_) : note_);
  }
  char time[32];
  std::snprintf(time, sizeof time, "  %.1f s", secs);
  line += time;
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace g4::cli
