// `g4 chat` in a real terminal, driven through tmux as a user would: type a
// message, watch the answer stream, Ctrl-C mid-answer, edit a line with the
// arrow keys, recall history in a new session, save and restore a
// conversation with its KV cache, see the [length] notice and the stats
// footer, quit with /exit, /bye or Ctrl-D. And without a terminal: answers
// alone on stdout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "test_util.h"
#include "tmux_session.h"

namespace g4 {
namespace {

using testing::DemoModelDir;
using testing::G4Binary;
namespace fs = std::filesystem;
using testing::PromptLines;
using testing::TmuxSession;
using testing::Unwrapped;

TEST(ChatTmux, CtrlCStopsAnswerAndKeepsChat) {
  if (!testing::HaveTmux()) GTEST_SKIP() << "tmux not installed";
  const std::string dir = testing::MakeTempDir() + "/tiny";
  const std::string synth = testing::Sh(G4Binary() + " synth --preset tiny --quant q8 --seed 3 --tokenizer " +
                                        testing::TestDataPath("tokenizer/tokenizer.json") + " --out " + dir);
  ASSERT_NE(synth.find("bytes"), std::string::npos) << synth;

  // A random model rarely emits a stop token: the answer runs until Ctrl-C.
  TmuxSession t("g4chat", G4Binary() + " chat " + dir + " --no-history --temp 1 --seed 1 --max-tokens 100000");
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
  ASSERT_TRUE(t.WaitForText("[stopped]", 30)) << t.Screen();
  // The chat goes on: a fresh prompt, and commands still work.
  ASSERT_TRUE(t.WaitFor([](const std::string& s) { return PromptLines(s) >= 2; }, 10)) << t.Screen();
  t.Keys("'/think on' Enter");
  ASSERT_TRUE(t.WaitForText("[thinking on]", 10)) << t.Screen();
  t.Keys("'/reset' Enter");
  ASSERT_TRUE(t.WaitForText("[conversation cleared]", 10)) << t.Screen();
  // Ctrl-C at the prompt drops the line, it does not quit.
  t.Keys("'half typed' C-c");
  ASSERT_TRUE(t.WaitForText("^C", 10)) << t.Screen();
  EXPECT_EQ(t.Screen().find("EXITED"), std::string::npos);
  t.Keys("C-d");
  ASSERT_TRUE(t.WaitForText("EXITED:0", 20)) << t.Screen();
}

// The stats footers on the screen, in order: {new prompt tokens, cached}.
std::vector<std::pair<int, int>> Footers(const std::string& screen) {
  std::vector<std::pair<int, int>> out;
  const std::regex footer(R"(prompt (\d+) new \+ (\d+) cached)");
  const std::string s = Unwrapped(screen);
  for (std::sregex_iterator it(s.begin(), s.end(), footer), end; it != end; ++it)
    out.emplace_back(std::stoi((*it)[1]), std::stoi((*it)[2]));
  return out;
}

TEST(ChatTmux, LineEditingHistoryAndSavedConversations) {
  if (!testing::HaveTmux()) GTEST_SKIP() << "tmux not installed";
  const std::string home = testing::MakeTempDir();
  const std::string saved = home + "/talk.g4kv";
  const std::string env = "env -u XDG_STATE_HOME HOME=" + home + " ";
  {
    TmuxSession t("g4edit", env + G4Binary() + " chat -m " + DemoModelDir() + " --temp 0 -n 40");
    ASSERT_TRUE(t.WaitForText("/help for commands", 30)) << t.Screen();
    // Arrow keys move the cursor: "wrld" becomes "world" before it is sent.
    t.Keys("'wrld' Left Left Left 'o' Enter");
    ASSERT_TRUE(t.WaitFor([](const std::string& s) { return Footers(s).size() >= 1; }, 30)) << t.Screen();
    const std::string screen = t.Screen();
    EXPECT_NE(screen.find("> world"), std::string::npos) << screen;
    EXPECT_EQ(screen.find("[D"), std::string::npos) << "an arrow key reached the line as text:\n" << screen;
    // A line ending in a backslash continues on the next.
    t.Keys("'Tell me about\\' Enter");
    ASSERT_TRUE(t.WaitFor([](const std::string& s) { return s.find("\n...") != std::string::npos; }, 10))
        << t.Screen();
    t.Keys("'Debian packages.' Enter");
    ASSERT_TRUE(t.WaitFor([](const std::string& s) { return Footers(s).size() >= 2; }, 30)) << t.Screen();
    // The second turn reused the first one's cache.
    EXPECT_GT(Footers(t.Screen())[1].second, 0) << t.Screen();
    t.Keys("'/save " + saved + "' Enter");
    ASSERT_TRUE(t.WaitForText("[saved ", 10)) << t.Screen();
    t.Keys("'/exit' Enter");
    ASSERT_TRUE(t.WaitForText("EXITED:0", 20)) << t.Screen();
  }
  std::ifstream history(home + "/.local/state/g4/history");
  std::stringstream h;
  h << history.rdbuf();
  EXPECT_NE(h.str().find("world"), std::string::npos) << h.str();
  EXPECT_EQ(fs::status(home + "/.local/state/g4/history").permissions() & fs::perms::others_read, fs::perms::none);

  std::smatch m;
  std::string first_screen;
  {
    TmuxSession t("g4load", env + G4Binary() + " chat " + DemoModelDir() + " --temp 0 -n 3");
    ASSERT_TRUE(t.WaitForText("/help for commands", 30)) << t.Screen();
    // History from the last session: Up four times reaches "world".
    t.Keys("Up Up Up Up");
    ASSERT_TRUE(t.WaitFor([](const std::string& s) { return s.find("> world") != std::string::npos; }, 10))
        << t.Screen();
    t.Keys("C-u '/load " + saved + "' Enter");
    ASSERT_TRUE(t.WaitForText("[loaded 4 turns, ", 10)) << t.Screen();
    const std::string s = Unwrapped(t.Screen());
    ASSERT_TRUE(std::regex_search(s, m, std::regex(R"(\[loaded 4 turns, (\d+) tokens)"))) << s;
    const int loaded = std::stoi(m[1]);
    t.Keys("'And then?' Enter");
    // -n 3: the answer is cut, and says so.
    ASSERT_TRUE(t.WaitForText("[length]", 30)) << t.Screen();
    ASSERT_TRUE(t.WaitFor([](const std::string& s) { return Footers(s).size() >= 1; }, 10)) << t.Screen();
    // Everything the file held was reused: the conversation continued.
    EXPECT_EQ(Footers(t.Screen())[0].second, loaded) << t.Screen();
    t.Keys("'/load /nonexistent.g4kv' Enter");
    ASSERT_TRUE(t.WaitForText("[not loaded:", 10)) << t.Screen();
    t.Keys("'/bye' Enter");
    ASSERT_TRUE(t.WaitForText("EXITED:0", 20)) << t.Screen();
  }
}

TEST(ChatPipes, AnswersOnStdoutEverythingElseOnStderr) {
  const std::string tmp = testing::MakeTempDir();
  std::ofstream(tmp + "/in.txt") << "What is a Python dictionary?\n\"\"\"\nName a sorting\nalgorithm.\n\"\"\"\n/quit\n";
  const auto r = testing::RunG4("chat " + DemoModelDir() + " --temp 0 -n 24 < " + tmp + "/in.txt");
  ASSERT_EQ(r.exit_code, 0) << r.all;
  const std::string err = r.all.substr(r.out.size());
  EXPECT_NE(err.find("g4 chat: "), std::string::npos) << err;  // the banner
  EXPECT_EQ(Footers(err).size(), 2u) << err;                   // one footer per answer
  EXPECT_EQ(r.out.find("g4 chat"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("tokens"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("> "), std::string::npos) << r.out;  // no prompts without a terminal
  // A conversation past the context (-c) is refused with a way out, and the chat goes on.
  const auto full = testing::RunG4("chat " + DemoModelDir() + " -c 16 -n 4 < " + tmp + "/in.txt");
  ASSERT_EQ(full.exit_code, 0) << full.all;
  EXPECT_NE(full.all.find("past the context (16): /reset starts over"), std::string::npos) << full.all;
  // The first answer is the text `g4 generate` gives for the same turn.
  const auto solo = testing::RunG4("generate " + DemoModelDir() + " 'What is a Python dictionary?' --temp 0 -n 24 -q");
  ASSERT_GT(solo.out.size(), 1u);
  EXPECT_EQ(r.out.rfind(solo.out, 0), 0u) << r.out << "\nvs\n" << solo.out;
}

}  // namespace
}  // namespace g4
