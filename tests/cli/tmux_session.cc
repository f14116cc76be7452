#include "tmux_session.h"

#include <unistd.h>

#include <cstdio>

namespace g4::testing {

std::string Sh(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

bool HaveTmux() { return !Sh("command -v tmux").empty(); }

// Each session runs on a tmux server of its own (-L, a socket named after
// it): on the shared default server, one test process killing its last
// session stops the server under another process's new session (seen in CI:
// "no server running").
TmuxSession::TmuxSession(const std::string& name, const std::string& command)
    : name_(name + std::to_string(getpid())) {
  Sh(Tmux() + "kill-server");
  Sh(Tmux() + "new-session -d -x 200 -y 50 -s " + name_ + " '" + command + "; echo EXITED:$?; sleep 30'");
  Sh(Tmux() + "set-option -t " + name_ + " history-limit 5000");
}

TmuxSession::~TmuxSession() { Sh(Tmux() + "kill-server"); }

std::string TmuxSession::Tmux() const { return "tmux -L g4-" + name_ + " "; }

void TmuxSession::Keys(const std::string& keys) { Sh(Tmux() + "send-keys -t " + name_ + " " + keys); }

std::string TmuxSession::Screen() { return Sh(Tmux() + "capture-pane -p -S -2000 -t " + name_); }

bool TmuxSession::WaitForText(const std::string& text, double seconds) {
  return WaitFor([&](const std::string& s) { return Unwrapped(s).find(text) != std::string::npos; }, seconds);
}

std::string Unwrapped(std::string screen) {
  std::erase(screen, '\n');
  return screen;
}

size_t PromptLines(const std::string& s) {
  size_t n = 0, start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    if (end > start && s[start] == '>') ++n;
    start = end + 1;
  }
  return n;
}

}  // namespace g4::testing
