// Driving a command in a real terminal through tmux, as a user would: keys
// in, screen out. Used by the chat and progress-bar tests.
#pragma once

#include <chrono>
#include <string>
#include <thread>

namespace g4::testing {

// Runs `cmd` with sh, stderr joined to stdout; returns the output.
std::string Sh(const std::string& cmd);
bool HaveTmux();

class TmuxSession {
 public:
  // Starts `command` in a detached 200x50 session; when it ends, the pane
  // shows "EXITED:<code>" and stays for 30 s. `name` must be unique among
  // the sessions a test binary runs at once.
  TmuxSession(const std::string& name, const std::string& command);
  ~TmuxSession();
  // tmux send-keys arguments, e.g. "'Hello there' Enter" or "C-c".
  void Keys(const std::string& keys);
  // The screen and the 2000 lines of history above it.
  std::string Screen();
  // Polls the screen until `pred` holds or `seconds` pass.
  template <typename Pred>
  bool WaitFor(Pred pred, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (pred(Screen())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return pred(Screen());
  }
  // Waits until `text` is on the screen (lines joined, so a wrapped line
  // still matches).
  bool WaitForText(const std::string& text, double seconds);

 private:
  std::string Tmux() const;  // "tmux -L <this session's server> "
  std::string name_;
};

// The screen with its line breaks removed (tmux wraps long lines).
std::string Unwrapped(std::string screen);
// Lines that start with the chat prompt ">" (tmux drops trailing blanks).
size_t PromptLines(const std::string& screen);

}  // namespace g4::testing
