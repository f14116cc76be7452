// g4 chat MODEL_DIR: an interactive terminal chat. Answers stream as they
// are generated; the conversation's KV cache is reused from turn to turn.
// Commands: /reset, /system TEXT, /think on|off, /help. Ctrl-C stops the
// current answer (or clears the line being typed) and keeps the chat;
// Ctrl-D on an empty line quits.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/sampling_flags.h"
#include "engine/generator.h"
#include "tokenizer/chat_format.h"

namespace g4::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

// Reads one line from stdin with read(2), so Ctrl-C (EINTR) is seen at once.
enum class LineStatus { kLine, kInterrupted, kEof };
LineStatus ReadLine(std::string* line) {
  line->clear();
  char c;
  while (true) {
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return LineStatus::kLine;
      line->push_back(c);
      continue;
    }
    if (n == 0) return line->empty() ? LineStatus::kEof : LineStatus::kLine;
    if (errno == EINTR && g_interrupted.exchange(false)) return LineStatus::kInterrupted;
    if (errno != EINTR) return LineStatus::kEof;
  }
}

struct ChatFlags {
  std::string model_dir, system;
  bool think = false;
  SamplingFlags sampling;
  EngineFlags engine;
};

void PrintHelp() {
  std::printf(
      "  /reset          start a new conversation\n"
      "  /system TEXT    set the system prompt (and reset)\n"
      "  /think on|off   let the model think before answering\n"
      "  Ctrl-C stops an answer; Ctrl-D quits.\n");
}

Status ChatLoop(const ChatFlags& f) {
  G4_ASSIGN_OR_RETURN(std::unique_ptr<ModelBundle> bundle, LoadModelBundle(f.model_dir, f.engine.backend));
  EngineFlags ef = f.engine;
  ef.max_seqs = 1;
  G4_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(*bundle->model, ToEngineOptions(ef)));
  struct sigaction sa {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR
  sigaction(SIGINT, &sa, nullptr);

  Generator gen(*engine, *bundle->tokenizer);
  GenerateOptions options;
  options.sampling = ResolveSampling(f.sampling, *bundle);
  options.max_tokens = f.sampling.max_tokens;
  options.stop_strings = f.sampling.stop;
  options.stop_ids = bundle->ChatStopIds();
  std::string system = f.system;
  bool think = f.think;
  std::vector<ChatMessage> history;

  std::printf("g4 chat: %s (loaded in %.2f s). /help for commands, Ctrl-D to quit.\n", f.model_dir.c_str(),
              bundle->load_seconds);
  std::string line;
  while (true) {
    std::printf("> ");
    std::fflush(stdout);
    const LineStatus ls = ReadLine(&line);
    if (ls == LineStatus::kEof) {
      std::printf("\n");
      return Status::Ok();
    }
    if (ls == LineStatus::kInterrupted) {
      std::printf("^C\n");
      continue;
    }
    if (line.empty()) continue;
    if (line == "/help") {
      PrintHelp();
      continue;
    }
    if (line == "/reset") {
      history.clear();
      gen.Reset();
      std::printf("[conversation cleared]\n");
      continue;
    }
    if (line.rfind("/system", 0) == 0) {
      system = line.size() > 8 ? line.substr(8) : "";
      history.clear();
      gen.Reset();
      std::printf("[system prompt %s; conversation cleared]\n", system.empty() ? "removed" : "set");
      continue;
    }
    if (line == "/think on" || line == "/think off") {
      think = line == "/think on";
      std::printf("[thinking %s]\n", think ? "on" : "off");
      continue;
    }
    if (line[0] == '/') {
      std::printf("[unknown command %s; /help lists them]\n", line.c_str());
      continue;
    }

    history.push_back({.role = "user", .content = line});
    std::vector<ChatMessage> messages;
    if (!system.empty()) messages.push_back({.role = "system", .content = system});
    messages.insert(messages.end(), history.begin(), history.end());
    ChatOptions chat;
    chat.enable_thinking = think;
    chat.empty_thought_channel = bundle->empty_thought_channel;
    auto rendered = RenderChat(messages, chat);
    if (!rendered.ok()) {
      history.pop_back();
      std::printf("[error: %s]\n", rendered.status().ToString().c_str());
      continue;
    }
    auto ids = bundle->tokenizer->Encode(*rendered);
    if (!ids.ok()) {
      history.pop_back();
      std::printf("[error: %s]\n", ids.status().ToString().c_str());
      continue;
    }
    g_interrupted.store(false);
    auto r = gen.Generate(*ids, options, [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }, &g_interrupted);
    if (!r.ok()) {
      history.pop_back();
      std::printf("\n[error: %s]\n", r.status().ToString().c_str());
      continue;
    }
    if (r->finish_reason == "cancelled") {
      g_interrupted.store(false);
      std::printf(" [stopped]");
    }
    std::printf("\n");
    history.push_back({.role = "assistant", .content = SplitReasoning(r->text).answer});
  }
}

}  // namespace

int RunChat(int argc, char** argv) {
  CLI::App app{"Chat with a model in the terminal", "g4 chat"};
  ChatFlags f;
  app.add_option("model", f.model_dir, "model directory")->required();
  app.add_option("--system", f.system, "system prompt");
  app.add_flag("--think", f.think, "start with thinking on");
  AddSamplingFlags(app, f.sampling);
  AddEngineFlags(app, f.engine, "plain:bf16");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Status s = ChatLoop(f);
  if (!s.ok()) return Fail("chat", s);
  return 0;
}

}  // namespace g4::cli
