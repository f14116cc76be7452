// `g4 chat` in a real terminal, driven through tmux as a user would: type a
// message, watch the answer stream, Ctrl-C mid-answer, get the prompt back,
// use a command, quit with Ctrl-D.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "test_util.h"

namespace g4 {
namespace {

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

class TmuxSession {
 public:
  explicit TmuxSession(const std::string& command) : name_("g4chat" + std::to_string(getpid())) {
    Sh("tmux kill-session -t " + name_);
    Sh("tmux new-session -d -x 200 -y 50 -s " + name_ + " '" + command + "; echo EXITED:$?; sleep 30'");
  }
  ~TmuxSession() { Sh("tmux kill-session -t " + name_); }
  void Keys(const std::string& keys) { Sh("tmux send-keys -t " + name_ + " " + keys); }
  std::string Screen() { return Sh("tmux capture-pane -p -S -200 -t " + name_); }
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

 private:
  std::string name_;
};

// Lines that start with the chat prompt ">" (tmux drops trailing blanks).
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

TEST(ChatTmux, CtrlCStopsAnswerAndKeepsChat) {
  if (Sh("command -v tmux").empty()) GTEST_SKIP() << "tmux not installed";
  const std::string g4 = testing::BinaryDir() + "/g4";
  const std::string dir = testing::MakeTempDir() + "/tiny";
  const std::string synth = Sh(g4 + " synth --preset tiny --quant q8 --seed 3 --tokenizer " +
                               testing::TestDataPath("tokenizer/tokenizer.json") + " --out " + dir);
  ASSERT_NE(synth.find("bytes"), std::string::npos) << synth;

  // A random model rarely emits a stop token: the answer runs until Ctrl-C.
  TmuxSession t(g4 + " chat " + dir + " --temp 1 --seed 1 --max-tokens 100000");
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return PromptLines(s) >= 1; }, 60)) << t.Screen();
  t.Keys("'Hello there' Enter");
  // Wait until the answer has streamed a good amount of text past the prompt line.
  ASSERT_TRUE(t.WaitFor(
      [](const std::string& s) {
        const size_t at = s.find("Hello there");
        return at != std::string::npos && s.size() - at > 120;
      },
      60))
      << t.Screen();
  t.Keys("C-c");
  // The answer may wrap the marker across screen lines.
  auto unwrapped = [](std::string s) {
    std::erase(s, '\n');
    return s;
  };
  ASSERT_TRUE(t.WaitFor([&](const std::string& s) { return unwrapped(s).find("[stopped]") != std::string::npos; }, 30))
      << t.Screen();
  // The chat goes on: a fresh prompt, and commands still work.
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return PromptLines(s) >= 2; }, 10)) << t.Screen();
  t.Keys("'/think on' Enter");
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return s.find("[thinking on]") != std::string::npos; }, 10))
      << t.Screen();
  t.Keys("'/reset' Enter");
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return s.find("[conversation cleared]") != std::string::npos; }, 10))
      << t.Screen();
  // Ctrl-C at the prompt clears the line, it does not quit.
  t.Keys("'half typed' C-c");
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return s.find("^C") != std::string::npos; }, 10)) << t.Screen();
  EXPECT_EQ(t.Screen().find("EXITED"), std::string::npos);
  t.Keys("C-d");
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return s.find("EXITED:0") != std::string::npos; }, 20))
      << t.Screen();
}

}  // namespace
}  // namespace g4
